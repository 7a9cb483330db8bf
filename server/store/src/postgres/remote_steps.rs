//! Remote steps on PostgreSQL, what differs: attempts are claimed `FOR UPDATE SKIP LOCKED`, so
//! two replicas never start the same attempt.

use super::PostgresStore;
use crate::dialect::StepClaims;
use crate::remote::{claimed_columns, ClaimedRow};
use crate::rows::db_error;
use crate::*;

impl StepClaims for PostgresStore {
    async fn claim_attempts(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        // The locking subquery sits in FROM with a LIMIT, so it runs once (see claim_workflows
        // for why that matters with SKIP LOCKED); `OF q` keeps the workflow rows unlocked.
        let claimed: Vec<ClaimedRow> = sqlx::query_as(concat!(
            "UPDATE step_tasks t SET status = 'RUNNING', attempt = t.attempt + 1, worker_id = $1, session_id = $2, \
               attempt_deadline_at = $3 + t.timeout_ms, updated_at = $3 \
             FROM (SELECT q.workflow_id, q.step_id FROM step_tasks q WHERE q.status = 'QUEUED' AND q.available_at <= $3 \
               AND q.step_name = ANY($4) \
               AND EXISTS (SELECT 1 FROM workflows w WHERE w.workflow_id = q.workflow_id \
                 AND w.status IN ('ENQUEUED', 'DELAYED', 'PENDING')) \
               ORDER BY q.available_at, q.created_at LIMIT $5 FOR UPDATE OF q SKIP LOCKED) c \
             WHERE t.workflow_id = c.workflow_id AND t.step_id = c.step_id AND t.status = 'QUEUED' \
             RETURNING ",
            claimed_columns!("t.")
        ))
        .bind(&claim.worker_id)
        .bind(&claim.session_id)
        .bind(now)
        .bind(&claim.step_names)
        .bind(claim.limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(claimed.into_iter().map(StepTask::from).collect())
    }
}
