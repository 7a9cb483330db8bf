//! `Park`: release a waiting workflow from its worker until what it waits for happens.

use waymark_proto::v1::{self, reply};
use waymark_store::ParkedOn;

use super::command::{Answer, Fenced};
use crate::engine::{Engine, WorkerSession};

pub async fn apply(engine: &Engine, session: &WorkerSession, mut p: v1::Park) -> Answer {
    let fence = p.fence();
    let on = match p.on {
        Some(v1::park::On::Topic(topic)) => ParkedOn::Message(topic),
        Some(v1::park::On::Event(e)) => ParkedOn::Event {
            workflow_id: e.workflow_id,
            key: e.key,
        },
        Some(v1::park::On::Step(step_id)) => ParkedOn::Step(step_id),
        Some(v1::park::On::AwaitedWorkflowId(id)) => ParkedOn::Workflow(id),
        Some(v1::park::On::Timer(_)) | None => ParkedOn::Timer,
    };
    let parked = engine.park(session, fence, p.step_id, p.wake_at_ms, on).await?;
    Ok(reply::Result::Parked(v1::Parked { parked }))
}
