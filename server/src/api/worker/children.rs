//! `StartChild` and `AwaitChild`: child workflows, started and awaited as steps.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, Answer, Fenced};
use crate::{
    api::convert,
    engine::{children::ChildRequest, Engine, WorkerSession},
};

pub async fn start(engine: &Engine, session: &WorkerSession, mut c: v1::StartChild) -> Answer {
    let fence = c.fence();
    let req = ChildRequest {
        input: payload_text("child input", c.input.as_ref())?,
        workflow_name: c.workflow_name,
        child_workflow_id: c.child_workflow_id,
        queue_name: c.queue_name,
        trace: convert::trace_from_wire(c.trace_context.as_ref()),
        tags: std::mem::take(&mut c.tags).into_iter().collect(),
    };
    let child_workflow_id = engine.start_child(session, fence, c.step_id, req).await?;
    Ok(reply::Result::ChildStarted(v1::ChildStarted { child_workflow_id }))
}

pub async fn wait(engine: &Engine, session: &Arc<WorkerSession>, mut a: v1::AwaitChild) -> Answer {
    use v1::recv_result::Outcome as O;
    let fence = a.fence();
    let result = match engine
        .await_child(session, fence, a.step_id, a.child_workflow_id)
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
