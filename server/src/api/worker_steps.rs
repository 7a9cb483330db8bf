//! The worker stream's remote step requests — call a step, report an attempt's result, wait for
//! the first of several — and the dispatch of an attempt, converted to and from the engine.

use std::sync::Arc;

use waymark_proto::v1::{self, reply, server_message};
use waymark_store::{Fence, Outcome, StepAttempt, StepPolicy, StepTask, WaitFor, WaitTarget};

use super::convert;
use crate::engine::{
    remote_steps::{default_policy, CallRequest},
    Engine, EngineError, WorkerSession,
};

type Answer = Result<reply::Result, EngineError>;

fn invalid(s: tonic::Status) -> EngineError {
    EngineError::invalid(s.message().to_string())
}

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

pub(super) async fn call_step(engine: &Engine, session: &Arc<WorkerSession>, c: v1::CallStep) -> Answer {
    let fence = Fence {
        workflow_id: c.workflow_id,
        epoch: c.epoch,
    };
    let req = CallRequest {
        step_name: c.step_name,
        input: convert::payload_text("step input", c.input.as_ref()).map_err(invalid)?,
        policy: policy(c.retry.as_ref(), c.timeout.as_ref())?,
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

pub(super) async fn step_result(engine: &Engine, session: &WorkerSession, r: v1::StepResult) -> Answer {
    let outcome = match &r.outcome {
        Some(v1::step_result::Outcome::Failure(f)) => Outcome::Failure(convert::failure_from_wire(f)),
        Some(v1::step_result::Outcome::Output(p)) => {
            Outcome::Output(convert::payload_text("step output", Some(p)).map_err(invalid)?)
        }
        None => Outcome::Output(convert::payload_text("step output", None).map_err(invalid)?),
    };
    let attempt = StepAttempt {
        workflow_id: r.workflow_id,
        step_id: r.step_id,
        attempt: r.attempt,
    };
    engine.finish_step(session, attempt, outcome).await?;
    Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
}

pub(super) async fn select(engine: &Engine, session: &Arc<WorkerSession>, s: v1::Select) -> Answer {
    let fence = Fence {
        workflow_id: s.workflow_id,
        epoch: s.epoch,
    };
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

pub(super) fn dispatch(t: StepTask) -> server_message::Kind {
    server_message::Kind::DispatchStep(v1::DispatchStep {
        input: convert::payload(&t.input),
        deadline: convert::timestamp(t.deadline_at),
        workflow_id: t.workflow_id,
        step_id: t.step_id,
        step_name: t.step_name,
        attempt: t.attempt,
    })
}
