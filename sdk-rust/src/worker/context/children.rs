//! Child workflows: started as a step (the child's row and this workflow's record of it are
//! written together) and awaited as a step.

use std::future::Future;

use serde::{de::DeserializeOwned, Serialize};
use waymark_journal::{names, shapes};
use waymark_proto::{
    json,
    v1::{self, reply, worker_message},
};

use super::{refused, unix_ms, WorkflowContext};
use crate::WorkflowError;

/// A child start's options beyond its name and input (see [`WorkflowContext::start_child_with`]).
#[derive(Debug, Clone, Default)]
pub struct ChildOptions {
    /// Its id; derived from this workflow's id and the step when `None`.
    pub id: Option<String>,
    /// Tags over this workflow's, which the child inherits: these replace or add keys.
    pub tags: std::collections::BTreeMap<String, String>,
}

impl WorkflowContext {
    /// Starts a child workflow and returns its id. The child's row and this workflow's record
    /// of it are written together, so a replay re-joins the same child instead of starting
    /// another. Its id is `id` when given, else derived from this workflow's id and the step.
    /// It inherits this workflow's tags.
    pub fn start_child<I: Serialize>(
        &self,
        workflow_name: &str,
        input: &I,
        id: Option<&str>,
    ) -> impl Future<Output = Result<String, WorkflowError>> + Send {
        let options = ChildOptions {
            id: id.map(str::to_string),
            ..Default::default()
        };
        self.start_child_with(workflow_name, input, options)
    }

    /// Like [`start_child`](Self::start_child), with its id and its own tags in `options`.
    pub fn start_child_with<I: Serialize>(
        &self,
        workflow_name: &str,
        input: &I,
        options: ChildOptions,
    ) -> impl Future<Output = Result<String, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        let (name, id) = (workflow_name.to_string(), options.id.unwrap_or_default());
        let tags = options.tags;
        let input = serde_json::to_value(input);
        async move {
            if let Some(started) = inner.builtin::<shapes::ChildStarted>(step_id, names::START_CHILD)? {
                return Ok(started.workflow_id);
            }
            inner.check_cancelled()?;
            let mut attributes = crate::tracing_ctx::step_attributes(&inner.workflow_id, step_id, &name);
            attributes.push(opentelemetry::KeyValue::new("waymark.workflow.name", name.clone()));
            let span = crate::tracing_ctx::open(
                format!("start child {name}"),
                opentelemetry::trace::SpanKind::Producer,
                &inner.otel,
                attributes,
            );
            let req = v1::StartChild {
                workflow_id: inner.workflow_id.clone(),
                epoch: inner.epoch,
                step_id,
                workflow_name: name,
                child_workflow_id: id,
                input: Some(inner.conn.limits.payload("the child's input", &input?)?),
                queue_name: String::new(),
                trace_context: crate::tracing_ctx::wire(&span),
                tags: tags.into_iter().collect(),
            };
            let answer = inner.request(worker_message::Kind::StartChild(req)).await;
            crate::tracing_ctx::end(&span, answer.as_ref().err().map(|e| e.to_string()));
            match answer? {
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
        let step_id = self.inner.history.take(1);
        let (inner, child_id) = (self.inner.clone(), child_id.to_string());
        async move {
            let waiting_since = unix_ms();
            let outcome = match inner.builtin::<shapes::ChildOutcome>(step_id, names::AWAIT_CHILD)? {
                Some(o) => o,
                None => {
                    let _span = inner.wait_span("child", step_id, Some(("waymark.wait.workflow_id", child_id.clone())));
                    loop {
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
                            break child_outcome(&r);
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
                    }
                }
            };
            child_result(&child_id, outcome)
        }
    }
}

/// A child result from the wire, as await_child steps record it.
fn child_outcome(r: &v1::ChildResult) -> shapes::ChildOutcome {
    shapes::ChildOutcome {
        status: crate::WorkflowStatus::from_wire(r.status).as_str().to_string(),
        output: r
            .output
            .as_ref()
            .map(|o| json::from_payload(Some(o)).unwrap_or_default()),
        failure: r.failure.as_ref().map(|f| shapes::ChildFailure {
            kind: f.kind.clone(),
            message: f.message.clone(),
        }),
    }
}

fn child_result<T: DeserializeOwned>(child_id: &str, o: shapes::ChildOutcome) -> Result<T, WorkflowError> {
    match o.status.as_str() {
        "SUCCESS" => Ok(serde_json::from_value(o.output.unwrap_or_default())?),
        "CANCELLED" => Err(WorkflowError::failed(
            "ChildCancelled",
            format!("child workflow {child_id} was cancelled"),
        )),
        "MAX_RECOVERY_ATTEMPTS_EXCEEDED" => Err(WorkflowError::failed(
            "ChildDeadLettered",
            format!("child workflow {child_id} was dead-lettered"),
        )),
        _ => {
            let failure = o.failure.map(|f| format!("{}: {}", f.kind, f.message));
            Err(WorkflowError::failed(
                "ChildFailed",
                format!("child workflow {child_id} failed: {}", failure.unwrap_or_default()),
            ))
        }
    }
}
