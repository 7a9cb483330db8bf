//! `Park`: a waiting workflow is released from its worker until what it waits for happens (a
//! timer, a message, an event, a step or a workflow): the store keeps it DELAYED with its wake
//! time, and whatever resolves the wait puts it back in its queue. A wait that has already
//! resolved is not parked (the worker keeps the workflow and asks again).

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::ParkedOn;

use super::command::{take_fence, About, Answer, Command};
use crate::engine::{validate, Engine, WorkerSession};

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
        engine.workers.worker_write(session, &fence, 0).await?;
        match &on {
            ParkedOn::Timer | ParkedOn::Step(_) => {}
            ParkedOn::Workflow(id) => validate::name("awaited workflow_id", id)?,
            ParkedOn::Message(topic) => validate::optional_name("topic", topic)?,
            ParkedOn::Event { workflow_id, key } => {
                validate::name("event workflow_id", workflow_id)?;
                validate::name("key", key)?;
            }
        }
        let (store, now) = (engine.store(), engine.core.now());
        let parked = store.park(&fence, self.step_id, self.wake_at_ms, &on, now).await?;
        if parked {
            session.let_go(&fence);
            tracing::debug!(workflow_id = %fence.workflow_id, "parked");
        }
        Ok(reply::Result::Parked(v1::Parked { parked }))
    }
}
