//! `StartChild` and `AwaitChild`: child workflows, started and awaited as steps.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, take_fence, About, Answer, Command};
use crate::{
    api::convert,
    engine::{children::ChildRequest, Engine, WorkerSession},
};

impl Command for v1::StartChild {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let req = ChildRequest {
            input: payload_text("child input", self.input.as_ref())?,
            workflow_name: self.workflow_name,
            child_workflow_id: self.child_workflow_id,
            queue_name: self.queue_name,
            trace: convert::trace_from_wire(self.trace_context.as_ref()),
            tags: self.tags.into_iter().collect(),
        };
        let child_workflow_id = engine.start_child(session, fence, self.step_id, req).await?;
        Ok(reply::Result::ChildStarted(v1::ChildStarted { child_workflow_id }))
    }
}

impl Command for v1::AwaitChild {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        use v1::recv_result::Outcome as O;
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let result = match engine
            .await_child(session, fence, self.step_id, self.child_workflow_id)
            .await?
        {
            None => v1::ChildResult {
                outcome: O::Waiting as i32,
                ..Default::default()
            },
            Some(done) => v1::ChildResult {
                outcome: O::Delivered as i32,
                status: convert::status_to_wire(done.status) as i32,
                output: done.output.as_deref().and_then(convert::payload),
                failure: done.failure.as_ref().map(convert::failure_to_wire),
            },
        };
        Ok(reply::Result::ChildResult(result))
    }
}
