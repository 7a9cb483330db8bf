//! `SendMessageStep` and `Recv`: a workflow's sends and receives, each recorded as its step.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, wait_outcome, Answer, Fenced};
use crate::engine::{Engine, WorkerSession};

pub async fn send(engine: &Engine, session: &WorkerSession, mut m: v1::SendMessageStep) -> Answer {
    let fence = m.fence();
    let message = payload_text("message", m.message.as_ref())?;
    let message_id = engine
        .send_message_step(session, fence, m.step_id, m.destination_id, m.topic, message)
        .await?;
    Ok(reply::Result::MessageSent(v1::MessageSent { message_id }))
}

pub async fn recv(engine: &Engine, session: &Arc<WorkerSession>, mut r: v1::Recv) -> Answer {
    let fence = r.fence();
    let received = engine.recv(session, fence, r.step_id, r.topic, r.deadline_ms).await?;
    let (outcome, message) = wait_outcome(received);
    Ok(reply::Result::RecvResult(v1::RecvResult {
        outcome: outcome as i32,
        message,
        server_now_ms: engine.now_ms(),
    }))
}
