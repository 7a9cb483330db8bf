//! The Rust part of the polyglot example (`sdk-clients/examples/polyglot/`): a worker with two
//! workflows that other languages meet.
//!
//! - `greet` (input: a name) — the Go client starts it by name and awaits it; one checkpointed
//!   step; returns a greeting.
//! - `courier` (input: `{"to": workflow id, "text": …}`) — sends `text` on topic `greeting` to
//!   the workflow `to` (the Go workflow `inbox`, which returns what it received). The send is
//!   recorded, so a replay does not send it again.
//!
//! ```text
//! cargo run -p waymark-sdk --example polyglot                   # the worker (WAYMARK_SERVER)
//! waymark workflow start greet --input '"Ada"' --id greet-Ada   # or: the Go client
//! waymark workflow await greet-Ada                              # "Hello, Ada, from a Rust workflow!"
//! ```
//!
//! `sdk-clients/examples/polyglot/README.md` runs the whole scenario.

use serde::Deserialize;
use waymark_sdk::{Worker, WorkflowContext, WorkflowError};

async fn greet(ctx: WorkflowContext, name: String) -> Result<String, WorkflowError> {
    let greeting: String = ctx
        .step("compose", || {
            let greeting = format!("Hello, {name}, from a Rust workflow!");
            async move { Ok::<_, std::convert::Infallible>(greeting) }
        })
        .await?;
    Ok(greeting)
}

#[derive(Deserialize)]
struct Delivery {
    to: String,
    text: String,
}

async fn courier(ctx: WorkflowContext, delivery: Delivery) -> Result<String, WorkflowError> {
    ctx.send(&delivery.to, "greeting", &delivery.text).await?;
    Ok(format!("sent to {}", delivery.to))
}

#[tokio::main]
async fn main() -> Result<(), waymark_sdk::Error> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let worker = Worker::builder()
        .app_name("polyglot-rust")
        .app_version("1")
        .workflow("greet", greet)
        .workflow("courier", courier)
        .build();
    tracing::info!(server = %waymark_sdk::default_server(), "polyglot Rust worker starting");
    worker.run().await
}
