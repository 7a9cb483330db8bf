//! `RecordStep`: checkpoint one step's outcome.

use waymark_proto::v1::{self, reply};
use waymark_store::{NewStep, Outcome};

use super::command::{payload_text, Answer, Fenced};
use crate::{
    api::convert,
    engine::{Engine, EngineError, WorkerSession},
};

/// A step checkpoint from the wire (its fence is taken from the request that carries it).
pub fn new_step(r: v1::RecordStep) -> Result<NewStep, EngineError> {
    let outcome = match r.outcome {
        Some(v1::record_step::Outcome::Failure(f)) => Outcome::Failure(convert::failure_from_wire(&f)),
        Some(v1::record_step::Outcome::Output(p)) => Outcome::Output(payload_text("step output", Some(&p))?),
        None => Outcome::Output(payload_text("step output", None)?),
    };
    Ok(NewStep {
        step_id: r.step_id,
        name: r.name,
        outcome,
        attempts: r.attempts.max(1),
    })
}

pub async fn apply(engine: &Engine, session: &WorkerSession, mut r: v1::RecordStep) -> Answer {
    let fence = r.fence();
    engine.record_step(session, fence, new_step(r)?).await?;
    Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
}
