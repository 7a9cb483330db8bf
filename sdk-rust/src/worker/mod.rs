//! The worker: registers workflow functions, holds one stream to the server, and runs what the
//! server dispatches. It reconnects with backoff when the stream breaks.

use std::{collections::HashMap, future::Future, pin::Pin, sync::Arc, time::Duration};

use serde::{de::DeserializeOwned, Serialize};
use serde_json::Value;

use crate::{Error, WorkflowError};

mod conn;
pub mod context;
#[cfg(test)]
mod fake;
mod records;
pub mod replayer;
mod session;
#[cfg(test)]
mod sizes_tests;

use context::WorkflowContext;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
pub(crate) type WorkflowFn =
    Arc<dyn Fn(WorkflowContext, Value) -> BoxFuture<Result<Value, WorkflowError>> + Send + Sync>;
/// A remote step: JSON in, JSON out or an error message.
pub(crate) type StepFn = Arc<dyn Fn(Value) -> BoxFuture<Result<Value, String>> + Send + Sync>;

/// Configures a [`Worker`].
pub struct WorkerBuilder {
    connect: crate::ConnectOptions,
    worker_id: Option<String>,
    app_name: String,
    app_version: String,
    queues: Vec<String>,
    max_concurrent_workflows: u32,
    park_after: Option<Duration>,
    workflows: HashMap<String, WorkflowFn>,
    max_concurrent_steps: u32,
    steps: HashMap<String, StepFn>,
    resend_for: Duration,
}

/// A configured worker; [`Worker::run`] connects and serves until stopped.
pub struct Worker {
    pub(crate) config: Arc<WorkerConfig>,
}

pub(crate) struct WorkerConfig {
    pub connect: crate::ConnectOptions,
    pub worker_id: String,
    pub app_name: String,
    pub app_version: String,
    pub queues: Vec<String>,
    pub max_concurrent_workflows: u32,
    /// Waits longer than this release the workflow from memory (parking).
    pub park_after: Option<Duration>,
    pub workflows: HashMap<String, WorkflowFn>,
    /// Remote step attempts run at once here.
    pub max_concurrent_steps: u32,
    /// Remote steps this worker runs for any workflow that calls them by name.
    pub steps: HashMap<String, StepFn>,
    /// How long a request the server answers UNAVAILABLE is sent again before the run is let go.
    pub resend_for: Duration,
}

impl Worker {
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder {
            connect: crate::ConnectOptions::from_env(),
            worker_id: None,
            app_name: String::new(),
            app_version: String::new(),
            queues: Vec::new(),
            max_concurrent_workflows: 100,
            park_after: Some(Duration::from_secs(60)),
            workflows: HashMap::new(),
            max_concurrent_steps: 16,
            steps: HashMap::new(),
            resend_for: Duration::from_secs(60),
        }
    }

    pub fn worker_id(&self) -> &str {
        &self.config.worker_id
    }

    /// Serves until Ctrl-C or SIGTERM.
    pub async fn run(self) -> Result<(), Error> {
        self.run_until(termination()).await
    }

    /// Serves until `stop` resolves. Reconnects, with backoff, whenever the stream breaks; what
    /// was running when it broke is dropped here and the server gives it out again. A stream
    /// refused for its credentials (UNAUTHENTICATED, PERMISSION_DENIED: a missing, wrong or
    /// revoked key, or one that may not register these names) is not retried: that error is
    /// returned.
    pub async fn run_until(self, stop: impl Future<Output = ()> + Send) -> Result<(), Error> {
        tokio::pin!(stop);
        let mut failures = 0u32;
        loop {
            let attempt = session::run(self.config.clone());
            tokio::select! {
                _ = &mut stop => return Ok(()),
                ended = attempt => match ended {
                    Ok(()) => failures = 0,
                    Err(e) if matches!(e.code(), Some(tonic::Code::Unauthenticated | tonic::Code::PermissionDenied)) => {
                        tracing::error!(error = %e, "the server refused this worker's credentials; stopping");
                        return Err(e);
                    }
                    Err(e) => {
                        failures += 1;
                        tracing::warn!(error = %e, "worker stream ended; reconnecting");
                    }
                }
            }
            let delay = backoff(failures);
            tokio::select! {
                _ = &mut stop => return Ok(()),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// 50 ms doubling to 5 s, with jitter so a fleet does not reconnect in lockstep.
fn backoff(failures: u32) -> Duration {
    let base = 50u64.saturating_mul(1 << failures.min(7)).min(5000);
    Duration::from_millis(base / 2 + rand::random_range(0..=base / 2))
}

async fn termination() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            },
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

impl WorkerBuilder {
    /// Server address; `WAYMARK_SERVER` or `http://127.0.0.1:7450` when not set. TLS settings,
    /// API key and namespace come from the environment unless [`WorkerBuilder::connect_options`]
    /// sets them.
    pub fn server(mut self, addr: impl Into<String>) -> Self {
        let options = std::mem::take(&mut self.connect);
        self.connect = options.server(addr);
        self
    }

    /// Where and how to connect: address, TLS, API key (a `worker` key), namespace.
    pub fn connect_options(mut self, options: crate::ConnectOptions) -> Self {
        self.connect = options;
        self
    }
    /// Stable id of this worker process (generated when not set).
    pub fn worker_id(mut self, id: impl Into<String>) -> Self {
        self.worker_id = Some(id.into());
        self
    }
    pub fn app_name(mut self, name: impl Into<String>) -> Self {
        self.app_name = name.into();
        self
    }
    /// Workflows are pinned to the version of the worker that first runs them and are only
    /// recovered onto workers of the same version.
    pub fn app_version(mut self, version: impl Into<String>) -> Self {
        self.app_version = version.into();
        self
    }
    /// A queue to take workflows from; "default" when none is given.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }
    /// How many workflows run at once here (the credits granted to the server).
    pub fn max_concurrent_workflows(mut self, n: u32) -> Self {
        self.max_concurrent_workflows = n.max(1);
        self
    }

    /// A workflow that will wait (sleep, recv, get_event) longer than this is parked: released
    /// from this worker's memory and its slot, and dispatched again when the wait resolves.
    /// `None` keeps every waiting workflow in memory. Default: 60 seconds.
    pub fn park_after(mut self, threshold: Option<Duration>) -> Self {
        self.park_after = threshold;
        self
    }

    /// Registers a workflow function under `name`. Input and output are any serde types; they
    /// travel as JSON.
    pub fn workflow<I, O, F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        F: Fn(WorkflowContext, I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, WorkflowError>> + Send + 'static,
    {
        let f = Arc::new(f);
        let erased: WorkflowFn = Arc::new(move |ctx, input| {
            let f = f.clone();
            Box::pin(async move {
                let input: I = serde_json::from_value(input).map_err(|e| {
                    WorkflowError::Serialization(format!("workflow input does not match the function's type: {e}"))
                })?;
                let out = f(ctx, input).await?;
                Ok(serde_json::to_value(out)?)
            })
        });
        self.workflows.insert(name.into(), erased);
        self
    }

    /// Registers a remote step under `name`: any workflow, in any language, can call it with
    /// `call_step(name, …)` and the server dispatches the call here (or to another worker that
    /// registered it). An error fails the attempt; the caller's retry policy decides what next.
    pub fn step<I, O, E, F, Fut>(mut self, name: impl Into<String>, f: F) -> Self
    where
        I: DeserializeOwned + Send + 'static,
        O: Serialize + Send + 'static,
        E: std::fmt::Display + Send + 'static,
        F: Fn(I) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<O, E>> + Send + 'static,
    {
        let f = Arc::new(f);
        let erased: StepFn = Arc::new(move |input| {
            let f = f.clone();
            Box::pin(async move {
                let input: I = serde_json::from_value(input)
                    .map_err(|e| format!("step input does not match the function's type: {e}"))?;
                let out = f(input).await.map_err(|e| e.to_string())?;
                serde_json::to_value(out).map_err(|e| e.to_string())
            })
        });
        self.steps.insert(name.into(), erased);
        self
    }

    /// How many remote step attempts run at once here (the step credits granted). Default 16.
    pub fn max_concurrent_steps(mut self, n: u32) -> Self {
        self.max_concurrent_steps = n.max(1);
        self
    }

    /// While the server answers a request UNAVAILABLE (its database restarting or failing
    /// over), the request is sent again with backoff for up to this long; after that the run is
    /// let go — never failed — and the server dispatches the workflow again. Default 60 s.
    pub fn resend_for(mut self, bound: Duration) -> Self {
        self.resend_for = bound;
        self
    }

    pub fn build(self) -> Worker {
        Worker {
            config: Arc::new(WorkerConfig {
                connect: self.connect,
                worker_id: self.worker_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
                app_name: self.app_name,
                app_version: self.app_version,
                queues: self.queues,
                max_concurrent_workflows: self.max_concurrent_workflows,
                park_after: self.park_after,
                workflows: self.workflows,
                max_concurrent_steps: self.max_concurrent_steps,
                steps: self.steps,
                resend_for: self.resend_for,
            }),
        }
    }
}
