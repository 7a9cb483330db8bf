//! Remote steps: calls queued as rows, attempts claimed by workers (two replicas never start
//! the same attempt), results recorded as the caller's step in the transaction that closes the
//! call, announced so the replica holding the caller's worker wakes it; and "wait for the first
//! of". Queueing a call and claiming attempts differ by backend (`remote_steps.rs` in each).

use super::fencing::{fenced_step, insert_step};
use super::parking::wake_parked;
use crate::changes::Change;
use crate::dialect::{sql, Backend, Conn, Dialect};
use crate::remote::{self, expired_select, task_columns, ExpiredRow, Next, TaskRow};
use crate::rows::{self, db_error};
use crate::*;

/// The call at this position, locked for the transaction.
async fn locked_task<B: Dialect>(conn: &mut Conn<B>, workflow_id: &str, step_id: u32) -> StoreResult<Option<TaskRow>> {
    B::query_as(sql!(B:
        "SELECT ",
        task_columns!(),
        " FROM step_tasks WHERE workflow_id = $1 AND step_id = $2",
        B::FOR_UPDATE
    ))
    .bind(workflow_id)
    .bind(step_id as i64)
    .fetch_optional(&mut *conn)
    .await
    .map_err(db_error)
}

/// Applies what a finished attempt leads to. True when the result was recorded.
async fn apply<B: Backend>(
    store: &B,
    conn: &mut Conn<B>,
    task: &TaskRow,
    next: Next,
    now: Millis,
) -> StoreResult<bool> {
    match next {
        Next::Retry { at, failure } => {
            B::query(
                "UPDATE step_tasks SET status = 'QUEUED', available_at = $1, last_failure = $2, worker_id = NULL, \
                 session_id = NULL, attempt_deadline_at = NULL, updated_at = $3 WHERE workflow_id = $4 AND step_id = $5",
            )
            .bind(at)
            .bind(failure)
            .bind(now)
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
            Ok(false)
        }
        Next::Close { outcome, attempts } => {
            let (output, failure) = rows::outcome_columns(&outcome);
            B::query(
                "UPDATE step_tasks SET status = 'DONE', attempt_deadline_at = NULL, updated_at = $1 \
                 WHERE workflow_id = $2 AND step_id = $3",
            )
            .bind(now)
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
            // Recorded under the caller's current epoch: the caller may have been recovered
            // since it made the call, and its new run reads this record.
            B::query(
                "INSERT INTO steps (workflow_id, step_id, name, output, failure, attempts, epoch, recorded_at, started_at) \
                 SELECT $1, $2, $3, $4, $5, $6, epoch, $7, \
                        (SELECT created_at FROM step_tasks WHERE workflow_id = $1 AND step_id = $2) \
                 FROM workflows WHERE workflow_id = $1 \
                 ON CONFLICT (workflow_id, step_id) DO NOTHING",
            )
            .bind(&task.workflow_id)
            .bind(task.step_id)
            .bind(&task.step_name)
            .bind(output)
            .bind(failure)
            .bind(attempts as i64)
            .bind(now)
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
            let on = ParkedOn::Step(task.step_id as u32);
            if wake_parked::<B>(conn, Some(&task.workflow_id), &on, now).await? > 0 {
                store.announce(&mut *conn, Change::enqueued()).await?;
            }
            let done = Change::StepDone {
                workflow_id: task.workflow_id.clone(),
                step_id: task.step_id as u32,
            };
            store.announce(&mut *conn, done).await?;
            Ok(true)
        }
    }
}

#[async_trait::async_trait]
impl<B: Backend> RemoteSteps for B {
    #[tracing::instrument(name = "store.call_step", level = "debug", target = "waymark::store", skip_all)]
    async fn call_step(
        &self,
        fence: &Fence,
        step_id: u32,
        task: &NewStepTask,
        now: Millis,
    ) -> StoreResult<Option<StepRecord>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = held!(tx, fenced_step::<B>(&mut tx, fence, step_id).await) {
            let answer = remote::check_call(&fence.workflow_id, &done, &task.step_name).map(|()| Some(done));
            return super::let_go(tx, answer).await;
        }
        let p = &task.policy;
        let (traceparent, tracestate) = crate::rows::trace_columns(task.trace.as_ref());
        let inserted: Option<String> = B::query_scalar(
            "INSERT INTO step_tasks (workflow_id, step_id, step_name, input, status, max_attempts, initial_backoff_ms, \
               backoff_coefficient, max_backoff_ms, timeout_ms, available_at, created_at, updated_at, traceparent, \
               tracestate) \
             VALUES ($1, $2, $3, $4, 'QUEUED', $5, $6, $7, $8, $9, $10, $10, $10, $11, $12) ON CONFLICT DO NOTHING \
             RETURNING step_name",
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
        .bind(traceparent)
        .bind(tracestate)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        // Queued before (the call is asked again, by a replay): it must be the same call.
        if inserted.is_none() {
            let queued: String =
                B::query_scalar("SELECT step_name FROM step_tasks WHERE workflow_id = $1 AND step_id = $2")
                    .bind(&fence.workflow_id)
                    .bind(step_id as i64)
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(db_error)?;
            if queued != task.step_name {
                let refusal = Err(StoreError::NonDeterminism {
                    workflow_id: fence.workflow_id.clone(),
                    step_id,
                    recorded: queued,
                    presented: task.step_name.clone(),
                });
                return super::let_go(tx, refusal).await;
            }
        }
        tx.commit().await.map_err(db_error)?;
        if inserted.is_some() {
            self.announce_soon(Change::enqueued());
        }
        Ok(None)
    }

    #[tracing::instrument(name = "store.step_call", level = "debug", target = "waymark::store", skip_all)]
    async fn step_call(&self, workflow_id: &str, step_id: u32) -> StoreResult<Option<(String, u32)>> {
        let row: Option<(String, i64)> =
            B::query_as("SELECT step_name, attempt FROM step_tasks WHERE workflow_id = $1 AND step_id = $2")
                .bind(workflow_id)
                .bind(step_id as i64)
                .fetch_optional(self.reader())
                .await
                .map_err(db_error)?;
        Ok(row.map(|(name, attempt)| (name, attempt as u32)))
    }

    #[tracing::instrument(
        name = "store.claim_step_tasks",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn claim_step_tasks(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>> {
        if claim.limit == 0 || claim.step_names.is_empty() {
            return Ok(Vec::new());
        }
        self.claim_attempts(claim, now).await
    }

    #[tracing::instrument(
        name = "store.finish_step_task",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn finish_step_task(
        &self,
        attempt: &StepAttempt,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<StepFinished> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let task = held!(
            tx,
            locked_task::<B>(&mut tx, &attempt.workflow_id, attempt.step_id)
                .await?
                .ok_or_else(|| StoreError::StepAttemptStale {
                    workflow_id: attempt.workflow_id.clone(),
                    step_id: attempt.step_id,
                    attempt: attempt.attempt,
                })
        );
        if !task.is_running(attempt.attempt, &attempt.session_id) {
            return super::let_go(tx, Err(task.stale(attempt.attempt))).await;
        }
        let next = task.next(outcome, now);
        let finished = match &next {
            Next::Retry { at, .. } => StepFinished::Retrying { at: *at },
            Next::Close { .. } => StepFinished::Recorded,
        };
        apply(self, &mut tx, &task, next, now).await?;
        tx.commit().await.map_err(db_error)?;
        Ok(finished)
    }

    #[tracing::instrument(
        name = "store.expire_step_tasks",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn expire_step_tasks(&self, now: Millis) -> StoreResult<ExpiredSteps> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        B::query(
            "UPDATE step_tasks SET status = 'CANCELLED', updated_at = $1 WHERE status IN ('QUEUED', 'RUNNING') \
             AND NOT EXISTS (SELECT 1 FROM workflows w WHERE w.workflow_id = step_tasks.workflow_id \
               AND w.status IN ('ENQUEUED', 'DELAYED', 'PENDING'))",
        )
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?;
        let expired: Vec<ExpiredRow> = B::query_as(sql!(B:expired_select!("$1"), B::skip_locked_of("t")))
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
            if apply(self, &mut tx, &task, next, now).await? {
                out.recorded.push((task.workflow_id.clone(), task.step_id as u32));
            }
        }
        tx.commit().await.map_err(db_error)?;
        if !out.retrying.is_empty() {
            self.announce_soon(Change::enqueued());
        }
        Ok(out)
    }

    #[tracing::instrument(name = "store.select_step", level = "debug", target = "waymark::store", skip_all)]
    async fn select_step(
        &self,
        fence: &Fence,
        step_id: u32,
        targets: &[WaitTarget],
        mode: WaitFor,
        now: Millis,
    ) -> StoreResult<Option<u32>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = held!(tx, fenced_step::<B>(&mut tx, fence, step_id).await) {
            let answer = remote::replay_select(&fence.workflow_id, &done, mode).map(Some);
            return super::let_go(tx, answer).await;
        }
        let mut done_at = Vec::with_capacity(targets.len());
        for target in targets {
            let at: Option<i64> = match target {
                WaitTarget::Workflow(id) => {
                    let row: Option<(String, i64)> =
                        B::query_as("SELECT status, updated_at FROM workflows WHERE workflow_id = $1")
                            .bind(id)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(db_error)?;
                    let (status, at) = held!(tx, row.ok_or_else(|| StoreError::WorkflowNotFound(id.clone())));
                    WorkflowStatus::parse(&status)
                        .is_some_and(WorkflowStatus::is_terminal)
                        .then_some(at)
                }
                WaitTarget::Step(s) => {
                    B::query_scalar("SELECT recorded_at FROM steps WHERE workflow_id = $1 AND step_id = $2")
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
            return super::let_go(tx, Ok(None)).await;
        };
        if !insert_step::<B>(
            &mut tx,
            fence,
            step_id,
            mode.step_name(),
            &remote::select_output(winner),
            now,
        )
        .await?
        {
            let answer = Err(StoreError::Unavailable("select step recorded concurrently".into()));
            return super::let_go(tx, answer).await;
        }
        tx.commit().await.map_err(db_error)?;
        Ok(Some(winner))
    }
}
