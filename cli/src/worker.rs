//! `waymark worker …`: the workers connected to the server.

use clap::Subcommand;

use super::{output, ClientArgs};

#[derive(Subcommand, Debug)]
pub enum WorkerCommand {
    /// The workers connected through any replica: what each runs, its credits and work in
    /// flight, when it connected and last heartbeated.
    List {
        /// Only workers taking workflows from this queue.
        #[arg(long)]
        queue: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
}

pub async fn run(cmd: WorkerCommand) -> anyhow::Result<i32> {
    match cmd {
        WorkerCommand::List { queue, client } => {
            let workers = client.connect().await?.list_workers(queue.as_deref()).await?;
            if client.json {
                println!("{}", serde_json::to_string_pretty(&workers).expect("serializes"));
                return Ok(0);
            }
            let rows: Vec<Vec<String>> = workers
                .iter()
                .map(|w| {
                    vec![
                        w.worker_id.clone(),
                        format!("{} {}", w.app_name, w.app_version).trim().to_string(),
                        w.sdk.clone(),
                        w.queues.join(","),
                        (w.workflow_names.len() + w.step_names.len()).to_string(),
                        format!("{}/{}", w.workflow_credits, w.step_credits),
                        w.workflows_in_flight.to_string(),
                        output::time(w.connected_at_ms),
                        output::time(w.last_heartbeat_ms),
                    ]
                })
                .collect();
            output::table(
                &[
                    "WORKER",
                    "APP",
                    "SDK",
                    "QUEUES",
                    "NAMES",
                    "CREDITS",
                    "IN FLIGHT",
                    "CONNECTED",
                    "LAST HEARD",
                ],
                &rows,
            );
        }
    }
    Ok(0)
}
