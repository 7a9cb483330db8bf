//! What a workflow function gets: its identity, and `step`, which runs a piece of work once
//! and checkpoints its result.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
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

use super::{records::Records, session::Conn};
use crate::{RetryPolicy, WorkflowError};

mod remote;
pub use remote::{Awaitable, StepHandle, StepOptions};

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
    /// Steps recorded by earlier runs, by position: a replay returns these instead of running.
    recorded: HashMap<u32, v1::Step>,
    next_step: AtomicU32,
    conn: Arc<Conn>,
    cancelled: Arc<AtomicBool>,
    wakeup: Arc<Notify>,
    delivered: Deliveries,
    records: Arc<Records>,
    park_after: Option<Duration>,
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
                recorded: d.steps.iter().map(|s| (s.step_id, s.clone())).collect(),
                next_step: AtomicU32::new(0),
                conn,
                cancelled,
                wakeup,
                delivered,
                records,
                park_after,
            }),
        }
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
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        let name = name.to_string();
        async move {
            if let Some(rec) = inner.recorded.get(&step_id) {
                return replay(&inner.workflow_id, step_id, &name, rec);
            }
            if inner.cancelled.load(Ordering::SeqCst) {
                return Err(WorkflowError::Cancelled);
            }
            // This step may depend on the ones before: their records are durable first.
            inner.flush().await?;
            let mut attempt = 1;
            let result = loop {
                match f().await {
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
            let outcome = match &result {
                Ok((_, p)) => v1::record_step::Outcome::Output(p.clone()),
                Err((kind, message)) => v1::record_step::Outcome::Failure(v1::Failure {
                    kind: kind.to_string(),
                    message: message.clone(),
                }),
            };
            inner.defer(step_id, &name, outcome, attempt);
            result
                .map(|(v, _)| v)
                .map_err(|(_, message)| WorkflowError::Step { name, message })
        }
    }
}

impl Inner {
    /// Sends a request for this workflow, after the step records it holds back.
    async fn request(&self, kind: worker_message::Kind) -> Result<reply::Result, WorkflowError> {
        self.flush().await?;
        let reply = self.conn.request_resending(kind).await;
        if reply.is_err() {
            self.records.drop_run();
        }
        reply
    }

    /// Holds back a step's record until the next request or the completion.
    fn defer(&self, step_id: u32, name: &str, outcome: v1::record_step::Outcome, attempts: u32) {
        self.records.hold(v1::RecordStep {
            workflow_id: self.workflow_id.clone(),
            epoch: self.epoch,
            step_id,
            name: name.to_string(),
            outcome: Some(outcome),
            attempts,
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
        };
        match self.request(worker_message::Kind::RecordStep(req)).await? {
            reply::Result::StepRecorded(_) => Ok(()),
            reply::Result::Error(e) => Err(refused(e)),
            _ => Err(WorkflowError::Disconnected),
        }
    }

    /// The JSON a step recorded under `name` at `step_id`, if recorded (non-determinism if
    /// another step is recorded there).
    fn recorded_json(&self, step_id: u32, name: &str) -> Result<Option<serde_json::Value>, WorkflowError> {
        match self.recorded.get(&step_id) {
            None => Ok(None),
            Some(rec) => replay::<serde_json::Value>(&self.workflow_id, step_id, name, rec).map(Some),
        }
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

    fn check_cancelled(&self) -> Result<(), WorkflowError> {
        if self.cancelled.load(Ordering::SeqCst) {
            Err(WorkflowError::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Waits until `until` (Unix ms, by `clock`'s reckoning at `now`), or a wakeup, or a cancel.
    async fn wait_until(&self, until_ms: i64, now_ms: i64) -> Result<(), WorkflowError> {
        let remaining = Duration::from_millis(until_ms.saturating_sub(now_ms).max(0) as u64);
        tokio::select! {
            _ = tokio::time::sleep(remaining) => {}
            _ = self.wakeup.notified() => {}
        }
        self.check_cancelled()
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn json_payload(v: &serde_json::Value) -> v1::record_step::Outcome {
    v1::record_step::Outcome::Output(json::to_payload(v))
}

/// Step names the SDKs record for durable waits; every SDK uses the same ones.
const SLEEP_STEP: &str = "waymark.sleep";
const RECV_DEADLINE_STEP: &str = "waymark.recv.deadline";
const RECV_STEP: &str = "waymark.recv";
const SEND_STEP: &str = "waymark.send";
const SET_EVENT_STEP: &str = "waymark.set_event";
const GET_EVENT_DEADLINE_STEP: &str = "waymark.get_event.deadline";
const GET_EVENT_STEP: &str = "waymark.get_event";
const WRITE_STREAM_STEP: &str = "waymark.write_stream";
const CLOSE_STREAM_STEP: &str = "waymark.close_stream";
const START_CHILD_STEP: &str = "waymark.start_child";
const AWAIT_CHILD_STEP: &str = "waymark.await_child";

impl WorkflowContext {
    /// Sleeps durably: the wake time is recorded as a step, so a workflow recovered mid-sleep
    /// sleeps only what is left. Cancelling the workflow ends the sleep.
    pub fn sleep(&self, duration: Duration) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        async move {
            let wake_at = match inner.recorded_json(step_id, SLEEP_STEP)? {
                Some(v) => v.get("wake_at_ms").and_then(|w| w.as_i64()).unwrap_or(0),
                None => {
                    inner.check_cancelled()?;
                    let wake_at = unix_ms().saturating_add(duration.as_millis().min(i64::MAX as u128) as i64);
                    inner
                        .record(
                            step_id,
                            SLEEP_STEP,
                            json_payload(&serde_json::json!({ "wake_at_ms": wake_at })),
                            1,
                        )
                        .await?;
                    wake_at
                }
            };
            if inner.should_park(wake_at, unix_ms()) && inner.park(step_id, wake_at, v1::park::On::Timer(true)).await? {
                return Err(WorkflowError::Parked);
            }
            while unix_ms() < wake_at {
                inner.wait_until(wake_at, unix_ms()).await?;
            }
            Ok(())
        }
    }

    /// Sends `message` to workflow `destination` on `topic` ("" is the default topic). Recorded
    /// as a step: a replay does not send again. Returns the message id.
    pub fn send<M: Serialize>(
        &self,
        destination: &str,
        topic: &str,
        message: &M,
    ) -> impl Future<Output = Result<String, WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        let (destination, topic) = (destination.to_string(), topic.to_string());
        let message = serde_json::to_value(message);
        async move {
            if let Some(v) = inner.recorded_json(step_id, SEND_STEP)? {
                return Ok(v
                    .get("message_id")
                    .and_then(|m| m.as_str())
                    .unwrap_or_default()
                    .to_string());
            }
            inner.check_cancelled()?;
            let req = v1::SendMessageStep {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                destination_id: destination,
                topic,
                message: Some(inner.conn.limits.payload("the message", &message?)?),
            };
            match inner.request(worker_message::Kind::SendMessage(req)).await? {
                reply::Result::MessageSent(m) => Ok(m.message_id),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }

    /// Takes the oldest message sent to this workflow on `topic` ("" is the default topic),
    /// waiting up to `timeout` for one; `None` when none came. The deadline is recorded first, so
    /// a recovered workflow keeps its original timeout, and the message is consumed and recorded
    /// in one transaction, so it is received exactly once. The server wakes the wait when a
    /// message arrives; nothing polls.
    pub fn recv<T: DeserializeOwned>(
        &self,
        topic: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send {
        let steps = (
            self.inner.next_step.fetch_add(2, Ordering::SeqCst),
            RECV_DEADLINE_STEP,
            RECV_STEP,
            "message",
        );
        let (inner, topic) = (self.inner.clone(), topic.to_string());
        async move {
            let request = |step_id, deadline_ms| {
                worker_message::Kind::Recv(v1::Recv {
                    workflow_id: inner.workflow_id.clone(),
                    epoch: inner.epoch,
                    step_id,
                    topic: topic.clone(),
                    deadline_ms,
                })
            };
            let park_on = v1::park::On::Topic(topic.clone());
            let got = inner.durable_wait(steps, timeout, park_on, request).await?;
            got.map(|m| serde_json::from_value(m).map_err(WorkflowError::from))
                .transpose()
        }
    }

    /// Sets this workflow's event `key` to `value`. The current value, its history and the step
    /// are written in one transaction; clients and other workflows waiting on it are woken.
    pub fn set_event<V: Serialize>(
        &self,
        key: &str,
        value: &V,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let (inner, key) = (self.inner.clone(), key.to_string());
        let value = serde_json::to_value(value);
        async move {
            if inner.recorded_json(step_id, SET_EVENT_STEP)?.is_some() {
                return Ok(());
            }
            inner.check_cancelled()?;
            let req = v1::SetEvent {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                key,
                value: Some(inner.conn.limits.payload("the event's value", &value?)?),
            };
            match inner.request(worker_message::Kind::SetEvent(req)).await? {
                reply::Result::StepRecorded(_) => Ok(()),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }

    /// Reads workflow `workflow_id`'s event `key`, waiting up to `timeout` for it to be set;
    /// `None` when it was not. Recorded, with its deadline, like [`recv`](Self::recv).
    pub fn get_event<T: DeserializeOwned>(
        &self,
        workflow_id: &str,
        key: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<T>, WorkflowError>> + Send {
        let steps = (
            self.inner.next_step.fetch_add(2, Ordering::SeqCst),
            GET_EVENT_DEADLINE_STEP,
            GET_EVENT_STEP,
            "value",
        );
        let (inner, target, key) = (self.inner.clone(), workflow_id.to_string(), key.to_string());
        async move {
            let request = |step_id, deadline_ms| {
                worker_message::Kind::GetEvent(v1::GetEventStep {
                    workflow_id: inner.workflow_id.clone(),
                    epoch: inner.epoch,
                    step_id,
                    target_workflow_id: target.clone(),
                    key: key.clone(),
                    deadline_ms,
                })
            };
            let park_on = v1::park::On::Event(v1::EventKey {
                workflow_id: target.clone(),
                key: key.clone(),
            });
            let got = inner.durable_wait(steps, timeout, park_on, request).await?;
            got.map(|v| serde_json::from_value(v).map_err(WorkflowError::from))
                .transpose()
        }
    }
}

impl WorkflowContext {
    /// Appends `value` to this workflow's stream `key`; returns its offset. Recorded as a step,
    /// so a replay does not append again. Readers following the stream get it at once.
    pub fn write_stream<V: Serialize>(
        &self,
        key: &str,
        value: &V,
    ) -> impl Future<Output = Result<u64, WorkflowError>> + Send {
        let value = serde_json::to_value(value).map(Some);
        self.stream_step(key, value, WRITE_STREAM_STEP)
    }

    /// Closes this workflow's stream `key`: readers end after the values written before it.
    pub fn close_stream(&self, key: &str) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let step = self.stream_step(key, Ok(None), CLOSE_STREAM_STEP);
        async move { step.await.map(drop) }
    }

    fn stream_step(
        &self,
        key: &str,
        value: Result<Option<serde_json::Value>, serde_json::Error>,
        name: &'static str,
    ) -> impl Future<Output = Result<u64, WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let (inner, key) = (self.inner.clone(), key.to_string());
        async move {
            if let Some(v) = inner.recorded_json(step_id, name)? {
                return Ok(v.get("offset").and_then(|o| o.as_u64()).unwrap_or_default());
            }
            inner.check_cancelled()?;
            let value = match value? {
                Some(v) => Some(inner.conn.limits.payload("the stream value", &v)?),
                None => None,
            };
            let req = v1::WriteStream {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                key,
                close: value.is_none(),
                value,
            };
            match inner.request(worker_message::Kind::WriteStream(req)).await? {
                reply::Result::StreamWritten(w) => Ok(w.offset),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }
}

impl WorkflowContext {
    /// Starts a child workflow and returns its id. The child's row and this workflow's record
    /// of it are written together, so a replay re-joins the same child instead of starting
    /// another. Its id is `id` when given, else derived from this workflow's id and the step.
    pub fn start_child<I: Serialize>(
        &self,
        workflow_name: &str,
        input: &I,
        id: Option<&str>,
    ) -> impl Future<Output = Result<String, WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let inner = self.inner.clone();
        let (name, id) = (workflow_name.to_string(), id.unwrap_or_default().to_string());
        let input = serde_json::to_value(input);
        async move {
            if let Some(v) = inner.recorded_json(step_id, START_CHILD_STEP)? {
                return Ok(v
                    .get("workflow_id")
                    .and_then(|w| w.as_str())
                    .unwrap_or_default()
                    .to_string());
            }
            inner.check_cancelled()?;
            let req = v1::StartChild {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                workflow_name: name,
                child_workflow_id: id,
                input: Some(inner.conn.limits.payload("the child's input", &input?)?),
                queue_name: String::new(),
            };
            match inner.request(worker_message::Kind::StartChild(req)).await? {
                reply::Result::ChildStarted(c) => Ok(c.child_workflow_id),
                reply::Result::Error(e) => Err(refused(e)),
                _ => Err(WorkflowError::Disconnected),
            }
        }
    }

    /// Waits for workflow `child_id` (a child, or any workflow) to finish and returns its output.
    /// Recorded: a replay gets the same result without waiting. A child that failed, was
    /// cancelled or dead-lettered is an error of kind `ChildFailed`, `ChildCancelled` or
    /// `ChildDeadLettered`.
    pub fn await_child<T: DeserializeOwned>(
        &self,
        child_id: &str,
    ) -> impl Future<Output = Result<T, WorkflowError>> + Send {
        let step_id = self.inner.next_step.fetch_add(1, Ordering::SeqCst);
        let (inner, child_id) = (self.inner.clone(), child_id.to_string());
        async move {
            let waiting_since = unix_ms();
            let outcome = match inner.recorded_json(step_id, AWAIT_CHILD_STEP)? {
                Some(v) => v,
                None => loop {
                    inner.check_cancelled()?;
                    let req = v1::AwaitChild {
                        workflow_id: inner.workflow_id.clone(),
                        epoch: inner.epoch,
                        step_id,
                        child_workflow_id: child_id.clone(),
                    };
                    let r = match inner.request(worker_message::Kind::AwaitChild(req)).await? {
                        reply::Result::ChildResult(r) => r,
                        reply::Result::Error(e) => return Err(refused(e)),
                        _ => return Err(WorkflowError::Disconnected),
                    };
                    if r.outcome == v1::recv_result::Outcome::Delivered as i32 {
                        break child_json(&r);
                    }
                    // Parked once it has waited past the threshold: children can run for days.
                    match inner
                        .park_after
                        .map(|t| waiting_since.saturating_add(t.as_millis() as i64))
                    {
                        Some(at) if unix_ms() >= at => {
                            let on = v1::park::On::AwaitedWorkflowId(child_id.clone());
                            if inner.park(step_id, i64::MAX, on).await? {
                                return Err(WorkflowError::Parked);
                            }
                        }
                        Some(at) => inner.wait_until(at, unix_ms()).await?,
                        None => inner.wait_until(i64::MAX, 0).await?,
                    }
                },
            };
            child_result(&child_id, outcome)
        }
    }
}

/// A child result from the wire, in the form await_child steps record.
fn child_json(r: &v1::ChildResult) -> serde_json::Value {
    let status = crate::WorkflowStatus::from_wire(r.status);
    let mut m = serde_json::json!({ "status": status.as_str() });
    if let Some(o) = &r.output {
        m["output"] = json::from_payload(Some(o)).unwrap_or_default();
    }
    if let Some(f) = &r.failure {
        m["failure"] = serde_json::json!({ "kind": f.kind, "message": f.message });
    }
    m
}

fn child_result<T: DeserializeOwned>(child_id: &str, mut v: serde_json::Value) -> Result<T, WorkflowError> {
    let failure = v.get("failure").map(|f| {
        format!(
            "{}: {}",
            f.get("kind").and_then(|k| k.as_str()).unwrap_or(""),
            f.get("message").and_then(|m| m.as_str()).unwrap_or("")
        )
    });
    match v.get("status").and_then(|s| s.as_str()).unwrap_or_default() {
        "SUCCESS" => Ok(serde_json::from_value(
            v.get_mut("output").map(serde_json::Value::take).unwrap_or_default(),
        )?),
        "CANCELLED" => Err(WorkflowError::failed(
            "ChildCancelled",
            format!("child workflow {child_id} was cancelled"),
        )),
        "MAX_RECOVERY_ATTEMPTS_EXCEEDED" => Err(WorkflowError::failed(
            "ChildDeadLettered",
            format!("child workflow {child_id} was dead-lettered"),
        )),
        _ => Err(WorkflowError::failed(
            "ChildFailed",
            format!("child workflow {child_id} failed: {}", failure.unwrap_or_default()),
        )),
    }
}

impl Inner {
    /// A wait that takes two step positions: the deadline (recorded first, so a recovery keeps
    /// it) and the outcome, which the server records. Asks the server, and on WAITING waits for
    /// its wakeup or the deadline, then asks again.
    async fn durable_wait(
        &self,
        (deadline_step, deadline_name, result_name, field): (u32, &str, &str, &str),
        timeout: Duration,
        park_on: v1::park::On,
        request: impl Fn(u32, i64) -> worker_message::Kind,
    ) -> Result<Option<serde_json::Value>, WorkflowError> {
        let result_step = deadline_step + 1;
        let deadline_ms = match self.recorded_json(deadline_step, deadline_name)? {
            Some(v) => v.get("deadline_ms").and_then(|d| d.as_i64()).unwrap_or(0),
            None => {
                self.check_cancelled()?;
                let deadline = unix_ms().saturating_add(timeout.as_millis().min(i64::MAX as u128) as i64);
                self.record(
                    deadline_step,
                    deadline_name,
                    json_payload(&serde_json::json!({ "deadline_ms": deadline })),
                    1,
                )
                .await?;
                deadline
            }
        };
        if let Some(recorded) = self.recorded_json(result_step, result_name)? {
            return Ok(match recorded {
                serde_json::Value::Null => None,
                mut v => Some(v.get_mut(field).map(serde_json::Value::take).unwrap_or_default()),
            });
        }
        loop {
            self.check_cancelled()?;
            // The server may have completed the wait itself and sent the answer with the wakeup.
            if let Some(p) = self.delivered.lock().unwrap().remove(&result_step) {
                return Ok(Some(
                    json::from_payload(Some(&p)).map_err(|e| WorkflowError::Serialization(e.to_string()))?,
                ));
            }
            let (outcome, value, server_now) = match self.request(request(result_step, deadline_ms)).await? {
                reply::Result::RecvResult(r) => (r.outcome, r.message, r.server_now_ms),
                reply::Result::EventResult(r) => (r.outcome, r.value, r.server_now_ms),
                reply::Result::Error(e) => return Err(refused(e)),
                _ => return Err(WorkflowError::Disconnected),
            };
            use v1::recv_result::Outcome as O;
            match O::try_from(outcome).unwrap_or(O::Unspecified) {
                O::Delivered => {
                    return Ok(Some(
                        json::from_payload(value.as_ref()).map_err(|e| WorkflowError::Serialization(e.to_string()))?,
                    ))
                }
                O::TimedOut => return Ok(None),
                // Wait for a wakeup, or until the deadline by the server's clock.
                _ if self.should_park(deadline_ms, server_now) => {
                    if self.park(result_step, deadline_ms, park_on.clone()).await? {
                        return Err(WorkflowError::Parked);
                    }
                }
                _ => self.wait_until(deadline_ms, server_now).await?,
            }
        }
    }
}

/// The recorded result of a step, or non-determinism when the history has another step there.
fn replay<T: DeserializeOwned>(
    workflow_id: &str,
    step_id: u32,
    name: &str,
    rec: &v1::Step,
) -> Result<T, WorkflowError> {
    if rec.name != name {
        return Err(WorkflowError::NonDeterminism(format!(
            "workflow {workflow_id:?} called step {name:?} at position {step_id}, where its history records {:?}",
            rec.name
        )));
    }
    if let Some(f) = &rec.failure {
        return Err(WorkflowError::Step {
            name: name.to_string(),
            message: f.message.clone(),
        });
    }
    let value = json::from_payload(rec.output.as_ref()).map_err(|e| WorkflowError::Serialization(e.to_string()))?;
    Ok(serde_json::from_value(value)?)
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
