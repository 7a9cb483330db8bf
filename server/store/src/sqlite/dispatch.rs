//! Dispatch on SQLite: claims of queues without limits, and taking back runs a worker lost.
//! The one writer connection runs each claim alone, so no row locks are needed.

use super::dialect;
use super::sql::workers::recover_set;
use super::SqliteStore;
use crate::queues::has_limits;
use crate::rows::{db_error, workflow_columns, WorkflowRow};
use crate::*;

impl SqliteStore {
    pub(super) async fn claim(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        // Queues with limits are left to `claim_limited` (judged by their stored row).
        let claimed: Vec<WorkflowRow> = sqlx::query_as(concat!(
            "UPDATE workflows SET status = 'PENDING', worker_id = $1, session_id = $7, epoch = epoch + 1, \
               app_version = COALESCE(app_version, $2), updated_at = $3, started_at = COALESCE(started_at, $3) \
             WHERE workflow_id IN (SELECT workflow_id FROM workflows WHERE status = 'ENQUEUED' \
               AND queue_name IN (SELECT value FROM json_each($4)) \
               AND queue_name NOT IN (SELECT queue_name FROM queues WHERE ",
            has_limits!(),
            ") AND workflow_name IN (SELECT value FROM json_each($5)) \
               AND (app_version IS NULL OR app_version = $2) \
               ORDER BY priority, created_at, workflow_id LIMIT $6) \
             RETURNING ",
            workflow_columns!()
        ))
        .bind(&claim.worker_id)
        .bind(&claim.app_version)
        .bind(now)
        .bind(dialect::list(&claim.queues))
        .bind(dialect::list(&claim.workflow_names))
        .bind(claim.limit as i64)
        .bind(&claim.session_id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.with_replay_steps(claimed).await
    }

    pub(super) async fn release_fenced(
        &self,
        lost: &[Fence],
        max_recovery_attempts: u32,
        now: Millis,
    ) -> StoreResult<Recovery> {
        // Rare (a worker lost a run), so one statement per workflow in one transaction is plenty.
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let mut rows: Vec<(String, String)> = Vec::new();
        for f in lost {
            let row: Option<(String, String)> = sqlx::query_as(concat!(
                "UPDATE workflows SET ",
                recover_set!(),
                " WHERE workflow_id = $3 AND epoch = $4 AND status = 'PENDING' RETURNING workflow_id, status"
            ))
            .bind(max_recovery_attempts as i64)
            .bind(now)
            .bind(&f.workflow_id)
            .bind(f.epoch as i64)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db_error)?;
            rows.extend(row);
        }
        tx.commit().await.map_err(db_error)?;
        Ok(self.recovered(rows))
    }
}
