//! `RecordStep`: checkpoint one step's outcome.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Millis, NewStep, Outcome};

use super::command::{payload_text, take_fence, About, Answer, Command};
use crate::{
    engine::{Engine, EngineError, WorkerSession},
    wire::convert,
};

/// The longest a step is taken to have run: a larger (or forged) duration dates it no earlier.
const MAX_STEP_MS: Millis = 366 * 24 * 3600 * 1000;

/// When a step began, from the duration its worker reported and the time its record arrived
/// (`now`); `None` when the worker said nothing, or something negative.
fn started_at(took: Option<&prost_types::Duration>, now: Millis) -> Option<Millis> {
    let d = took?;
    if d.seconds < 0 || d.nanos < 0 {
        return None;
    }
    let ms = d
        .seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(d.nanos / 1_000_000))
        .min(MAX_STEP_MS);
    Some(now - ms)
}

/// A step checkpoint from the wire (its fence is taken from the request that carries it),
/// arriving at `now`.
pub fn new_step(r: v1::RecordStep, now: Millis) -> Result<NewStep, EngineError> {
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
        started_at: started_at(r.duration.as_ref(), now),
    })
}

impl Command for v1::RecordStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        engine
            .workers
            .record_step(session, fence, new_step(self, engine.now_ms())?)
            .await?;
        Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn took(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
        Some(prost_types::Duration { seconds, nanos })
    }

    #[test]
    fn a_step_is_dated_from_its_duration_within_bounds() {
        let now = 1_700_000_000_000;
        assert_eq!(started_at(took(1, 500_000_000).as_ref(), now), Some(now - 1500));
        assert_eq!(started_at(None, now), None);
        // Negative durations say nothing; absurd ones are capped.
        assert_eq!(started_at(took(-1, 0).as_ref(), now), None);
        assert_eq!(started_at(took(0, -5).as_ref(), now), None);
        assert_eq!(started_at(took(i64::MAX, 0).as_ref(), now), Some(now - MAX_STEP_MS));
    }
}
