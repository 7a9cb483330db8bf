//! What a workflow function gets: its identity, and `step`, which runs a piece of work once
//! and checkpoints its result.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::sync::Notify;

use serde::{de::DeserializeOwned, Serialize};
use waymark_proto::{
    json,
    v1::{self, reply, worker_message},
};

use waymark_journal::{shapes::Shape, History, Recorded, RecordedOutcome};

use super::{conn::Conn, records::Records};
use crate::{RetryPolicy, WorkflowError};

mod children;
pub use children::ChildOptions;
mod drawn;
mod patch;
mod remote;
mod runs;
mod updates;
mod waits;
mod writes;
pub use remote::{Awaitable, StepHandle, StepOptions};
pub use updates::Update;

/// Receives the server completed on its own (a send found them waiting) and pushed with the
/// wakeup, by step position.
pub(crate) type Deliveries = Arc<std::sync::Mutex<HashMap<u32, v1::Payload>>>;

/// Handle a workflow function uses to run steps. Cheap to clone.
#[derive(Clone)]
pub struct WorkflowContext {
    inner: Arc<Inner>,
}

struct Inner {
    workflow_id: String,
    workflow_name: String,
    epoch: u64,
    recovery_attempts: u32,
    /// Steps recorded by earlier runs and the position the next call takes: a replay returns
    /// what is recorded instead of running.
    history: History,
    conn: Arc<Conn>,
    cancelled: Arc<AtomicBool>,
    wakeup: Arc<Notify>,
    delivered: Deliveries,
    records: Arc<Records>,
    park_after: Option<Duration>,
    /// Replaying offline (a [`Replayer`](crate::Replayer)): a call the history does not record
    /// ends the run with `HistoryEnded` instead of going live, and nothing waits.
    offline: bool,
    /// The run's span (OpenTelemetry): the parent of its steps', calls' and children's.
    otel: opentelemetry::Context,
}

impl WorkflowContext {
    pub(crate) fn new(
        d: &v1::DispatchWorkflow,
        conn: Arc<Conn>,
        cancelled: Arc<AtomicBool>,
        wakeup: Arc<Notify>,
        delivered: Deliveries,
        records: Arc<Records>,
        park_after: Option<Duration>,
    ) -> Self {
        WorkflowContext {
            inner: Arc::new(Inner {
                workflow_id: d.workflow_id.clone(),
                workflow_name: d.workflow_name.clone(),
                epoch: d.epoch,
                recovery_attempts: d.recovery_attempts,
                history: History::new(d.workflow_id.clone(), d.steps.iter().map(|s| (s.step_id, recorded(s)))),
                conn,
                cancelled,
                wakeup,
                delivered,
                records,
                park_after,
                offline: false,
                otel: opentelemetry::Context::new(),
            }),
        }
    }

    /// The same context, its spans under the run's span `cx`.
    pub(crate) fn traced(mut self, cx: opentelemetry::Context) -> Self {
        Arc::get_mut(&mut self.inner).expect("not shared yet").otel = cx;
        self
    }

    /// A context that replays `d`'s steps and goes no further (see [`Inner::offline`]).
    pub(crate) fn offline(d: &v1::DispatchWorkflow, conn: Arc<Conn>) -> Self {
        let mut ctx = Self::new(
            d,
            conn,
            Default::default(),
            Default::default(),
            Default::default(),
            Default::default(),
            None,
        );
        Arc::get_mut(&mut ctx.inner).expect("not shared yet").offline = true;
        ctx
    }

    pub fn workflow_id(&self) -> &str {
        &self.inner.workflow_id
    }
    pub fn workflow_name(&self) -> &str {
        &self.inner.workflow_name
    }
    /// The fencing epoch of this run: it rises each time the workflow is dispatched.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch
    }
    /// How many times this workflow was recovered from a worker that died.
    pub fn recovery_attempts(&self) -> u32 {
        self.inner.recovery_attempts
    }

    /// Runs `f` once as a step named `name` and checkpoints its result. The checkpoint is durable
    /// before anything else the workflow does outside itself — its next step runs, its next
    /// request to the server, its completion (which carries the last steps' records, saving
    /// their round trips). On replay the recorded result is returned and `f` is not called. An error from `f` fails
    /// the step (it is not retried; see [`step_with_retry`](Self::step_with_retry)).
    pub fn step<T, E, F, Fut>(&self, name: &str, f: F) -> impl Future<Output = Result<T, WorkflowError>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: std::fmt::Display + Send,
        F: Fn() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
    {
        self.step_with_retry(name, RetryPolicy::default(), f)
    }

    /// Like [`step`](Self::step), retrying `f` with backoff per `policy` before the step fails.
    pub fn step_with_retry<T, E, F, Fut>(
        &self,
        name: &str,
        policy: RetryPolicy,
        f: F,
    ) -> impl Future<Output = Result<T, WorkflowError>> + Send
    where
        T: Serialize + DeserializeOwned + Send,
        E: std::fmt::Display + Send,
        F: Fn() -> Fut + Send,
        Fut: Future<Output = Result<T, E>> + Send,
    {
        // The position is taken when the step is called, not when it is awaited, so steps
        // started together still number in call order.
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        let name = name.to_string();
        async move {
            if let Some(rec) = inner.history.at(step_id, &name)? {
                return replay(rec, &name);
            }
            inner.live(step_id)?;
            if inner.cancelled.load(Ordering::SeqCst) {
                return Err(WorkflowError::Cancelled);
            }
            // This step may depend on the ones before: their records are durable first.
            inner.flush().await?;
            let span = crate::tracing_ctx::open(
                format!("step {name}"),
                opentelemetry::trace::SpanKind::Internal,
                &inner.otel,
                crate::tracing_ctx::step_attributes(&inner.workflow_id, step_id, &name),
            );
            let mut attempt = 1;
            let began = std::time::Instant::now();
            let result = loop {
                // The step's own spans, if it makes any, hang under its span.
                match opentelemetry::context::FutureExt::with_context(f(), span.clone()).await {
                    Ok(v) => break Ok(v),
                    Err(e) if attempt >= policy.max_attempts => break Err(e.to_string()),
                    Err(e) => {
                        tracing::debug!(workflow_id = %inner.workflow_id, step = %name, attempt, error = %e, "step failed; retrying");
                        tokio::time::sleep(policy.delay(attempt)).await;
                        if inner.cancelled.load(Ordering::SeqCst) {
                            return Err(WorkflowError::Cancelled);
                        }
                        attempt += 1;
                    }
                }
            };
            // An output larger than the server takes fails the step, recorded as such, so this
            // run and every replay see the same failure.
            let result = match result {
                Ok(v) => {
                    let json = serde_json::to_value(&v)?;
                    match inner
                        .conn
                        .limits
                        .payload(&format!("the output of step {name:?}"), &json)
                    {
                        Ok(p) => Ok((v, p)),
                        Err(e) => Err(("PAYLOAD_TOO_LARGE", e.to_string())),
                    }
                }
                Err(message) => Err(("StepFailed", message)),
            };
            crate::tracing_ctx::end(&span, result.as_ref().err().map(|(_, m)| m.clone()));
            let outcome = match &result {
                Ok((_, p)) => v1::record_step::Outcome::Output(p.clone()),
                Err((kind, message)) => v1::record_step::Outcome::Failure(v1::Failure {
                    kind: kind.to_string(),
                    message: message.clone(),
                }),
            };
            inner.defer(step_id, &name, outcome, attempt, Some(began.elapsed()));
            result
                .map(|(v, _)| v)
                .map_err(|(_, message)| WorkflowError::Step { name, message })
        }
    }
}

impl Inner {
    /// The span of a wait this run does now (`wait sleep`, `wait recv` …): it ends when the
    /// returned context is dropped, however the wait ends.
    fn wait_span(&self, kind: &str, step_id: u32, detail: Option<(&'static str, String)>) -> opentelemetry::Context {
        let mut attributes = vec![
            opentelemetry::KeyValue::new("waymark.workflow.id", self.workflow_id.clone()),
            opentelemetry::KeyValue::new("waymark.step.id", step_id as i64),
        ];
        if let Some((key, value)) = detail {
            attributes.push(opentelemetry::KeyValue::new(key, value));
        }
        crate::tracing_ctx::open(
            format!("wait {kind}"),
            opentelemetry::trace::SpanKind::Internal,
            &self.otel,
            attributes,
        )
    }

    /// Sends a request for this workflow, after the step records it holds back.
    async fn request(&self, kind: worker_message::Kind) -> Result<reply::Result, WorkflowError> {
        self.live(step_of(&kind))?;
        self.flush().await?;
        let reply = self.conn.request_resending(kind).await;
        if reply.is_err() {
            self.records.drop_run();
        }
        reply
    }

    /// Holds back a step's record until the next request or the completion.
    /// `took` is how long the step ran, retries included: the server dates its start from it.
    fn defer(
        &self,
        step_id: u32,
        name: &str,
        outcome: v1::record_step::Outcome,
        attempts: u32,
        took: Option<std::time::Duration>,
    ) {
        self.records.hold(v1::RecordStep {
            workflow_id: self.workflow_id.clone(),
            epoch: self.epoch,
            step_id,
            name: name.to_string(),
            outcome: Some(outcome),
            attempts,
            duration: took.and_then(|d| prost_types::Duration::try_from(d).ok()),
        });
    }

    /// Makes the held-back step records durable (see [`Records::flush`]).
    async fn flush(&self) -> Result<(), WorkflowError> {
        self.records.flush(&self.conn).await
    }

    /// Checkpoints a step and waits until the server says it is durable.
    async fn record(
        &self,
        step_id: u32,
        name: &str,
        outcome: v1::record_step::Outcome,
        attempts: u32,
    ) -> Result<(), WorkflowError> {
        let req = v1::RecordStep {
            workflow_id: self.workflow_id.clone(),
            epoch: self.epoch,
            step_id,
            name: name.to_string(),
            outcome: Some(outcome),
            attempts,
            duration: None,
        };
        match self.request(worker_message::Kind::RecordStep(req)).await? {
            reply::Result::StepRecorded(_) => Ok(()),
            reply::Result::Error(e) => Err(refused(e)),
            _ => Err(WorkflowError::Disconnected),
        }
    }

    /// What the built-in step `name` recorded at `step_id`, if it is recorded (non-determinism
    /// if another step is recorded there).
    fn builtin<S: Shape>(&self, step_id: u32, name: &str) -> Result<Option<S>, WorkflowError> {
        Ok(self.history.builtin(step_id, name)?)
    }

    /// Whether a wait until `until_ms` (by a clock now at `now_ms`) is long enough to park for.
    fn should_park(&self, until_ms: i64, now_ms: i64) -> bool {
        self.park_after
            .is_some_and(|t| until_ms.saturating_sub(now_ms) > t.as_millis() as i64)
    }

    /// Asks the server to park this workflow; true when it did (the run must end now).
    async fn park(&self, step_id: u32, wake_at_ms: i64, on: v1::park::On) -> Result<bool, WorkflowError> {
        let req = v1::Park {
            workflow_id: self.workflow_id.clone(),
            epoch: self.epoch,
            step_id,
            wake_at_ms,
            on: Some(on),
        };
        match self.request(worker_message::Kind::Park(req)).await? {
            reply::Result::Parked(p) => Ok(p.parked),
            reply::Result::Error(e) => Err(refused(e)),
            _ => Err(WorkflowError::Disconnected),
        }
    }

    /// A call at `step_id` is about to go live: refused when replaying offline, where the
    /// history ends here.
    fn live(&self, step_id: u32) -> Result<(), WorkflowError> {
        if self.offline {
            return Err(WorkflowError::HistoryEnded { step_id });
        }
        Ok(())
    }

    fn check_cancelled(&self) -> Result<(), WorkflowError> {
        if self.cancelled.load(Ordering::SeqCst) {
            Err(WorkflowError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Waits until `until` (Unix ms, by `clock`'s reckoning at `now`), or a wakeup, or a cancel.
    async fn wait_until(&self, until_ms: i64, now_ms: i64) -> Result<(), WorkflowError> {
        if self.offline {
            // A replay never waits: what the wait led to is recorded, or the history ends.
            return Ok(());
        }
        let remaining = Duration::from_millis(until_ms.saturating_sub(now_ms).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(remaining) => {}
            _ = self.wakeup.notified() => {}
        }
        self.check_cancelled()
    }
}

/// The step position a request is for.
fn step_of(kind: &worker_message::Kind) -> u32 {
    use worker_message::Kind as K;
    match kind {
        K::RecordStep(r) => r.step_id,
        K::SendMessage(m) => m.step_id,
        K::Recv(r) => r.step_id,
        K::SetEvent(e) => e.step_id,
        K::GetEvent(g) => g.step_id,
        K::WriteStream(w) => w.step_id,
        K::StartChild(c) => c.step_id,
        K::AwaitChild(a) => a.step_id,
        K::Park(p) => p.step_id,
        K::CallStep(c) => c.step_id,
        K::Select(s) => s.step_id,
        _ => 0,
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A built-in step's shape as the outcome to record.
fn shape_payload<S: Shape>(s: &S) -> v1::record_step::Outcome {
    let v = serde_json::to_value(s).expect("shapes serialize");
    v1::record_step::Outcome::Output(json::to_payload(&v))
}

/// A step from a dispatch, as the journal reads it.
fn recorded(s: &v1::Step) -> Recorded {
    let outcome = match &s.failure {
        Some(f) => RecordedOutcome::Failure {
            kind: f.kind.clone(),
            message: f.message.clone(),
        },
        None => RecordedOutcome::Output(json::from_payload(s.output.as_ref()).unwrap_or_default()),
    };
    Recorded {
        name: s.name.clone(),
        outcome,
    }
}

/// The recorded result of a step as a `T`; a recorded failure is the step's error again.
fn replay<T: DeserializeOwned>(rec: &Recorded, name: &str) -> Result<T, WorkflowError> {
    match &rec.outcome {
        RecordedOutcome::Failure { message, .. } => Err(WorkflowError::Step {
            name: name.to_string(),
            message: message.clone(),
        }),
        RecordedOutcome::Output(v) => Ok(serde_json::from_value(v.clone())?),
    }
}

/// A refused write as the error the workflow sees.
pub(crate) fn refused(e: v1::ReplyError) -> WorkflowError {
    match e.reason.as_str() {
        "STALE_EPOCH" => WorkflowError::Fenced(e.message),
        "WORKFLOW_NOT_RUNNING" => WorkflowError::Cancelled,
        "NON_DETERMINISM" => WorkflowError::NonDeterminism(e.message),
        _ => WorkflowError::failed(e.reason, e.message),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tracing_tests;
