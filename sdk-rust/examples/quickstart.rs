//! Quickstart worker: registers workflow `quickstart`, whose input is a name (a JSON string) and
//! whose output is a greeting, built in three checkpointed steps. Runs until Ctrl-C.
//!
//! ```text
//! cargo run -p waymark-sdk --example quickstart          # in one terminal (server running)
//! waymark workflow start quickstart --input '"Ada"'      # in another: prints the workflow id
//! waymark workflow await <id>                            # "Hello, Ada! Welcome to Waymark."
//! ```
//!
//! Kill the worker half-way and start it again: the workflow resumes after its last recorded step.

use std::time::Duration;

use waymark_sdk::{RetryPolicy, Worker, WorkflowContext, WorkflowError};

async fn quickstart(ctx: WorkflowContext, name: String) -> Result<String, WorkflowError> {
    // Step 1: tidy the name. Once recorded, a replay returns the recorded value without running it.
    let who: String = ctx
        .step("normalize", || async { Ok::<_, String>(name.trim().to_string()) })
        .await?;

    // Step 2: something slow, retried with backoff if it fails.
    let salutation: String = ctx
        .step_with_retry("pick-salutation", RetryPolicy::attempts(3), || async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            Ok::<_, String>("Hello".to_string())
        })
        .await?;

    // Step 3: put it together.
    let greeting: String = ctx
        .step("compose", || async {
            Ok::<_, String>(format!("{salutation}, {who}! Welcome to Waymark."))
        })
        .await?;
    tracing::info!(workflow_id = ctx.workflow_id(), %greeting, "done");
    Ok(greeting)
}

#[tokio::main]
async fn main() -> Result<(), waymark_sdk::Error> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let worker = Worker::builder()
        .app_name("quickstart")
        .app_version("1")
        .workflow("quickstart", quickstart)
        .build();
    tracing::info!(server = %waymark_sdk::default_server(), worker_id = worker.worker_id(), "quickstart worker starting");
    worker.run().await
}
