//! What a workflow function gets: its identity, and `step`, which runs a piece of work once
//! and checkpoints its result.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc,
    },
};

use serde::{de::DeserializeOwned, Serialize};
use waymark_proto::{
    json,
    v1::{self, reply, worker_message},
};

use super::session::Conn;
use crate::{RetryPolicy, WorkflowError};

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
}

impl WorkflowContext {
    pub(crate) fn new(d: &v1::DispatchWorkflow, conn: Arc<Conn>, cancelled: Arc<AtomicBool>) -> Self {
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

    /// Runs `f` once as a step named `name` and checkpoints its result before returning it. On
    /// replay the recorded result is returned and `f` is not called. An error from `f` fails
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
            let outcome = match &result {
                Ok(v) => v1::record_step::Outcome::Output(json::to_payload(&serde_json::to_value(v)?)),
                Err(message) => v1::record_step::Outcome::Failure(v1::Failure {
                    kind: "StepFailed".into(),
                    message: message.clone(),
                }),
            };
            let req = v1::RecordStep {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                name: name.clone(),
                outcome: Some(outcome),
                attempts: attempt,
            };
            match inner.conn.request(worker_message::Kind::RecordStep(req)).await? {
                reply::Result::StepRecorded(_) => {}
                reply::Result::Error(e) => return Err(refused(e)),
                _ => return Err(WorkflowError::Disconnected),
            }
            result.map_err(|message| WorkflowError::Step { name, message })
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
fn refused(e: v1::ReplyError) -> WorkflowError {
    match e.reason.as_str() {
        "STALE_EPOCH" => WorkflowError::Fenced(e.message),
        "WORKFLOW_NOT_RUNNING" => WorkflowError::Cancelled,
        "NON_DETERMINISM" => WorkflowError::NonDeterminism(e.message),
        _ => WorkflowError::failed(e.reason, e.message),
    }
}
