//! `waymark schedule …`: cron schedules from a shell.

use clap::{Args, Subcommand};
use waymark_sdk::{ScheduleDef, ScheduleInfo, ScheduleUpdate};

use super::{output, ClientArgs};

/// What a create or an update sets.
#[derive(Args, Debug, Clone)]
pub struct ScheduleArgs {
    /// Cron expression: 5 fields (seconds 0) or 6 with seconds first, e.g. '0 */15 * * * *'.
    #[arg(long)]
    cron: Option<String>,
    /// IANA time zone the expression is read in, e.g. Europe/Berlin (default UTC).
    #[arg(long)]
    timezone: Option<String>,
    /// The workflow each fire starts.
    #[arg(long)]
    workflow: Option<String>,
    /// Input of every workflow it starts, as JSON.
    #[arg(long)]
    input: Option<String>,
    /// Queue its workflows start on (default "default"; must exist).
    #[arg(long)]
    queue: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ScheduleCommand {
    /// Create a schedule.
    Create {
        name: String,
        #[command(flatten)]
        fields: ScheduleArgs,
        /// Create it paused.
        #[arg(long)]
        paused: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Change a schedule: the fields given are replaced.
    Update {
        name: String,
        #[command(flatten)]
        fields: ScheduleArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Stop firing until resumed.
    Pause {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Fire again, from the next time after now (times passed while paused are skipped).
    Resume {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove a schedule (the workflows it started stay).
    Delete {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one schedule.
    Get {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List every schedule.
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Start the schedule's workflow once, now; prints its id.
    Trigger {
        name: String,
        /// Makes the trigger idempotent: the same request id starts one workflow.
        #[arg(long)]
        request_id: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Start the workflows of every past fire time in a range that has none; prints one line
    /// per fire time.
    Backfill {
        name: String,
        /// First fire time to include, RFC 3339 (e.g. 2026-11-29T08:00:00Z).
        #[arg(long)]
        from: String,
        /// Last fire time to include, RFC 3339; not in the future.
        #[arg(long)]
        to: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

fn json_arg(flag: &str, text: &str) -> anyhow::Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| anyhow::anyhow!("--{flag} is not valid JSON: {e}"))
}

fn time_arg(flag: &str, text: &str) -> anyhow::Result<i64> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|e| anyhow::anyhow!("--{flag} {text:?} is not an RFC 3339 time like 2026-11-29T08:00:00Z: {e}"))
}

fn maybe_time(ms: Option<i64>) -> String {
    ms.map(output::time).unwrap_or_else(|| "-".into())
}

fn print_schedules(schedules: &[ScheduleInfo]) {
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.cron.clone(),
                s.timezone.clone(),
                s.workflow_name.clone(),
                s.queue_name.clone(),
                if s.paused { "paused" } else { "active" }.into(),
                maybe_time(s.last_fire_at_ms),
                maybe_time(s.next_fire_at_ms),
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "CRON",
            "TIMEZONE",
            "WORKFLOW",
            "QUEUE",
            "STATE",
            "LAST FIRE",
            "NEXT FIRE",
        ],
        &rows,
    );
}

fn show(s: &ScheduleInfo, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(s).expect("serializes"));
    } else {
        print_schedules(std::slice::from_ref(s));
    }
}

pub async fn run(cmd: ScheduleCommand) -> anyhow::Result<i32> {
    match cmd {
        ScheduleCommand::Create {
            name,
            fields,
            paused,
            client,
        } => {
            let def = ScheduleDef {
                cron: fields.cron.ok_or_else(|| anyhow::anyhow!("--cron is required"))?,
                timezone: fields.timezone,
                workflow_name: fields
                    .workflow
                    .ok_or_else(|| anyhow::anyhow!("--workflow is required"))?,
                input: json_arg("input", fields.input.as_deref().unwrap_or("null"))?,
                queue: fields.queue,
                paused,
            };
            let s = client.connect().await?.create_schedule(&name, &def).await?;
            show(&s, client.json);
        }
        ScheduleCommand::Update { name, fields, client } => {
            let update = ScheduleUpdate {
                cron: fields.cron,
                timezone: fields.timezone,
                workflow_name: fields.workflow,
                input: fields.input.map(|i| json_arg("input", &i)).transpose()?,
                queue: fields.queue,
            };
            let s = client.connect().await?.update_schedule(&name, &update).await?;
            show(&s, client.json);
        }
        ScheduleCommand::Pause { name, client } => {
            let s = client.connect().await?.pause_schedule(&name).await?;
            show(&s, client.json);
        }
        ScheduleCommand::Resume { name, client } => {
            let s = client.connect().await?.resume_schedule(&name).await?;
            show(&s, client.json);
        }
        ScheduleCommand::Delete { name, client } => {
            client.connect().await?.delete_schedule(&name).await?;
        }
        ScheduleCommand::Get { name, client } => {
            let s = client.connect().await?.get_schedule(&name).await?;
            show(&s, client.json);
        }
        ScheduleCommand::List { client } => {
            let all = client.connect().await?.list_schedules().await?;
            if client.json {
                println!("{}", serde_json::to_string_pretty(&all).expect("serializes"));
            } else {
                print_schedules(&all);
            }
        }
        ScheduleCommand::Trigger {
            name,
            request_id,
            client,
        } => {
            let started = client
                .connect()
                .await?
                .trigger_schedule(&name, request_id.as_deref())
                .await?;
            if client.json {
                println!("{}", serde_json::to_string_pretty(&started).expect("serializes"));
            } else {
                println!("{}", started.workflow.workflow_id);
            }
        }
        ScheduleCommand::Backfill { name, from, to, client } => {
            let (from, to) = (time_arg("from", &from)?, time_arg("to", &to)?);
            let runs = client.connect().await?.backfill_schedule(&name, from, to).await?;
            if client.json {
                println!("{}", serde_json::to_string_pretty(&runs).expect("serializes"));
            } else {
                let rows: Vec<Vec<String>> = runs
                    .iter()
                    .map(|r| {
                        vec![
                            output::time(r.fire_at_ms),
                            r.workflow_id.clone(),
                            if r.created { "started" } else { "existed" }.into(),
                        ]
                    })
                    .collect();
                output::table(&["FIRE TIME", "WORKFLOW ID", "RESULT"], &rows);
            }
        }
    }
    Ok(0)
}
