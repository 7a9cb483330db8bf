//! `StepResult`: the worker that ran an attempt of a remote step reports its outcome. Fenced by
//! the attempt (its number and the stream's lease), not by an epoch: the worker running a
//! remote step holds no workflow. A success, or a failure out of attempts, is recorded as the
//! caller's step and wakes it; a failure with attempts left is retried after its backoff.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Outcome, StepAttempt, StepFinished, StoreError};

use super::command::{payload_text, About, Answer, Command};
use crate::engine::{error::permission_denied, validate, Engine, EngineResult, WorkerSession};
use crate::wire::convert;

impl Command for v1::StepResult {
    fn about(&self) -> About<'_> {
        About {
            workflow_id: &self.workflow_id,
            epoch: None,
            step_id: Some(self.step_id),
        }
    }

    async fn apply(self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let outcome = match &self.outcome {
            Some(v1::step_result::Outcome::Failure(f)) => Outcome::Failure(convert::failure_from_wire(f)),
            Some(v1::step_result::Outcome::Output(p)) => Outcome::Output(payload_text("step output", Some(p))?),
            None => Outcome::Output(payload_text("step output", None)?),
        };
        let attempt = StepAttempt {
            workflow_id: self.workflow_id,
            step_id: self.step_id,
            attempt: self.attempt,
            session_id: session.lease_id.clone(),
        };
        run(engine, session, attempt, outcome).await?;
        Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
    }
}

/// A worker's result for an attempt it ran.
pub(crate) async fn run(
    engine: &Engine,
    session: &WorkerSession,
    attempt: StepAttempt,
    outcome: Outcome,
) -> EngineResult<()> {
    session.touch(engine.core.now());
    validate::name("workflow_id", &attempt.workflow_id)?;
    if let Outcome::Output(o) = &outcome {
        validate::payload("step output", o, engine.config().max_payload_bytes)?;
    }
    let store = engine.store();
    let finished = match store.finish_step_task(&attempt, outcome, engine.core.now()).await {
        Err(StoreError::StepAttemptStale { .. }) if !session.registration.name_patterns.is_empty() => {
            // Refused either way; a key that could never serve this step is told so.
            let call = store.step_call(&attempt.workflow_id, attempt.step_id).await?;
            return Err(match call {
                Some((name, _)) if !session.registration.reaches(&name) => {
                    permission_denied(format!("this worker's key does not serve step {name:?}"))
                }
                _ => StoreError::StepAttemptStale {
                    workflow_id: attempt.workflow_id,
                    step_id: attempt.step_id,
                    attempt: attempt.attempt,
                }
                .into(),
            });
        }
        other => other?,
    };
    match finished {
        StepFinished::Recorded => {
            tracing::debug!(workflow_id = %attempt.workflow_id, step_id = attempt.step_id, "remote step recorded");
            engine.waits.step_recorded(&attempt.workflow_id, attempt.step_id).await;
        }
        StepFinished::Retrying { at } => {
            tracing::debug!(workflow_id = %attempt.workflow_id, step_id = attempt.step_id, attempt = attempt.attempt, "remote step failed; retrying");
            engine.retry_at(at);
        }
    }
    Ok(())
}
