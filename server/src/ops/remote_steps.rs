//! Remote steps on the worker stream: `CallStep` (a workflow calls a step another worker runs),
//! `StepResult` (that worker reports an attempt), `Select` (wait for the first, or all, of
//! several steps or workflows).

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Outcome, StepAttempt, StepPolicy, WaitFor, WaitTarget};

use super::command::{invalid, payload_text, take_fence, About, Answer, Command};
use crate::{
    engine::{
        remote_steps::{default_policy, CallRequest},
        Engine, EngineError, WorkerSession,
    },
    wire::convert,
};

/// The wire's retry policy and timeout over the defaults.
fn policy(retry: Option<&v1::RetryPolicy>, timeout: Option<&prost_types::Duration>) -> Result<StepPolicy, EngineError> {
    let mut p = default_policy();
    if let Some(r) = retry {
        p.max_attempts = r.max_attempts;
        if let Some(ms) =
            convert::duration_ms("retry initial_interval", r.initial_interval.as_ref()).map_err(invalid)?
        {
            p.initial_backoff_ms = ms;
        }
        if r.backoff_coefficient != 0.0 {
            p.backoff_coefficient = r.backoff_coefficient;
        }
        if let Some(ms) = convert::duration_ms("retry max_interval", r.max_interval.as_ref()).map_err(invalid)? {
            p.max_backoff_ms = ms;
        }
    }
    if let Some(ms) = convert::duration_ms("timeout", timeout).map_err(invalid)? {
        p.timeout_ms = ms;
    }
    Ok(p)
}

impl Command for v1::CallStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        call(engine, session, fence, self).await
    }
}

impl Command for v1::StepResult {
    /// Fenced by its attempt, not by an epoch: the worker running a remote step holds no
    /// workflow.
    fn about(&self) -> About<'_> {
        About {
            workflow_id: &self.workflow_id,
            epoch: None,
            step_id: Some(self.step_id),
        }
    }

    async fn apply(self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        result(engine, session, self).await
    }
}

impl Command for v1::Select {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        select(engine, session, fence, self).await
    }
}

async fn call(engine: &Engine, session: &Arc<WorkerSession>, fence: waymark_store::Fence, c: v1::CallStep) -> Answer {
    let req = CallRequest {
        step_name: c.step_name,
        input: payload_text("step input", c.input.as_ref())?,
        policy: policy(c.retry.as_ref(), c.timeout.as_ref())?,
        trace: convert::trace_from_wire(c.trace_context.as_ref()),
    };
    use v1::recv_result::Outcome as O;
    let result = match engine.call_step(session, fence, c.step_id, req).await? {
        None => v1::CallResult {
            outcome: O::Waiting as i32,
            ..Default::default()
        },
        Some(rec) => {
            let (output, failure) = match &rec.outcome {
                Outcome::Output(o) => (convert::payload(o), None),
                Outcome::Failure(f) => (None, Some(convert::failure_to_wire(f))),
            };
            v1::CallResult {
                outcome: O::Delivered as i32,
                output,
                failure,
                attempts: rec.attempts,
            }
        }
    };
    Ok(reply::Result::CallResult(result))
}

async fn result(engine: &Engine, session: &WorkerSession, r: v1::StepResult) -> Answer {
    let outcome = match &r.outcome {
        Some(v1::step_result::Outcome::Failure(f)) => Outcome::Failure(convert::failure_from_wire(f)),
        Some(v1::step_result::Outcome::Output(p)) => Outcome::Output(payload_text("step output", Some(p))?),
        None => Outcome::Output(payload_text("step output", None)?),
    };
    let attempt = StepAttempt {
        workflow_id: r.workflow_id,
        step_id: r.step_id,
        attempt: r.attempt,
        session_id: session.lease_id.clone(),
    };
    engine.finish_step(session, attempt, outcome).await?;
    Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
}

async fn select(engine: &Engine, session: &Arc<WorkerSession>, fence: waymark_store::Fence, s: v1::Select) -> Answer {
    let targets = s
        .targets
        .into_iter()
        .map(|t| match t.target {
            Some(v1::wait_target::Target::WorkflowId(id)) => Ok(WaitTarget::Workflow(id)),
            Some(v1::wait_target::Target::StepId(step)) => Ok(WaitTarget::Step(step)),
            None => Err(EngineError::invalid(
                "every wait target needs a workflow_id or a step_id",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    use v1::recv_result::Outcome as O;
    let mode = if s.all { WaitFor::All } else { WaitFor::First };
    let selected = match engine.select(session, fence, s.step_id, targets, mode).await? {
        None => v1::Selected {
            outcome: O::Waiting as i32,
            index: 0,
        },
        Some(index) => v1::Selected {
            outcome: O::Delivered as i32,
            index,
        },
    };
    Ok(reply::Result::Selected(selected))
}
