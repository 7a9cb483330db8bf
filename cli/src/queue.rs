//! `waymark queue …`: queues and their limits from a shell.

use std::time::Duration;

use clap::{Args, Subcommand};
use waymark_sdk::{QueueInfo, QueueLimits, QueueUpdate};

use super::{output, ClientArgs};
use waymark_server::duration::parse_duration;

/// The limits a create or update sets.
#[derive(Args, Debug, Clone)]
pub struct LimitArgs {
    /// Most of the queue's workflows one worker process runs at once.
    #[arg(long)]
    worker_concurrency: Option<u32>,
    /// Most of the queue's workflows running at once across the fleet.
    #[arg(long)]
    global_concurrency: Option<u32>,
    /// At most this many starts per --rate-period.
    #[arg(long, requires = "rate_period")]
    rate_limit: Option<u32>,
    /// The rate limit's window, e.g. 1s or 1m.
    #[arg(long, value_parser = parse_duration, requires = "rate_limit")]
    rate_period: Option<Duration>,
    /// Most workflows of one partition key running at once.
    #[arg(long)]
    partition_concurrency: Option<u32>,
}

impl LimitArgs {
    fn rate(&self) -> Option<(u32, Duration)> {
        self.rate_limit.zip(self.rate_period)
    }
}

#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Create a queue.
    Create {
        name: String,
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Change a queue's limits: those given are set, those named with --clear removed.
    Update {
        name: String,
        #[command(flatten)]
        limits: LimitArgs,
        /// Remove a limit (repeatable): worker-concurrency, global-concurrency, rate-limit,
        /// partition-concurrency.
        #[arg(long)]
        clear: Vec<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show one queue.
    Get {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List every queue.
    List {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Remove a queue (its workflows wait until it is created again).
    Delete {
        name: String,
        #[command(flatten)]
        client: ClientArgs,
    },
}

fn limit(v: Option<u32>) -> String {
    v.map(|n| n.to_string()).unwrap_or_else(|| "-".into())
}

fn rate(r: Option<(u32, Duration)>) -> String {
    r.map(|(n, p)| format!("{n}/{p:?}")).unwrap_or_else(|| "-".into())
}

fn print_queues(queues: &[QueueInfo]) {
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            vec![
                q.name.clone(),
                limit(q.limits.worker_concurrency),
                limit(q.limits.global_concurrency),
                rate(q.limits.rate_limit),
                limit(q.limits.partition_concurrency),
                q.stats.enqueued.to_string(),
                q.stats.pending.to_string(),
                q.stats.delayed.to_string(),
                q.stats
                    .oldest_enqueued_age_ms
                    .map_or("-".into(), |ms| format!("{:.1}s", ms as f64 / 1000.0)),
                output::time(q.updated_at_ms),
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "PER WORKER",
            "GLOBAL",
            "RATE",
            "PER PARTITION",
            "ENQUEUED",
            "PENDING",
            "DELAYED",
            "OLDEST",
            "UPDATED",
        ],
        &rows,
    );
}

fn show(queues: &[QueueInfo], json: bool) {
    if json {
        let v = if queues.len() == 1 {
            serde_json::to_value(&queues[0])
        } else {
            serde_json::to_value(queues)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&v.expect("serializes")).expect("serializes")
        );
    } else {
        print_queues(queues);
    }
}

pub async fn run(cmd: QueueCommand) -> anyhow::Result<i32> {
    match cmd {
        QueueCommand::Create { name, limits, client } => {
            let l = QueueLimits {
                worker_concurrency: limits.worker_concurrency,
                global_concurrency: limits.global_concurrency,
                rate_limit: limits.rate(),
                partition_concurrency: limits.partition_concurrency,
            };
            let q = client.connect().await?.create_queue(&name, &l).await?;
            show(&[q], client.json);
        }
        QueueCommand::Update {
            name,
            limits,
            clear,
            client,
        } => {
            let mut u = QueueUpdate {
                worker_concurrency: limits.worker_concurrency.map(Some),
                global_concurrency: limits.global_concurrency.map(Some),
                rate_limit: limits.rate().map(Some),
                partition_concurrency: limits.partition_concurrency.map(Some),
            };
            for c in &clear {
                match c.as_str() {
                    "worker-concurrency" => u.worker_concurrency = Some(None),
                    "global-concurrency" => u.global_concurrency = Some(None),
                    "rate-limit" => u.rate_limit = Some(None),
                    "partition-concurrency" => u.partition_concurrency = Some(None),
                    other => anyhow::bail!(
                        "--clear {other:?}: expected worker-concurrency, global-concurrency, rate-limit or partition-concurrency"
                    ),
                }
            }
            let q = client.connect().await?.update_queue(&name, &u).await?;
            show(&[q], client.json);
        }
        QueueCommand::Get { name, client } => {
            let q = client.connect().await?.get_queue(&name).await?;
            show(&[q], client.json);
        }
        QueueCommand::List { client } => {
            let qs = client.connect().await?.list_queues().await?;
            if client.json {
                println!("{}", serde_json::to_string_pretty(&qs).expect("serializes"));
            } else {
                print_queues(&qs);
            }
        }
        QueueCommand::Delete { name, client } => {
            client.connect().await?.delete_queue(&name).await?;
        }
    }
    Ok(0)
}
