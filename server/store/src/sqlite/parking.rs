//! Parking on SQLite: a waiting workflow leaves its worker (status DELAYED) and comes back to its
//! queue when its wait resolves.

use sqlx::{Sqlite, Transaction};

use super::SqliteStore;
use crate::rows::db_error;
use crate::*;

/// Puts back in its queue every workflow parked on `on` (for a message: only `workflow_id`).
/// Runs inside the transaction of the write that resolves the wait.
pub(super) async fn wake_parked(
    tx: &mut Transaction<'_, Sqlite>,
    workflow_id: Option<&str>,
    on: &ParkedOn,
    now: Millis,
) -> StoreResult<u64> {
    let done = sqlx::query(
        "UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = ?1 \
         WHERE status = 'DELAYED' AND parked_on = ?2 AND (?3 IS NULL OR workflow_id = ?3)",
    )
    .bind(now)
    .bind(on.key())
    .bind(workflow_id)
    .execute(&mut **tx)
    .await
    .map_err(db_error)?;
    Ok(done.rows_affected())
}

impl SqliteStore {
    pub(super) async fn park_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        wake_at: Millis,
        on: &ParkedOn,
        now: Millis,
    ) -> StoreResult<bool> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        // A durable sleep's step is its wake time, recorded before it parks; for the other waits
        // a recorded step is the answer.
        let recorded = super::messages::fenced_step(&mut tx, fence, step_id).await?.is_some();
        if recorded && *on != ParkedOn::Timer {
            return Ok(false);
        }
        let resolved = match on {
            ParkedOn::Timer => wake_at <= now,
            ParkedOn::Message(topic) => sqlx::query_scalar::<_, i64>(
                "SELECT 1 FROM messages WHERE workflow_id = ?1 AND topic = ?2 AND consumed_at IS NULL LIMIT 1",
            )
            .bind(&fence.workflow_id)
            .bind(topic)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?
            .is_some(),
            ParkedOn::Event { workflow_id, key } => {
                sqlx::query_scalar::<_, i64>("SELECT 1 FROM events WHERE workflow_id = ?1 AND event_key = ?2")
                    .bind(workflow_id)
                    .bind(key)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .is_some()
            }
            ParkedOn::Workflow(id) => Self::workflow_on(&mut *tx, id)
                .await?
                .ok_or_else(|| StoreError::WorkflowNotFound(id.clone()))?
                .status
                .is_terminal(),
            ParkedOn::Step(step_id) => {
                sqlx::query_scalar::<_, i64>("SELECT 1 FROM steps WHERE workflow_id = ?1 AND step_id = ?2")
                    .bind(&fence.workflow_id)
                    .bind(*step_id as i64)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(db_error)?
                    .is_some()
            }
        };
        if resolved {
            return Ok(false);
        }
        sqlx::query(
            "UPDATE workflows SET status = 'DELAYED', wake_at = ?1, parked_on = ?2, session_id = NULL, updated_at = ?3 \
             WHERE workflow_id = ?4",
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

    pub(super) async fn wake_due_impl(&self, now: Millis) -> StoreResult<u64> {
        let done = sqlx::query(
            "UPDATE workflows SET status = 'ENQUEUED', wake_at = NULL, parked_on = NULL, updated_at = ?1 \
             WHERE status = 'DELAYED' AND wake_at IS NOT NULL AND wake_at <= ?1",
        )
        .bind(now)
        .execute(&self.write)
        .await
        .map_err(db_error)?;
        Ok(done.rows_affected())
    }
}
