//! Remote steps on PostgreSQL, what differs: queueing a call answers, in the same statement,
//! what was there before (one round trip), and attempts are claimed `FOR UPDATE SKIP LOCKED`.

use super::sql::fencing::fenced_step;
use super::PostgresStore;
use crate::changes::Change;
use crate::remote::{self, ClaimedRow};
use crate::rows::db_error;
use crate::*;

impl PostgresStore {
    pub(super) async fn queue_call(
        &self,
        fence: &Fence,
        step_id: u32,
        task: &NewStepTask,
        now: Millis,
    ) -> StoreResult<Option<StepRecord>> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            remote::check_call(&fence.workflow_id, &done, &task.step_name)?;
            return Ok(Some(done));
        }
        let p = &task.policy;
        let (existing, inserted): (String, bool) = sqlx::query_as(
            "WITH ins AS (INSERT INTO step_tasks (workflow_id, step_id, step_name, input, status, max_attempts, \
               initial_backoff_ms, backoff_coefficient, max_backoff_ms, timeout_ms, available_at, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, 'QUEUED', $5, $6, $7, $8, $9, $10, $10, $10) ON CONFLICT DO NOTHING \
             RETURNING step_name) \
             SELECT step_name, true FROM ins UNION ALL \
             SELECT step_name, false FROM step_tasks WHERE workflow_id = $1 AND step_id = $2 LIMIT 1",
        )
        .bind(&fence.workflow_id)
        .bind(step_id as i64)
        .bind(&task.step_name)
        .bind(&task.input)
        .bind(p.max_attempts as i64)
        .bind(p.initial_backoff_ms)
        .bind(p.backoff_coefficient)
        .bind(p.max_backoff_ms)
        .bind(p.timeout_ms)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        if existing != task.step_name {
            return Err(StoreError::NonDeterminism {
                workflow_id: fence.workflow_id.clone(),
                step_id,
                recorded: existing,
                presented: task.step_name.clone(),
            });
        }
        tx.commit().await.map_err(db_error)?;
        if inserted {
            self.announce_soon(Change::Enqueued);
        }
        Ok(None)
    }

    pub(super) async fn claim_attempts(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
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
            "t.workflow_id, t.step_id, t.step_name, t.input, t.attempt, t.attempt_deadline_at"
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
