//! `SendMessageStep` and `Recv`: a workflow's sends and receives, each recorded as its step.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, take_fence, wait_outcome, About, Answer, Command};
use crate::engine::{Engine, WorkerSession};

impl Command for v1::SendMessageStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let message = payload_text("message", self.message.as_ref())?;
        let message_id = engine
            .send_message_step(session, fence, self.step_id, self.destination_id, self.topic, message)
            .await?;
        Ok(reply::Result::MessageSent(v1::MessageSent { message_id }))
    }
}

impl Command for v1::Recv {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let received = engine
            .recv(session, fence, self.step_id, self.topic, self.deadline_ms)
            .await?;
        let (outcome, message) = wait_outcome(received);
        Ok(reply::Result::RecvResult(v1::RecvResult {
            outcome: outcome as i32,
            message,
            server_now_ms: engine.now_ms(),
        }))
    }
}
