//! `SendMessage` (a `SendMessageStep` on the wire): a workflow sends a message to another
//! workflow's inbox, recorded as its step in the same transaction as the message, so a replay
//! sends nothing more and returns the recorded message id. A receive waiting on it here is
//! woken at once; a receiver parked on it goes back to its queue.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Fence, NewMessage};

use super::command::{payload_text, take_fence, About, Answer, Command};
use crate::engine::{messages::validate_message, Engine, EngineResult, WorkerSession};

impl Command for v1::SendMessageStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let message = payload_text("message", self.message.as_ref())?;
        let message_id = run(
            engine,
            session,
            fence,
            self.step_id,
            self.destination_id,
            self.topic,
            message,
        )
        .await?;
        Ok(reply::Result::MessageSent(v1::MessageSent { message_id }))
    }
}

/// Sends `message` to `destination_id` on `topic` for the fenced workflow, as its step.
async fn run(
    engine: &Engine,
    session: &WorkerSession,
    fence: Fence,
    step_id: u32,
    destination_id: String,
    topic: String,
    message: String,
) -> EngineResult<String> {
    engine.workers.worker_write(session, &fence, 0).await?;
    validate_message(
        engine.config().max_payload_bytes,
        "destination_id",
        &destination_id,
        &topic,
        &message,
    )?;
    engine.workers.check_reach(session, &destination_id).await?;
    let new = NewMessage {
        message_id: uuid::Uuid::now_v7().to_string(),
        workflow_id: destination_id.clone(),
        topic: topic.clone(),
        payload: message,
        idempotency_key: None,
        max_unread: engine.config().max_unread_messages,
    };
    // The store sends and records in one transaction (one round trip on either backend).
    let id = engine
        .store()
        .send_message_step(&fence, step_id, new, engine.core.now())
        .await?;
    engine.messaging.wake_receiver(&destination_id, &topic).await;
    engine.core.work_enqueued();
    Ok(id)
}
