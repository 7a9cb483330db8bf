//! `Park`: release a waiting workflow from its worker until what it waits for happens.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::ParkedOn;

use super::command::{take_fence, About, Answer, Command};
use crate::engine::{Engine, WorkerSession};

impl Command for v1::Park {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let on = match self.on {
            Some(v1::park::On::Topic(topic)) => ParkedOn::Message(topic),
            Some(v1::park::On::Event(e)) => ParkedOn::Event {
                workflow_id: e.workflow_id,
                key: e.key,
            },
            Some(v1::park::On::Step(step_id)) => ParkedOn::Step(step_id),
            Some(v1::park::On::AwaitedWorkflowId(id)) => ParkedOn::Workflow(id),
            Some(v1::park::On::Timer(_)) | None => ParkedOn::Timer,
        };
        let parked = engine.park(session, fence, self.step_id, self.wake_at_ms, on).await?;
        Ok(reply::Result::Parked(v1::Parked { parked }))
    }
}
