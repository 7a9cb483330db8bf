//! `SendMessage` (a `SendMessageStep` on the wire): a workflow sends a message to another
//! workflow's inbox, recorded as its step in the same transaction as the message, so a replay
//! sends nothing more and returns the recorded message id. A receive waiting on it here is
//! woken at once; a receiver parked on it goes back to its queue.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::changes::Change;
use waymark_store::recorded as journal;
use waymark_store::{Fence, FenceLock, Millis, NewMessage, Store, StoreResult, SEND_STEP};

use super::command::{payload_text, take_fence, About, Answer, Command};
use super::compose::{answer_from_record, settle, End, Tx};
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
    let id = send_step(engine.store(), &fence, step_id, &new, engine.core.now()).await?;
    engine.messaging.wake_receiver(&destination_id, &topic).await;
    engine.core.work_enqueued();
    Ok(id)
}

/// Sends `message` for the fenced workflow, recorded as its step `step_id` in the same
/// transaction; returns the message's id. A replay sends nothing and returns the recorded id.
pub(crate) async fn send_step(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    message: &NewMessage,
    now: Millis,
) -> StoreResult<String> {
    let mut tx = store.begin(now).await?;
    let body = send_in(&mut tx, fence, step_id, message).await;
    match settle(tx, body).await? {
        Some(id) => Ok(id),
        None => answer_from_record(store, fence, step_id, now, journal::replay_send).await,
    }
}

/// `None`: a concurrent request for the same step recorded it first.
async fn send_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    message: &NewMessage,
) -> StoreResult<End<Option<String>>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_send(&fence.workflow_id, &done).map(|id| End::Release(Some(id)));
    }
    let sent = tx.send(message).await?;
    let output = journal::send_output(&sent.message_id);
    if !tx.record_step(fence, step_id, SEND_STEP, &output).await? {
        return Ok(End::Release(None));
    }
    let change = Change::Message {
        workflow_id: message.workflow_id.clone(),
        topic: message.topic.clone(),
    };
    Ok(End::Commit(Some(sent.message_id), vec![change]))
}

#[cfg(test)]
mod tests {
    //! Sent and recorded as the step in one transaction, answered from the record on replay,
    //! refused with nothing recorded when the receiver is missing, and fenced.

    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{fence, T};

    use super::send_step;
    use crate::ops::testing::{message, on_both_stores, running};

    on_both_stores!(send_step_is_recorded_once, send_step_is_fenced);

    async fn send_step_is_recorded_once(s: Arc<dyn Store>) {
        let s = &*s;
        running(s, "sender").await;
        running(s, "receiver").await;
        let f = fence("sender", 1);
        let id = send_step(s, &f, 0, &message("m1", "receiver", "t", "1"), T)
            .await
            .unwrap();
        assert_eq!(id, "m1");
        // A replay (a new message id, as a new run would make) sends nothing more.
        let again = send_step(s, &f, 0, &message("m9", "receiver", "t", "1"), T + 1)
            .await
            .unwrap();
        assert_eq!(again, "m1");
        assert_eq!(s.list_messages("receiver").await.unwrap().len(), 1);
        let missing = send_step(s, &f, 1, &message("m2", "nobody", "t", "1"), T + 2)
            .await
            .unwrap_err();
        assert!(matches!(missing, StoreError::WorkflowNotFound(_)), "{missing:?}");
        assert_eq!(
            s.list_steps("sender").await.unwrap().len(),
            1,
            "a failed send records no step"
        );
    }

    async fn send_step_is_fenced(s: Arc<dyn Store>) {
        let s = &*s;
        running(s, "r").await;
        let e = send_step(s, &fence("r", 7), 0, &message("m2", "r", "t", "2"), T + 1)
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::StaleEpoch { .. }), "{e:?}");
        assert!(s.list_messages("r").await.unwrap().is_empty(), "nothing was sent");
    }
}
