//! Messaging: sends, fenced sends recorded as steps, and consuming receives. Each is one
//! transaction that first holds the receiving workflow's row (the fence: a concurrent
//! re-dispatch waits for it, or it sees the new epoch and is refused); a receive takes the
//! oldest message `FOR UPDATE SKIP LOCKED` on PostgreSQL, so concurrent receivers — a zombie
//! and its successor, or two replicas — never take the same message (SQLite's one writer runs
//! them one at a time). The send that ends a receive waiting on this replica is the send and
//! the receive in one transaction.

use super::fencing::workflow_on;
use super::fencing::{fenced_step, insert_step};
use crate::changes::Change;
use crate::dialect::{sql, Backend, Conn, Dialect};
use crate::messaging::MessageRow;
use crate::recorded;
use crate::rows::db_error;
use crate::*;

pub(crate) async fn insert_message<B: Backend>(conn: &mut Conn<B>, m: &NewMessage, now: Millis) -> StoreResult<Sent> {
    // KEY SHARE keeps the receiver from being deleted under the insert without blocking its
    // ordinary updates.
    let status: Option<String> = B::query_scalar(sql!(B:
        "SELECT status FROM workflows WHERE workflow_id = $1",
        B::FOR_KEY_SHARE
    ))
    .bind(&m.workflow_id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)?;
    match status.as_deref().map(WorkflowStatus::parse) {
        None => return Err(StoreError::WorkflowNotFound(m.workflow_id.clone())),
        // A workflow that ended with an outcome reads no more messages: keeping them would only
        // grow its inbox. (A cancelled or dead-lettered one may be resumed, and read them then.)
        Some(Some(s)) if s.has_outcome() => {
            // (A resend of a message it did get is still answered as the duplicate it is.)
            if let Some(sent) = already_sent::<B>(conn, m).await? {
                return Ok(sent);
            }
            return Err(StoreError::NotRunning {
                workflow_id: m.workflow_id.clone(),
                status: s,
            });
        }
        Some(_) => {}
    }
    // The inbox limit is checked in the insert itself: a send costs no extra round trip.
    let inserted = B::query(
        "INSERT INTO messages (message_id, workflow_id, topic, payload, idempotency_key, sent_at) \
         SELECT $1, $2, $3, $4, $5, $6 \
          WHERE $7 = 0 OR (SELECT COUNT(*) FROM (SELECT 1 FROM messages \
                             WHERE workflow_id = $2 AND consumed_at IS NULL LIMIT $7) t) < $7 \
         ON CONFLICT DO NOTHING",
    )
    .bind(&m.message_id)
    .bind(&m.workflow_id)
    .bind(&m.topic)
    .bind(&m.payload)
    .bind(&m.idempotency_key)
    .bind(now)
    .bind(m.max_unread as i64)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?
    .rows_affected()
        == 1;
    if inserted {
        // A workflow parked waiting for this goes back to its queue.
        super::parking::wake_parked::<B>(conn, Some(&m.workflow_id), &ParkedOn::Message(m.topic.clone()), now).await?;
        return Ok(Sent {
            message_id: m.message_id.clone(),
            duplicate: false,
        });
    }
    // Nothing inserted: a resend of a message it got, a full inbox, or a taken message id.
    if let Some(sent) = already_sent::<B>(conn, m).await? {
        return Ok(sent);
    }
    if m.max_unread > 0 && unread::<B>(conn, &m.workflow_id, m.max_unread).await? >= m.max_unread as i64 {
        return Err(StoreError::InboxFull {
            workflow_id: m.workflow_id.clone(),
            limit: m.max_unread,
        });
    }
    Err(StoreError::Unavailable(format!(
        "message id {:?} is already taken",
        m.message_id
    )))
}

/// The send that ends a waiting receive when nothing stands in its way: the message, inserted
/// already consumed by the receive's step, and the step. Written in two statements (the second
/// reads what the first returned), which PostgreSQL runs as one, in one round trip: this is the
/// latency between a send and the wakeup it causes.
/// - The message goes in only if its workflow runs at the waiter's epoch with the step
///   unrecorded, the topic has no unread message older than it, and the inbox has room. It
///   holds the workflow's row exclusively until commit. That is what keeps a racing park out
///   without the wait key's lock: the park's fence waits for this commit, then finds the step
///   recorded. (The row is running, so it is not parked: nothing to wake.)
/// - The step has no `ON CONFLICT`: if a concurrent request recorded it first, the insert fails
///   and takes the message with it.
///
/// `None` when anything else is the case (another epoch, the step recorded, an older message, a
/// full inbox, a resend, a taken id): nothing was written, and the general path decides.
async fn deliver_at_once<B: Backend>(
    store: &B,
    m: &NewMessage,
    waiter: &RecvWaiter,
    now: Millis,
) -> StoreResult<Option<(Sent, Option<String>)>> {
    macro_rules! message {
        () => {
            "INSERT INTO messages (message_id, workflow_id, topic, payload, idempotency_key, sent_at, \
                                   consumed_at, consumed_by_step) \
             SELECT $1, workflow_id, $3, $4, $5, $6, $6, $7 FROM workflows \
              WHERE workflow_id = $2 AND epoch = $8 \
                AND NOT EXISTS (SELECT 1 FROM steps WHERE workflow_id = $2 AND step_id = $7) \
                AND NOT EXISTS (SELECT 1 FROM messages WHERE workflow_id = $2 AND topic = $3 AND consumed_at IS NULL) \
                AND ($9 = 0 OR (SELECT COUNT(*) FROM (SELECT 1 FROM messages \
                                  WHERE workflow_id = $2 AND consumed_at IS NULL LIMIT $9) t) < $9)"
        };
    }
    macro_rules! step {
        () => {
            "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
             SELECT workflow_id, $7, $10, $11, NULL, 1, $8, $6 FROM "
        };
    }
    let fence = &waiter.fence;
    let output = recorded::recv_output(Some(&m.payload));
    let run = |text| {
        B::query(text)
            .bind(&m.message_id)
            .bind(&m.workflow_id)
            .bind(&m.topic)
            .bind(&m.payload)
            .bind(&m.idempotency_key)
            .bind(now)
            .bind(waiter.step_id as i64)
            .bind(fence.epoch as i64)
            .bind(m.max_unread as i64)
    };
    let done = if B::WRITES_IN_WITH {
        let one = sql!(B:
            "WITH delivered AS (",
            message!(),
            " AND ",
            B::status_is("", "PENDING"),
            B::FOR_NO_KEY_UPDATE,
            " ON CONFLICT DO NOTHING RETURNING workflow_id) ",
            step!(),
            "delivered"
        );
        run(one).bind(RECV_STEP).bind(&output).execute(store.writer()).await
    } else {
        let mut tx = store.writer().begin().await.map_err(db_error)?;
        let inserted = run(
            sql!(B: message!(), " AND ", B::status_is("", "PENDING"), B::FOR_NO_KEY_UPDATE, " ON CONFLICT DO NOTHING"),
        )
        .execute(&mut *tx)
        .await
        .map_err(db_error)?
        .rows_affected();
        if inserted == 0 {
            return Ok(super::let_go(tx, None).await);
        }
        let done = run(concat!(step!(), "(SELECT CAST($2 AS TEXT) AS workflow_id) d"))
            .bind(RECV_STEP)
            .bind(&output)
            .execute(&mut *tx)
            .await;
        match done {
            Ok(done) => {
                tx.commit().await.map_err(db_error)?;
                Ok(done)
            }
            Err(e) => super::let_go(tx, Err(e)).await,
        }
    };
    match done {
        Ok(done) if done.rows_affected() == 1 => {}
        Ok(_) => return Ok(None),
        // The step was recorded first: the message went with the failed insert.
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Ok(None),
        Err(e) => return Err(db_error(e)),
    }
    let sent = Sent {
        message_id: m.message_id.clone(),
        duplicate: false,
    };
    Ok(Some((sent, Some(m.payload.clone()))))
}

/// Unread messages of `workflow_id`, counted up to `most`.
async fn unread<B: Dialect>(conn: &mut Conn<B>, workflow_id: &str, most: u32) -> StoreResult<i64> {
    B::query_scalar(
        "SELECT COUNT(*) FROM (SELECT 1 FROM messages WHERE workflow_id = $1 AND consumed_at IS NULL LIMIT $2) t",
    )
    .bind(workflow_id)
    .bind(most as i64)
    .fetch_one(&mut *conn)
    .await
    .map_err(db_error)
}

/// The message sent before under `m`'s idempotency key, if any.
async fn already_sent<B: Dialect>(conn: &mut Conn<B>, m: &NewMessage) -> StoreResult<Option<Sent>> {
    let existing: Option<String> =
        B::query_scalar("SELECT message_id FROM messages WHERE workflow_id = $1 AND idempotency_key = $2")
            .bind(&m.workflow_id)
            .bind(&m.idempotency_key)
            .fetch_optional(&mut *conn)
            .await
            .map_err(db_error)?;
    Ok(existing.map(|message_id| Sent {
        message_id,
        duplicate: true,
    }))
}

#[async_trait::async_trait]
impl<B: Backend> Messages for B {
    #[tracing::instrument(name = "store.send_message", level = "debug", target = "waymark::store", skip_all)]
    async fn send_message(&self, m: NewMessage, now: Millis) -> StoreResult<Sent> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let sent = held!(tx, insert_message::<B>(&mut tx, &m, now).await);
        tx.commit().await.map_err(db_error)?;
        if !sent.duplicate {
            self.announce_soon(Change::Message {
                workflow_id: m.workflow_id.clone(),
                topic: m.topic.clone(),
            });
        }
        Ok(sent)
    }

    #[tracing::instrument(name = "store.start_and_send", level = "debug", target = "waymark::store", skip_all)]
    async fn start_and_send(
        &self,
        start: NewWorkflow,
        message: NewMessage,
        now: Millis,
    ) -> StoreResult<(Started, Sent)> {
        // A conflict on the dedup id with a workflow that finishes before it is read leaves
        // nothing to report: start again.
        for _ in 0..3 {
            let mut tx = self.writer().begin().await.map_err(db_error)?;
            let Some(started) = held!(tx, super::starts::try_start::<B>(&mut tx, &start, now).await) else {
                super::let_go(tx, ()).await;
                continue;
            };
            let m = NewMessage {
                workflow_id: started.workflow.workflow_id.clone(),
                ..message
            };
            let sent = held!(tx, insert_message::<B>(&mut tx, &m, now).await);
            tx.commit().await.map_err(db_error)?;
            if started.created && started.workflow.status == WorkflowStatus::Enqueued {
                self.announce_soon(Change::enqueued_on(&started.workflow.queue_name));
            }
            if !sent.duplicate {
                self.announce_soon(Change::Message {
                    workflow_id: m.workflow_id,
                    topic: m.topic,
                });
            }
            return Ok((started, sent));
        }
        Err(StoreError::Unavailable(
            "the start kept conflicting with workflows that finished meanwhile".into(),
        ))
    }

    #[tracing::instrument(
        name = "store.send_message_delivering",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn send_message_delivering(
        &self,
        m: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)> {
        if waiter.fence.workflow_id != m.workflow_id || waiter.deadline <= now {
            return Ok((self.send_message(m, now).await?, None));
        }
        // The common case first, in as few round trips as it takes: this is the latency between
        // a send and the wakeup it causes.
        if let Some(delivered) = deliver_at_once::<B>(self, &m, waiter, now).await? {
            return Ok(delivered);
        }
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let sent = held!(tx, insert_message::<B>(&mut tx, &m, now).await);
        // Does the receive still wait: its workflow PENDING at its epoch (held until commit, so
        // no re-dispatch slips in), its step unrecorded? The send took the wait key's lock, so
        // a park racing this waits for it and then finds the step recorded.
        let waiting = !sent.duplicate
            && match fenced_step::<B>(&mut tx, &waiter.fence, waiter.step_id).await {
                Ok(recorded) => recorded.is_none(),
                Err(StoreError::Unavailable(e)) => return super::let_go(tx, Err(StoreError::Unavailable(e))).await,
                // Another dispatch's, or finished: the message waits for a later receive.
                Err(_) => false,
            };
        let mut delivered = None;
        if waiting {
            match take_oldest::<B>(&mut tx, &waiter.fence, waiter.step_id, &m.topic, waiter.deadline, now).await {
                Ok(Some(Received::Delivered(payload))) => delivered = Some(payload),
                // Every unconsumed message of the topic is being taken by other receives.
                Ok(Some(_)) => {}
                // The worker's own receive recorded the step first (its timeout): what this
                // transaction consumed is given back by sending again, as a plain send.
                Ok(None) => {
                    tx.rollback().await.map_err(db_error)?;
                    return Ok((self.send_message(m, now).await?, None));
                }
                Err(e) => return super::let_go(tx, Err(e)).await,
            }
        }
        tx.commit().await.map_err(db_error)?;
        if delivered.is_none() && !sent.duplicate {
            self.announce_soon(Change::Message {
                workflow_id: m.workflow_id.clone(),
                topic: m.topic.clone(),
            });
        }
        Ok((sent, delivered))
    }

    #[tracing::instrument(name = "store.list_messages", level = "debug", target = "waymark::store", skip_all)]
    async fn list_messages(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>> {
        if workflow_on::<B>(self.reader(), workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let rows: Vec<MessageRow> = B::query_as(
            "SELECT message_id, workflow_id, topic, payload, idempotency_key, sent_at, consumed_at, consumed_by_step \
             FROM messages WHERE workflow_id = $1 ORDER BY seq",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(MessageRecord::from).collect())
    }

    #[tracing::instrument(
        name = "store.pending_messages",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn pending_messages(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>> {
        if waits.is_empty() {
            return Ok(Vec::new());
        }
        let (ids, topics): (Vec<&str>, Vec<&str>) = waits.iter().map(|(w, t)| (w.as_str(), t.as_str())).unzip();
        B::query_as(sql!(B:
            "SELECT DISTINCT m.workflow_id, m.topic FROM messages m JOIN ",
            B::pairs("$1", "$2"),
            " ON m.workflow_id = k.first AND m.topic = k.second WHERE m.consumed_at IS NULL"
        ))
        .bind_list(&ids)
        .bind_list(&topics)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}

/// Marks the oldest unconsumed message of (workflow, topic) consumed by step `step_id`, in one
/// statement; concurrent receivers skip the row it locks. Returns its sequence and payload.
pub(crate) async fn consume_oldest<B: Dialect>(
    tx: &mut Conn<B>,
    workflow_id: &str,
    topic: &str,
    step_id: u32,
    now: Millis,
) -> StoreResult<Option<(i64, String)>> {
    B::query_as(sql!(B:
        "UPDATE messages SET consumed_at = $1, consumed_by_step = $2 WHERE seq = (SELECT seq FROM messages \
         WHERE workflow_id = $3 AND topic = $4 AND consumed_at IS NULL ORDER BY seq LIMIT 1",
        B::SKIP_LOCKED,
        ") RETURNING seq, payload"
    ))
    .bind(now)
    .bind(step_id as i64)
    .bind(workflow_id)
    .bind(topic)
    .fetch_optional(&mut *tx)
    .await
    .map_err(db_error)
}

/// Takes the oldest unconsumed message of `topic` for the fenced workflow (fence checked and held,
/// step not recorded) and records it — or, past `deadline`, the timeout — as step `step_id`.
/// `None` when a concurrent request recorded the step first: roll back.
pub(crate) async fn take_oldest<B: Dialect>(
    tx: &mut Conn<B>,
    fence: &Fence,
    step_id: u32,
    topic: &str,
    deadline: Millis,
    now: Millis,
) -> StoreResult<Option<Received>> {
    let (received, output) = match consume_oldest::<B>(tx, &fence.workflow_id, topic, step_id, now).await? {
        Some((_, payload)) => {
            let output = recorded::recv_output(Some(&payload));
            (Received::Delivered(payload), output)
        }
        None if now >= deadline => (Received::TimedOut, recorded::recv_output(None)),
        None => return Ok(Some(Received::Waiting)),
    };
    if !insert_step::<B>(tx, fence, step_id, RECV_STEP, &output, now).await? {
        return Ok(None);
    }
    Ok(Some(received))
}
