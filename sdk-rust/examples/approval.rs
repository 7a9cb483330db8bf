//! Approval worker: registers workflow `approval`, which announces that it is waiting (event
//! `status`), waits up to an hour for a decision (a message on topic `decision`), records the
//! decision in its `status` event and on its `log` stream, closes the stream, and returns it.
//!
//! ```text
//! cargo run -p waymark-sdk --example approval                        # the worker
//! id=$(waymark workflow start approval --input '{"expense": 42}')
//! waymark workflow event "$id" status --wait 10s                    # "waiting"
//! waymark workflow stream "$id" log &                                # follows the log live
//! waymark workflow send "$id" --topic decision --message '"approved"'
//! waymark workflow await "$id"                                       # "approved"
//! ```
//!
//! The wait is durable: kill the worker while it waits and start it again; the workflow keeps
//! its original one-hour deadline, and a decision sent meanwhile is not lost.

use std::time::Duration;

use waymark_sdk::{Worker, WorkflowContext, WorkflowError};

async fn approval(ctx: WorkflowContext, _request: serde_json::Value) -> Result<String, WorkflowError> {
    ctx.set_event("status", &"waiting").await?;
    let decision: Option<String> = ctx.recv("decision", Duration::from_secs(3600)).await?;
    let decision = decision.unwrap_or_else(|| "timed out".to_string());
    ctx.set_event("status", &decision).await?;
    ctx.write_stream("log", &decision).await?;
    ctx.close_stream("log").await?;
    Ok(decision)
}

#[tokio::main]
async fn main() -> Result<(), waymark_sdk::Error> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let worker = Worker::builder()
        .app_name("approval")
        .app_version("1")
        .workflow("approval", approval)
        .build();
    tracing::info!(server = %waymark_sdk::default_server(), worker_id = worker.worker_id(), "approval worker starting");
    worker.run().await
}
