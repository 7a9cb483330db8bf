//! Remote steps on SQLite, what differs: attempts are claimed by row id (the one writer
//! connection runs each claim alone).

use super::{dialect, SqliteStore};
use crate::dialect::StepClaims;
use crate::remote::{claimed_columns, ClaimedRow};
use crate::rows::db_error;
use crate::*;

impl StepClaims for SqliteStore {
    async fn claim_attempts(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        let claimed: Vec<ClaimedRow> = sqlx::query_as(concat!(
            "UPDATE step_tasks SET status = 'RUNNING', attempt = attempt + 1, worker_id = $1, session_id = $2, \
               attempt_deadline_at = $3 + timeout_ms, updated_at = $3 \
             WHERE rowid IN (SELECT t.rowid FROM step_tasks t WHERE t.status = 'QUEUED' AND t.available_at <= $3 \
               AND t.step_name IN (SELECT value FROM json_each($4)) \
               AND EXISTS (SELECT 1 FROM workflows w WHERE w.workflow_id = t.workflow_id \
                 AND w.status IN ('ENQUEUED', 'DELAYED', 'PENDING')) \
               ORDER BY t.available_at, t.created_at LIMIT $5) \
             RETURNING ",
            claimed_columns!()
        ))
        .bind(&claim.worker_id)
        .bind(&claim.session_id)
        .bind(now)
        .bind(dialect::list(&claim.step_names))
        .bind(claim.limit as i64)
        .fetch_all(&self.write)
        .await
        .map_err(db_error)?;
        Ok(claimed.into_iter().map(StepTask::from).collect())
    }
}
