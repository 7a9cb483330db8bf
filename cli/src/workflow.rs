//! `waymark workflow …`: the client API from a shell.

use std::time::Duration;

use clap::Subcommand;
use waymark_sdk::{ListOptions, WorkflowStatus};

use super::{
    output,
    workflow_start::StartArgs,
    workflow_view::{print_json, print_steps, show},
    ClientArgs,
};
use waymark_server::duration::parse_duration;

#[derive(Subcommand, Debug)]
pub enum WorkflowCommand {
    /// Start a workflow; prints its id.
    Start {
        #[command(flatten)]
        start: StartArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Start a workflow unless its id was started already, and send it a message, in one
    /// transaction: the message is there before it first runs. Prints the workflow's id.
    StartAndSend {
        #[command(flatten)]
        start: StartArgs,
        /// The message as JSON.
        #[arg(long)]
        message: String,
        /// Topic; the default topic when not given.
        #[arg(long, default_value = "")]
        topic: String,
        /// A retried call with the same key delivers once.
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Move the start of a workflow still waiting for its delayed start.
    Delay {
        id: String,
        /// From now, e.g. 5m; 0s runs it at once.
        #[arg(value_parser = parse_duration)]
        delay: Duration,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one workflow.
    Get {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List workflows, newest first.
    List {
        #[command(flatten)]
        filter: super::workflow_lifecycle::FilterArgs,
        /// Also print how many workflows match (a count over every match).
        #[arg(long)]
        total: bool,
        /// At most this many.
        #[arg(long, default_value_t = 100)]
        limit: i32,
        /// Continue from a previous listing's next page token.
        #[arg(long)]
        page_token: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show a workflow's recorded steps.
    Steps {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a workflow's recorded history as JSON (its name, input and steps): the form each
    /// SDK's Replayer replays offline against changed workflow code before a deploy.
    Export {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Wait for a workflow to finish and print its result. Exit code 3 if it did not succeed.
    Await {
        id: String,
        /// Give up after this long (e.g. 30s); waits indefinitely when not given.
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<Duration>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Cancel a workflow; it stops at its next step.
    Cancel {
        id: String,
        /// Cancel its child workflows too, and theirs.
        #[arg(long)]
        cascade: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    #[command(flatten)]
    Lifecycle(super::workflow_lifecycle::LifecycleCommand),
    /// Send a message to a workflow (it takes it with recv). Prints the message id.
    Send {
        id: String,
        /// The message as JSON.
        #[arg(long)]
        message: String,
        /// Topic; the default topic when not given.
        #[arg(long, default_value = "")]
        topic: String,
        /// A retried send with the same key is delivered once.
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Send an update to a running workflow and wait for its answer, which is printed (JSON).
    /// A rejection exits non-zero with the workflow's reason.
    Update {
        id: String,
        /// The update's name, as the workflow receives it.
        name: String,
        /// Its arguments as JSON.
        #[arg(long, default_value = "null")]
        args: String,
        /// The same id is the same update: sent again, it is answered again, not run again.
        #[arg(long)]
        update_id: Option<String>,
        /// How long to wait for the answer (default 60s).
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<Duration>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the messages sent to a workflow, consumed or not.
    Messages {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show a workflow's events: current values and history.
    Events {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print the current value of one event. Exit code 4 if it is not set (in time).
    Event {
        id: String,
        key: String,
        /// Wait up to this long for it to be set (e.g. 30s, at most 24h).
        #[arg(long, value_parser = parse_duration)]
        wait: Option<Duration>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a workflow's stream, one JSON value a line, following it live until it is closed or
    /// the workflow finishes.
    Stream {
        id: String,
        key: String,
        /// First offset to print.
        #[arg(long, default_value_t = 0)]
        from: u64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Put a cancelled, dead-lettered or failed (ERROR) workflow back in its queue; a failed one
    /// reruns its failed step.
    Resume {
        id: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

pub async fn run(cmd: WorkflowCommand) -> anyhow::Result<i32> {
    match cmd {
        WorkflowCommand::Start { start, client } => super::workflow_start::start(start, client).await?,
        WorkflowCommand::StartAndSend {
            start,
            message,
            topic,
            idempotency_key,
            client,
        } => super::workflow_start::start_and_send(start, &message, &topic, idempotency_key.as_deref(), client).await?,
        WorkflowCommand::Delay { id, delay, client } => {
            show(&client.connect().await?.delay(&id, delay).await?, client.json)
        }
        WorkflowCommand::Get { id, client } => {
            let c = client.connect().await?;
            let w = c.get(&id).await?;
            show(&w, client.json);
            if !client.json {
                let named = client
                    .namespace
                    .clone()
                    .or_else(|| std::env::var("WAYMARK_NAMESPACE").ok());
                super::workflow_view::print_console_link(&c, named.as_deref(), &w.workflow_id).await;
            }
        }
        WorkflowCommand::List {
            filter,
            total,
            limit,
            page_token,
            client,
        } => {
            let f = filter.filter()?;
            let page = client
                .connect()
                .await?
                .list_page(ListOptions {
                    statuses: f.statuses,
                    workflow_name: f.workflow_name,
                    queue: f.queue,
                    created_after_ms: f.created_after_ms,
                    created_before_ms: f.created_before_ms,
                    page_size: limit,
                    page_token,
                    worker_id: f.worker_id,
                    app_version: f.app_version,
                    parent_workflow_id: f.parent_workflow_id,
                    include_total: total,
                    tags: f.tags,
                    workflow_id_prefix: f.workflow_id_prefix,
                })
                .await?;
            let (workflows, next) = (page.workflows, page.next_page_token);
            if client.json {
                print_json(
                    &serde_json::json!({ "workflows": workflows, "next_page_token": next, "total": page.total }),
                );
            } else {
                let rows: Vec<Vec<String>> = workflows
                    .iter()
                    .map(|w| {
                        vec![
                            w.workflow_id.clone(),
                            w.workflow_name.clone(),
                            w.status.as_str().into(),
                            w.queue_name.clone(),
                            output::time(w.created_at_ms),
                        ]
                    })
                    .collect();
                output::table(&["ID", "NAME", "STATUS", "QUEUE", "CREATED"], &rows);
                if let Some(n) = page.total {
                    eprintln!("total: {n}");
                }
                if let Some(t) = next {
                    eprintln!("more: --page-token {t}");
                }
            }
        }
        WorkflowCommand::Steps { id, client } => {
            let steps = client.connect().await?.steps(&id).await?;
            if client.json {
                print_json(&steps)
            } else {
                print_steps(&steps)
            }
        }
        WorkflowCommand::Export { id, client } => print_json(&client.connect().await?.history(&id).await?),
        WorkflowCommand::Await { id, timeout, client } => {
            let w = client.connect().await?.await_workflow(&id, timeout).await?;
            if client.json {
                print_json(&w);
            } else {
                match (&w.output, &w.failure) {
                    (Some(o), _) if w.status == WorkflowStatus::Success => println!("{o}"),
                    (_, Some(f)) => eprintln!(
                        "workflow {} is {}: {}: {}",
                        w.workflow_id,
                        w.status.as_str(),
                        f.kind,
                        f.message
                    ),
                    _ => eprintln!("workflow {} is {}", w.workflow_id, w.status.as_str()),
                }
            }
            if w.status != WorkflowStatus::Success {
                return Ok(3);
            }
        }
        WorkflowCommand::Update {
            id,
            name,
            args,
            update_id,
            timeout,
            client,
        } => {
            let args: serde_json::Value =
                serde_json::from_str(&args).map_err(|e| super::invalid(format!("--args is not valid JSON: {e}")))?;
            let options = waymark_sdk::UpdateOptions { update_id, timeout };
            let answer: serde_json::Value = client
                .connect()
                .await?
                .update_workflow(&id, &name, &args, options)
                .await?;
            println!("{answer}");
        }
        WorkflowCommand::Send {
            id,
            message,
            topic,
            idempotency_key,
            client,
        } => {
            let message: serde_json::Value = serde_json::from_str(&message)
                .map_err(|e| super::invalid(format!("--message is not valid JSON: {e}")))?;
            let (message_id, duplicate) = client
                .connect()
                .await?
                .send_message(&id, &topic, &message, idempotency_key.as_deref())
                .await?;
            if client.json {
                print_json(&serde_json::json!({ "message_id": message_id, "duplicate": duplicate }));
            } else {
                println!("{message_id}");
                if duplicate {
                    eprintln!("already sent with this idempotency key; not delivered again");
                }
            }
        }
        WorkflowCommand::Messages { id, client } => {
            let messages = client.connect().await?.messages(&id).await?;
            if client.json {
                print_json(&messages);
            } else {
                let rows: Vec<Vec<String>> = messages
                    .iter()
                    .map(|m| {
                        let consumed = if m.consumed {
                            format!("step {}", m.consumed_by_step)
                        } else {
                            "-".into()
                        };
                        let topic = if m.topic.is_empty() {
                            "(default)".to_string()
                        } else {
                            m.topic.clone()
                        };
                        vec![
                            m.message_id.clone(),
                            topic,
                            output::short(&m.payload, 50),
                            output::time(m.sent_at_ms),
                            consumed,
                        ]
                    })
                    .collect();
                output::table(&["ID", "TOPIC", "MESSAGE", "SENT", "CONSUMED BY"], &rows);
            }
        }
        WorkflowCommand::Events { id, client } => {
            let events = client.connect().await?.events(&id).await?;
            if client.json {
                print_json(&events);
            } else {
                let rows: Vec<Vec<String>> = events
                    .iter()
                    .map(|e| {
                        vec![
                            e.key.clone(),
                            output::short(&e.value, 50),
                            output::time(e.updated_at_ms),
                            e.history.len().to_string(),
                        ]
                    })
                    .collect();
                output::table(&["KEY", "VALUE", "UPDATED", "TIMES SET"], &rows);
            }
        }
        WorkflowCommand::Event { id, key, wait, client } => {
            match client.connect().await?.get_event(&id, &key, wait).await? {
                Some(v) if client.json => print_json(&serde_json::json!({ "found": true, "value": v })),
                Some(v) => println!("{v}"),
                None => {
                    if client.json {
                        print_json(&serde_json::json!({ "found": false }));
                    } else {
                        eprintln!("event {key:?} of workflow {id} is not set");
                    }
                    return Ok(4);
                }
            }
        }
        WorkflowCommand::Stream { id, key, from, client } => {
            use futures::StreamExt;
            use std::io::Write;
            let mut values = Box::pin(client.connect().await?.read_stream(&id, &key, from).await?);
            while let Some(item) = values.next().await {
                let (offset, value) = item?;
                if client.json {
                    println!("{}", serde_json::json!({ "offset": offset, "value": value }));
                } else {
                    println!("{value}");
                }
                std::io::stdout().flush()?;
            }
        }
        WorkflowCommand::Cancel { id, cascade, client } => {
            let w = client.connect().await?.cancel_with(&id, cascade).await?;
            if client.json {
                print_json(&w)
            } else {
                println!("{} {}", w.workflow_id, w.status.as_str())
            }
        }
        WorkflowCommand::Lifecycle(cmd) => return super::workflow_lifecycle::run(cmd).await,
        WorkflowCommand::Resume { id, client } => {
            let w = client.connect().await?.resume(&id).await?;
            if client.json {
                print_json(&w)
            } else {
                println!("{} {}", w.workflow_id, w.status.as_str())
            }
        }
    }
    Ok(0)
}
