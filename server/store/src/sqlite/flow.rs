//! Flow control on SQLite: starts (dedup ids, delays, debounce, direct dispatch) and the claim
//! of a queue with limits. Every write runs on the single writer connection, so a transaction
//! here sees and counts everything before it; no row locks are needed.

use super::{dialect, SqliteStore};
use crate::dialect::Starts;
use crate::rows::db_error;
use crate::shared::starts::{debounce_onto, try_start};
use crate::*;

impl Starts for SqliteStore {
    async fn start(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started> {
        self.starts.submit((new, now)).await?
    }

    async fn start_alone(write: &sqlx::SqlitePool, new: &NewWorkflow, now: Millis) -> StoreResult<Started> {
        let mut tx = write.begin().await.map_err(db_error)?;
        let started = Self::insert_workflow(&mut tx, new, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(started)
    }

    async fn insert_workflow(tx: &mut sqlx::SqliteConnection, new: &NewWorkflow, now: Millis) -> StoreResult<Started> {
        if let Some(d) = &new.debounce {
            let updated = debounce_onto::<SqliteStore>(tx, new, &d.key, now).await?;
            if let Some(row) = updated {
                return Ok(Started {
                    workflow: row.try_into()?,
                    created: false,
                });
            }
        }
        try_start::<SqliteStore>(tx, new, now).await?.ok_or_else(|| {
            StoreError::Unavailable(format!("workflow {:?} was neither started nor found", new.workflow_id))
        })
    }

    /// The heads of each partition's backlog, at most `rooms[i]` of partition `keys[i]`: one
    /// indexed read per partition (the one writer runs the claim alone; nothing to skip).
    async fn partition_heads(
        tx: &mut sqlx::SqliteConnection,
        queue: &str,
        claim: &Claim,
        keys: &[String],
        rooms: &[i64],
    ) -> StoreResult<Vec<(String, String, bool)>> {
        let names = dialect::list(&claim.workflow_names);
        let mut heads = Vec::new();
        for (key, room) in keys.iter().zip(rooms) {
            let rows: Vec<(String, String, bool)> = sqlx::query_as(
                "SELECT workflow_id, partition_key, started_at IS NOT NULL FROM workflows \
                 WHERE status = 'ENQUEUED' AND queue_name = $1 AND workflow_name IN (SELECT value FROM json_each($2)) \
                   AND (app_version IS NULL OR app_version = $3) AND partition_key = $4 \
                 ORDER BY priority, created_at, workflow_id LIMIT $5",
            )
            .bind(queue)
            .bind(&names)
            .bind(&claim.app_version)
            .bind(key)
            .bind(room)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
            heads.extend(rows);
        }
        Ok(heads)
    }
}
