//! Messaging on SQLite: sends, fenced sends recorded as steps, and consuming receives. Each runs
//! as one transaction on the single writer connection, so "take the oldest message, mark it
//! consumed, record the step" cannot interleave with another receiver.

use sqlx::{Sqlite, Transaction};

use super::fencing::{fenced_step, insert_step};
use super::SqliteStore;
use crate::messaging;
use crate::rows::db_error;
use crate::*;

/// Inserts the message unless its idempotency key was used; returns the stored message id and
/// whether it was a duplicate. `WorkflowNotFound` when the receiver does not exist.
async fn insert_message(tx: &mut Transaction<'_, Sqlite>, m: &NewMessage, now: Millis) -> StoreResult<Sent> {
    match SqliteStore::workflow_on(&mut **tx, &m.workflow_id).await? {
        None => return Err(StoreError::WorkflowNotFound(m.workflow_id.clone())),
        // A workflow that ended with an outcome reads no more messages: keeping them would only
        // grow its inbox. (A cancelled or dead-lettered one may be resumed, and read them then.)
        Some(w) if w.status.has_outcome() => {
            // (A resend of a message it did get is still answered as the duplicate it is.)
            if let Some(sent) = already_sent(tx, m).await? {
                return Ok(sent);
            }
            return Err(StoreError::NotRunning {
                workflow_id: m.workflow_id.clone(),
                status: w.status,
            });
        }
        Some(_) => {}
    }
    if m.max_unread > 0 {
        let unread: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE workflow_id = ?1 AND consumed_at IS NULL LIMIT ?2)",
        )
        .bind(&m.workflow_id)
        .bind(m.max_unread as i64)
        .fetch_one(&mut **tx)
        .await
        .map_err(db_error)?;
        if unread >= m.max_unread as i64 {
            return match already_sent(tx, m).await? {
                Some(sent) => Ok(sent),
                None => Err(StoreError::InboxFull {
                    workflow_id: m.workflow_id.clone(),
                    limit: m.max_unread,
                }),
            };
        }
    }
    let inserted = sqlx::query(
        "INSERT INTO messages (message_id, workflow_id, topic, payload, idempotency_key, sent_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT DO NOTHING",
    )
    .bind(&m.message_id)
    .bind(&m.workflow_id)
    .bind(&m.topic)
    .bind(&m.payload)
    .bind(&m.idempotency_key)
    .bind(now)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?
    .rows_affected()
        == 1;
    if inserted {
        // A workflow parked waiting for this goes back to its queue.
        super::parking::wake_parked(tx, Some(&m.workflow_id), &ParkedOn::Message(m.topic.clone()), now).await?;
        return Ok(Sent {
            message_id: m.message_id.clone(),
            duplicate: false,
        });
    }
    already_sent(tx, m)
        .await?
        .ok_or_else(|| StoreError::Unavailable(format!("message id {:?} is already taken", m.message_id)))
}

/// The message sent before under `m`'s idempotency key, if any.
async fn already_sent(tx: &mut Transaction<'_, Sqlite>, m: &NewMessage) -> StoreResult<Option<Sent>> {
    let existing: Option<String> =
        sqlx::query_scalar("SELECT message_id FROM messages WHERE workflow_id = ?1 AND idempotency_key = ?2")
            .bind(&m.workflow_id)
            .bind(&m.idempotency_key)
            .fetch_optional(&mut **tx)
            .await
            .map_err(db_error)?;
    Ok(existing.map(|message_id| Sent {
        message_id,
        duplicate: true,
    }))
}

/// Takes the oldest unconsumed message of `topic` for the fenced workflow (fence checked, step
/// not recorded) and records it — or, past `deadline`, the timeout — as step `step_id`.
async fn take_oldest(
    tx: &mut Transaction<'_, Sqlite>,
    fence: &Fence,
    step_id: u32,
    topic: &str,
    deadline: Millis,
    now: Millis,
) -> StoreResult<Received> {
    let oldest: Option<(i64, String)> = sqlx::query_as(
        "SELECT seq, payload FROM messages WHERE workflow_id = ?1 AND topic = ?2 AND consumed_at IS NULL ORDER BY seq LIMIT 1",
    )
    .bind(&fence.workflow_id)
    .bind(topic)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)?;
    let received = match oldest {
        Some((seq, payload)) => {
            sqlx::query("UPDATE messages SET consumed_at = ?1, consumed_by_step = ?2 WHERE seq = ?3")
                .bind(now)
                .bind(step_id as i64)
                .bind(seq)
                .execute(&mut **tx)
                .await
                .map_err(db_error)?;
            insert_step(
                tx,
                fence,
                step_id,
                RECV_STEP,
                &messaging::recv_output(Some(&payload)),
                now,
            )
            .await?;
            Received::Delivered(payload)
        }
        None if now >= deadline => {
            insert_step(tx, fence, step_id, RECV_STEP, &messaging::recv_output(None), now).await?;
            Received::TimedOut
        }
        None => Received::Waiting,
    };
    Ok(received)
}

#[async_trait::async_trait]
impl Messages for SqliteStore {
    async fn send_message(&self, m: NewMessage, now: Millis) -> StoreResult<Sent> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let sent = insert_message(&mut tx, &m, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(sent)
    }

    async fn send_message_step(&self, fence: &Fence, step_id: u32, m: NewMessage, now: Millis) -> StoreResult<String> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_send(&fence.workflow_id, &done);
        }
        let sent = insert_message(&mut tx, &m, now).await?;
        insert_step(
            &mut tx,
            fence,
            step_id,
            SEND_STEP,
            &messaging::send_output(&sent.message_id),
            now,
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        Ok(sent.message_id)
    }

    async fn recv(
        &self,
        fence: &Fence,
        step_id: u32,
        topic: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_recv(&fence.workflow_id, &done);
        }
        let received = take_oldest(&mut tx, fence, step_id, topic, deadline, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(received)
    }

    async fn send_message_delivering(
        &self,
        m: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let sent = insert_message(&mut tx, &m, now).await?;
        let mut delivered = None;
        // The single writer connection: nothing can record the waiter's step in between.
        if !sent.duplicate
            && waiter.deadline > now
            && matches!(fenced_step(&mut tx, &waiter.fence, waiter.step_id).await, Ok(None))
        {
            if let Received::Delivered(p) =
                take_oldest(&mut tx, &waiter.fence, waiter.step_id, &m.topic, waiter.deadline, now).await?
            {
                delivered = Some(p);
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok((sent, delivered))
    }

    async fn list_messages(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>> {
        self.inbox(workflow_id).await
    }

    async fn pending_messages(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        self.unread_among(waits).await
    }
}
