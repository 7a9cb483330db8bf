//! Remote steps on SQLite: calls queued as rows, attempts claimed by workers, results recorded
//! as the caller's step in the transaction that closes the call; and "wait for the first of".
//! Every write runs on the single writer connection, so claims cannot overlap.

use sqlx::{Sqlite, Transaction};

use super::fencing::{fenced_step, insert_step};
use super::parking::wake_parked;
use super::{dialect, SqliteStore};
use crate::remote::{self, claimed_columns, expired_select, task_columns, ClaimedRow, ExpiredRow, Next, TaskRow};
use crate::rows::{self, db_error};
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

/// Applies what a finished attempt leads to. True when the result was recorded.
async fn apply(tx: &mut Transaction<'_, Sqlite>, task: &TaskRow, next: Next, now: Millis) -> StoreResult<bool> {
    match next {
        Next::Retry { at, failure } => {
            sqlx::query(
                "UPDATE step_tasks SET status = 'QUEUED', available_at = ?1, last_failure = ?2, worker_id = NULL, \
                 session_id = NULL, attempt_deadline_at = NULL, updated_at = ?3 WHERE workflow_id = ?4 AND step_id = ?5",
            )
            .bind(at)
            .bind(failure)
            .bind(now)
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            Ok(false)
        }
        Next::Close { outcome, attempts } => {
            let (output, failure) = rows::outcome_columns(&outcome);
            sqlx::query(
                "UPDATE step_tasks SET status = 'DONE', attempt_deadline_at = NULL, updated_at = ?1 \
                 WHERE workflow_id = ?2 AND step_id = ?3",
            )
            .bind(now)
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            // Recorded under the caller's current epoch: the caller may have been recovered
            // since it made the call, and its new run reads this record.
            sqlx::query(
                "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at) \
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, epoch, ?7 FROM workflows WHERE workflow_id = ?1 \
                 ON CONFLICT (workflow_id, step_id) DO NOTHING",
            )
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .bind(&task.step_name)
            .bind(output)
            .bind(failure)
            .bind(attempts as i64)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(db_error)?;
            wake_parked(tx, Some(&task.workflow_id), &ParkedOn::Step(task.step_id as u32), now).await?;
            Ok(true)
        }
    }
}

#[async_trait::async_trait]
impl RemoteSteps for SqliteStore {
    async fn call_step(
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

    async fn claim_step_tasks(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        if claim.limit == 0 || claim.step_names.is_empty() {
            return Ok(Vec::new());
        }
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

    async fn finish_step_task(
        &self,
        attempt: &StepAttempt,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<StepFinished> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        let task = task_row(&mut tx, &attempt.workflow_id, attempt.step_id)
            .await?
            .ok_or_else(|| StoreError::StepAttemptStale {
                workflow_id: attempt.workflow_id.clone(),
                step_id: attempt.step_id,
                attempt: attempt.attempt,
            })?;
        if !task.is_running(attempt.attempt) {
            return Err(task.stale(attempt.attempt));
        }
        let next = task.next(outcome, now);
        let finished = match &next {
            Next::Retry { at, .. } => StepFinished::Retrying { at: *at },
            Next::Close { .. } => StepFinished::Recorded,
        };
        apply(&mut tx, &task, next, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(finished)
    }

    async fn expire_step_tasks(&self, now: Millis) -> StoreResult<ExpiredSteps> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        sqlx::query(
            "UPDATE step_tasks SET status = 'CANCELLED', updated_at = ?1 WHERE status IN ('QUEUED', 'RUNNING') \
             AND NOT EXISTS (SELECT 1 FROM workflows w WHERE w.workflow_id = step_tasks.workflow_id \
               AND w.status IN ('ENQUEUED', 'DELAYED', 'PENDING'))",
        )
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let expired: Vec<ExpiredRow> = sqlx::query_as(expired_select!("?1"))
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(db_error)?;
        let mut out = ExpiredSteps::default();
        for ExpiredRow { task, lost } in expired {
            let next = task.next(task.timed_out(lost), now);
            if let Next::Retry { at, .. } = &next {
                out.retrying.push(*at);
            }
            if apply(&mut tx, &task, next, now).await? {
                out.recorded.push((task.workflow_id.clone(), task.step_id as u32));
            }
        }
        tx.commit().await.map_err(db_error)?;
        Ok(out)
    }

    async fn select_step(
        &self,
        fence: &Fence,
        step_id: u32,
        targets: &[WaitTarget],
        mode: WaitFor,
        now: Millis,
    ) -> StoreResult<Option<u32>> {
        let mut tx = self.write.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return remote::replay_select(&fence.workflow_id, &done, mode).map(Some);
        }
        let mut done_at = Vec::with_capacity(targets.len());
        for target in targets {
            let at: Option<i64> = match target {
                WaitTarget::Workflow(id) => {
                    let w = Self::workflow_on(&mut *tx, id)
                        .await?
                        .ok_or_else(|| StoreError::WorkflowNotFound(id.clone()))?;
                    w.status.is_terminal().then_some(w.updated_at)
                }
                WaitTarget::Step(s) => {
                    sqlx::query_scalar("SELECT recorded_at FROM steps WHERE workflow_id = ?1 AND step_id = ?2")
                        .bind(&fence.workflow_id)
                        .bind(*s as i64)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(db_error)?
                }
            };
            done_at.push(at);
        }
        let Some(winner) = mode.decide(&done_at) else {
            return Ok(None);
        };
        insert_step(
            &mut tx,
            fence,
            step_id,
            mode.step_name(),
            &remote::select_output(winner),
            now,
        )
        .await?;
        tx.commit().await.map_err(db_error)?;
        Ok(Some(winner))
    }
}
