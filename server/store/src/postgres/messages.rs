//! The send that ends a waiting receive, on PostgreSQL: one round trip, because it is the
//! latency between them. The statements run inside the function `waymark_send_delivering`
//! (migration 0015), which documents them; they are the ones the shared send and receive
//! (`shared/messages.rs`) send one by one.

use super::PostgresStore;
use crate::changes::Change;
use crate::rows::db_error;
use crate::*;

/// The SQLSTATE `waymark_send_delivering` raises when the message was sent before.
const DUPLICATE_MESSAGE: &str = "WMDUP";

impl PostgresStore {
    /// The send that ends a receive: one round trip, because it is the latency between them.
    /// The statements run inside `waymark_send_delivering` (migration 0015), which documents
    /// them; they are the ones [`insert_message`] and [`take_oldest`] send one by one.
    pub(super) async fn send_delivering(
        &self,
        m: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)> {
        if waiter.fence.workflow_id != m.workflow_id || waiter.deadline <= now {
            return Ok((self.send_message(m, now).await?, None));
        }
        let answer: Result<(String, Option<String>), _> = sqlx::query_as(
            "SELECT outcome, delivered FROM waymark_send_delivering($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&m.message_id)
        .bind(&m.workflow_id)
        .bind(&m.topic)
        .bind(&m.payload)
        .bind(&m.idempotency_key)
        .bind(now)
        .bind(waiter.fence.epoch as i64)
        .bind(waiter.step_id as i64)
        .bind(RECV_STEP)
        .fetch_one(&self.pool)
        .await;
        let delivered = match answer {
            Ok((_, delivered)) => delivered,
            Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("23503") => {
                return Err(StoreError::WorkflowNotFound(m.workflow_id.clone()))
            }
            // A duplicate (idempotency key), or a clash: nothing was written; the plain path
            // explains which.
            Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some(DUPLICATE_MESSAGE) => {
                return Ok((self.send_message(m, now).await?, None))
            }
            Err(e) => return Err(db_error(e)),
        };
        if delivered.is_none() {
            // Not handed over: tell the other replicas.
            self.announce_soon(Change::Message {
                workflow_id: m.workflow_id.clone(),
                topic: m.topic.clone(),
            });
        }
        Ok((
            Sent {
                message_id: m.message_id,
                duplicate: false,
            },
            delivered,
        ))
    }
}
