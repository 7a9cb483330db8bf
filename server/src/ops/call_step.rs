//! `CallStep`: a workflow calls a step by name, and any worker that registered the name runs
//! it. The call is queued once per caller position; attempts are dispatched to workers with
//! step credits, retried with backoff, failed past their timeout, and the result is recorded
//! as the caller's step (see `step_result.rs`), which wakes the caller. Asking again answers
//! from that record, or `Waiting` while it runs.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Fence, Millis, NewStepTask, Outcome, StepPolicy, StepRecord};

use super::command::{invalid, payload_text, take_fence, About, Answer, Command};
use crate::engine::{validate, waits::step_waits::StepWaiter, Engine, EngineError, EngineResult, WorkerSession};
use crate::wire::convert;

/// Defaults for calls that do not say.
pub(crate) fn default_policy() -> StepPolicy {
    StepPolicy {
        max_attempts: 3,
        initial_backoff_ms: 1_000,
        backoff_coefficient: 2.0,
        max_backoff_ms: 60_000,
        timeout_ms: 5 * 60_000,
    }
}

impl Command for v1::CallStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        use v1::recv_result::Outcome as O;
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let task = NewStepTask {
            input: payload_text("step input", self.input.as_ref())?,
            policy: policy(self.retry.as_ref(), self.timeout.as_ref())?,
            trace: convert::trace_from_wire(self.trace_context.as_ref()),
            step_name: self.step_name,
        };
        let result = match run(engine, session, fence, self.step_id, task).await? {
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
}

/// Calls (or asks again for) a remote step as the fenced workflow's step `step_id`; `None`
/// while it runs — the caller is woken when its result is recorded (the wait is in place
/// before the call is written).
pub(crate) async fn run(
    engine: &Engine,
    session: &Arc<WorkerSession>,
    fence: Fence,
    step_id: u32,
    task: NewStepTask,
) -> EngineResult<Option<StepRecord>> {
    engine.workers.worker_write(session, &fence, 0).await?;
    validate::name("step_name", &task.step_name)?;
    validate::payload("step input", &task.input, engine.config().max_payload_bytes)?;
    validate_policy(&task.policy)?;
    let key = (fence.workflow_id.clone(), step_id);
    let waits = &engine.waits.steps;
    waits.add(key.clone(), StepWaiter::new(session, &fence, step_id));
    let result = engine
        .store()
        .call_step(&fence, step_id, &task, engine.core.now())
        .await;
    if !matches!(result, Ok(None)) {
        waits.forget(&key);
    } else {
        engine.core.work_enqueued();
    }
    Ok(result?)
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

fn validate_policy(p: &StepPolicy) -> EngineResult<()> {
    const DAY_MS: Millis = 24 * 3600 * 1000;
    if !(1..=1000).contains(&p.max_attempts) {
        return Err(EngineError::invalid("retry max_attempts must be between 1 and 1000"));
    }
    if !(1.0..=100.0).contains(&p.backoff_coefficient) {
        return Err(EngineError::invalid(
            "retry backoff_coefficient must be between 1.0 and 100.0",
        ));
    }
    if !(0..=DAY_MS).contains(&p.initial_backoff_ms) || !(0..=DAY_MS).contains(&p.max_backoff_ms) {
        return Err(EngineError::invalid("retry intervals must be between 0 and 24 hours"));
    }
    if !(1..=7 * DAY_MS).contains(&p.timeout_ms) {
        return Err(EngineError::invalid(
            "a remote step's timeout must be between 1 ms and 7 days",
        ));
    }
    Ok(())
}
