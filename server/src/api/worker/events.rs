//! `SetEvent` and `GetEventStep`: a workflow's event writes and reads, each recorded as its step.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, wait_outcome, Answer, Fenced};
use crate::engine::{Engine, WorkerSession};

pub async fn set(engine: &Engine, session: &WorkerSession, mut e: v1::SetEvent) -> Answer {
    let fence = e.fence();
    let value = payload_text("event value", e.value.as_ref())?;
    engine.set_event(session, fence, e.step_id, e.key, value).await?;
    Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
}

pub async fn get(engine: &Engine, session: &Arc<WorkerSession>, mut g: v1::GetEventStep) -> Answer {
    let fence = g.fence();
    let received = engine
        .get_event_step(session, fence, g.step_id, g.target_workflow_id, g.key, g.deadline_ms)
        .await?;
    let (outcome, value) = wait_outcome(received);
    Ok(reply::Result::EventResult(v1::EventResult {
        outcome: outcome as i32,
        value,
        server_now_ms: engine.now_ms(),
    }))
}
