//! Sleepy worker: registers workflow `sleepy`, whose input is a number of milliseconds. It sleeps
//! that long with a durable sleep (the wake-up time is recorded, so a worker that restarts
//! mid-sleep sleeps only what is left) and returns the number. Runs until Ctrl-C.
//!
//! ```text
//! cargo run -p waymark-sdk --example sleepy              # in one terminal (server running)
//! waymark workflow start sleepy --input 2000             # in another: prints the workflow id
//! waymark workflow await <id>                            # 2000, about two seconds later
//! ```
//!
//! Sleeps longer than a minute park: the workflow leaves the worker's memory and its slot, and
//! the server dispatches it again when the timer fires. Try queues with it, e.g.
//! `waymark queue create naps --global-concurrency 2`, then start a worker with
//! `WAYMARK_QUEUE=naps` and several `waymark workflow start sleepy --queue naps --input 1000`.

use std::time::Duration;

use waymark_sdk::{Worker, WorkflowContext, WorkflowError};

async fn sleepy(ctx: WorkflowContext, ms: u64) -> Result<u64, WorkflowError> {
    ctx.sleep(Duration::from_millis(ms)).await?;
    Ok(ms)
}

#[tokio::main]
async fn main() -> Result<(), waymark_sdk::Error> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let mut builder = Worker::builder()
        .app_name("sleepy")
        .app_version("1")
        .workflow("sleepy", sleepy);
    if let Ok(queue) = std::env::var("WAYMARK_QUEUE") {
        builder = builder.queue(queue);
    }
    let worker = builder.build();
    tracing::info!(server = %waymark_sdk::default_server(), worker_id = worker.worker_id(), "sleepy worker starting");
    worker.run().await
}
