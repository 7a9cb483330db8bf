//! Remote steps on SQLite, what differs: a call is queued and read back in turn, and attempts
//! are claimed by row id (the one writer connection runs each claim alone).

use sqlx::{Sqlite, Transaction};

use super::sql::fencing::fenced_step;
use super::{dialect, SqliteStore};
use crate::remote::{self, claimed_columns, task_columns, ClaimedRow, TaskRow};
use crate::rows::db_error;
use crate::*;

async fn task_row(tx: &mut Transaction<'_, Sqlite>, workflow_id: &str, step_id: u32) -> StoreResult<Option<TaskRow>> {
    sqlx::query_as(concat!(
        "SELECT ",
        task_columns!(),
        " FROM step_tasks WHERE workflow_id = ?1 AND step_id = ?2"
    ))
    .bind(workflow_id)
    .bind(step_id as i64)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db_error)
}

impl SqliteStore {
    pub(super) async fn queue_call(
        &self,
        fence: &Fence,
        step_id: u32,
        task: &NewStepTask,
        now: Millis,
    ) -> StoreResult<Option<StepRecord>> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            remote::check_call(&fence.workflow_id, &done, &task.step_name)?;
            return Ok(Some(done));
        }
        let p = &task.policy;
        sqlx::query(
            "INSERT INTO step_tasks (workflow_id, step_id, step_name, input, status, max_attempts, initial_backoff_ms, \
               backoff_coefficient, max_backoff_ms, timeout_ms, available_at, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, 'QUEUED', ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?10) ON CONFLICT DO NOTHING",
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
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let existing = task_row(&mut tx, &fence.workflow_id, step_id).await?;
        if let Some(t) = existing.filter(|t| t.step_name != task.step_name) {
            return Err(StoreError::NonDeterminism {
                workflow_id: fence.workflow_id.clone(),
                step_id,
                recorded: t.step_name,
                presented: task.step_name.clone(),
            });
        }
        tx.commit().await.map_err(db_error)?;
        Ok(None)
    }

    pub(super) async fn claim_attempts(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        let claimed: Vec<ClaimedRow> = sqlx::query_as(concat!(
            "UPDATE step_tasks SET status = 'RUNNING', attempt = attempt + 1, worker_id = ?1, session_id = ?2, \
               attempt_deadline_at = ?3 + timeout_ms, updated_at = ?3 \
             WHERE rowid IN (SELECT t.rowid FROM step_tasks t WHERE t.status = 'QUEUED' AND t.available_at <= ?3 \
               AND t.step_name IN (SELECT value FROM json_each(?4)) \
               AND EXISTS (SELECT 1 FROM workflows w WHERE w.workflow_id = t.workflow_id \
                 AND w.status IN ('ENQUEUED', 'DELAYED', 'PENDING')) \
               ORDER BY t.available_at, t.created_at LIMIT ?5) \
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
