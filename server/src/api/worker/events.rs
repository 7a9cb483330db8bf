//! `SetEvent` and `GetEventStep`: a workflow's event writes and reads, each recorded as its step.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, take_fence, wait_outcome, About, Answer, Command};
use crate::engine::{Engine, WorkerSession};

impl Command for v1::SetEvent {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let value = payload_text("event value", self.value.as_ref())?;
        engine.set_event(session, fence, self.step_id, self.key, value).await?;
        Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
    }
}

impl Command for v1::GetEventStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let received = engine
            .get_event_step(
                session,
                fence,
                self.step_id,
                self.target_workflow_id,
                self.key,
                self.deadline_ms,
            )
            .await?;
        let (outcome, value) = wait_outcome(received);
        Ok(reply::Result::EventResult(v1::EventResult {
            outcome: outcome as i32,
            value,
            server_now_ms: engine.now_ms(),
        }))
    }
}
