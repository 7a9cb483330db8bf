//! Waymark's Rust SDK: a [`Worker`] that runs durable workflows and their steps, and a
//! [`Client`] that starts and watches them.
//!
//! ```no_run
//! use waymark_sdk::{Worker, WorkflowContext, WorkflowError};
//!
//! async fn greet(ctx: WorkflowContext, name: String) -> Result<String, WorkflowError> {
//!     // The closure may run more than once (retries), and not at all on replay.
//!     let greeting: String = ctx.step("compose", || async { Ok::<_, std::io::Error>(format!("Hello, {name}!")) }).await?;
//!     Ok(greeting)
//! }
//!
//! # async fn run() -> Result<(), waymark_sdk::Error> {
//! Worker::builder().workflow("greet", greet).build().run().await
//! # }
//! ```
//!
//! Every program finds the server from `WAYMARK_SERVER` when no address is given, defaulting to
//! `http://127.0.0.1:7450`.

mod client;
mod connection;
mod error;
mod keys;
mod lifecycle;
mod messaging;
mod namespaces;
mod pages;
mod queues;
mod resend;
mod retry;
mod schedules;
mod tracing_ctx;
mod types;
mod updates;
mod worker;
mod workers;

pub use client::{Client, ListOptions, StartOptions, WorkflowPage};
pub use connection::ConnectOptions;
pub use error::{Error, WorkflowError};
pub use keys::{ApiKeyInfo, ApiKeySpec, Identity, Role};
pub use lifecycle::{BulkAction, BulkOutcome, ForkOptions, WorkflowFilter};
pub use namespaces::{NamespaceInfo, NamespaceLimits};
pub use queues::{QueueInfo, QueueLimits, QueueStats, QueueUpdate};
pub use retry::RetryPolicy;
pub use schedules::{ScheduleDef, ScheduleInfo, ScheduleRun, ScheduleUpdate};
pub use types::{
    EventInfo, Failure, MessageInfo, Started, StartedAndSent, StepInfo, WaitingOn, WorkflowInfo, WorkflowStatus,
};
pub use updates::UpdateOptions;
pub use worker::{
    context::{Awaitable, ChildOptions, StepHandle, StepOptions, Update, WorkflowContext},
    replayer::{RecordedFailure, RecordedHistory, RecordedStep, Replayed, Replayer},
    Worker, WorkerBuilder,
};
pub use workers::WorkerInfo;

/// Generated wire types, for programs that need the raw contract.
pub use waymark_proto::v1 as proto;

/// The server address to use when none is given: `WAYMARK_SERVER`, else `http://127.0.0.1:7450`.
pub fn default_server() -> String {
    match std::env::var("WAYMARK_SERVER") {
        Ok(s) if !s.trim().is_empty() => normalize(s.trim()),
        _ => "http://127.0.0.1:7450".to_string(),
    }
}

/// Accepts `host:port` as well as a URL.
pub(crate) fn normalize(addr: &str) -> String {
    if addr.contains("://") {
        addr.to_string()
    } else {
        format!("http://{addr}")
    }
}
