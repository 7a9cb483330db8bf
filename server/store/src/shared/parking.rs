//! Parking: a waiting workflow leaves its worker (status DELAYED) and comes back to its queue
//! when its wait resolves, on whichever replica resolves it.

use super::fencing::{fenced_step, recorded_step};
use crate::dialect::{sql, Backend, Conn};
use crate::rows::db_error;
use crate::*;

/// Puts back in its queue every workflow parked on `on` (for a message: only `workflow_id`).
/// Runs inside the transaction of the write that resolves the wait.
pub(crate) async fn wake_parked<B: Backend>(
    conn: &mut Conn<B>,
    workflow_id: Option<&str>,
    on: &ParkedOn,
    now: Millis,
) -> StoreResult<u64> {
    B::lock_wait_key(conn, workflow_id, on).await?;
    let done = B::query(
        "UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = $1 \
         WHERE status = 'DELAYED' AND parked_on = $2 AND (CAST($3 AS TEXT) IS NULL OR workflow_id = $3)",
    )
    .bind(now)
    .bind(on.key())
    .bind(workflow_id)
    .execute(&mut *conn)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}

pub(crate) async fn park_fenced<B: Backend>(
    store: &B,
    fence: &Fence,
    step_id: u32,
    wake_at: Millis,
    on: &ParkedOn,
    now: Millis,
) -> StoreResult<bool> {
    let mut tx = store.writer().begin().await.map_err(db_error)?;
    // The fence: the workflow row is held until commit (the step slot itself is unused).
    held!(tx, fenced_step::<B>(&mut tx, fence, u32::MAX).await);
    // Whoever resolves the wait locks the same key: events are set by another workflow,
    // which does not know who waits; messages and step results name the waiter.
    let waiter = match on {
        ParkedOn::Event { .. } => None,
        _ => Some(fence.workflow_id.as_str()),
    };
    B::lock_wait_key(&mut tx, waiter, on).await?;
    // Read after the key lock: a send that completed this wait itself held the lock until
    // it committed the step.
    let recorded = recorded_step::<B>(&mut tx, &fence.workflow_id, step_id).await?;
    // A durable sleep's step is its wake time, recorded before it parks; for the other waits
    // a recorded step is the answer.
    if recorded.is_some() && *on != ParkedOn::Timer {
        return super::let_go(tx, Ok(false)).await;
    }
    let resolved = match on {
        ParkedOn::Timer => wake_at <= now,
        ParkedOn::Message(topic) => B::query_scalar::<String>(
            "SELECT message_id FROM messages WHERE workflow_id = $1 AND topic = $2 AND consumed_at IS NULL LIMIT 1",
        )
        .bind(&fence.workflow_id)
        .bind(topic)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?
        .is_some(),
        ParkedOn::Event { workflow_id, key } => {
            B::query_scalar::<String>("SELECT event_key FROM events WHERE workflow_id = $1 AND event_key = $2")
                .bind(workflow_id)
                .bind(key)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db_error)?
                .is_some()
        }
        // The row lock holds off a completion until this park commits; the completion's
        // trigger then finds the workflow parked (or, if it came first, it is seen here).
        ParkedOn::Workflow(id) => {
            let status: String = B::query_scalar(sql!(B:
                "SELECT status FROM workflows WHERE workflow_id = $1",
                B::FOR_SHARE
            ))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?
            .ok_or_else(|| StoreError::WorkflowNotFound(id.clone()))?;
            WorkflowStatus::parse(&status).is_some_and(WorkflowStatus::is_terminal)
        }
        ParkedOn::Step(step_id) => recorded_step::<B>(&mut tx, &fence.workflow_id, *step_id)
            .await?
            .is_some(),
    };
    if resolved {
        return super::let_go(tx, Ok(false)).await;
    }
    // A write resolving the wait either committed before the key lock (and was seen above)
    // or waits for this commit and then finds the workflow parked.
    B::query(
        "UPDATE workflows SET status = 'DELAYED', wake_at = $1, parked_on = $2, session_id = NULL, updated_at = $3 \
         WHERE workflow_id = $4",
    )
    .bind(wake_at)
    .bind(on.key())
    .bind(now)
    .bind(&fence.workflow_id)
    .execute(&mut *tx)
    .await
    .map_err(db_error)?;
    tx.commit().await.map_err(db_error)?;
    Ok(true)
}

pub(crate) async fn wake_parked_due<B: Backend>(store: &B, now: Millis) -> StoreResult<u64> {
    let done = B::query(sql!(B:
            "UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = $1 \
             WHERE workflow_id",
            B::in_locked(&[
    "SELECT workflow_id FROM workflows WHERE status = 'DELAYED' AND wake_at IS NOT NULL AND wake_at <= $1",
    ]),
            " AND ",
            B::status_is("", "DELAYED")
        ))
    .bind(now)
    .execute(store.writer())
    .await
    .map_err(db_error)?;
    if done.rows_affected() > 0 {
        store.announce_soon(crate::changes::Change::enqueued());
    }
    Ok(done.rows_affected())
}
