//! Child workflows on PostgreSQL: the child's row and the parent's record of it in one
//! transaction (fenced by the parent's row lock), and the recorded wait for a child to finish.

use super::messages::{fenced_step, insert_step};
use super::PostgresStore;
use crate::messaging;
use crate::rows::{db_error, workflow_columns, WorkflowRow};
use crate::*;

impl PostgresStore {
    pub(super) async fn start_child_step_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        child: NewWorkflow,
        now: Millis,
    ) -> StoreResult<String> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_start_child(&fence.workflow_id, &done);
        }
        let inserted = sqlx::query(
            "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, updated_at, \
               parent_workflow_id, deadline_at, priority) VALUES ($1, $2, 'ENQUEUED', $3, $4, $5, $6, $6, $7, \
               (SELECT CASE WHEN p.deadline_at IS NULL THEN $8::bigint WHEN $8::bigint IS NULL THEN p.deadline_at \
                 WHEN p.deadline_at < $8::bigint THEN p.deadline_at ELSE $8::bigint END FROM workflows p WHERE p.workflow_id = $7), $9) \
             ON CONFLICT (workflow_id) DO NOTHING",
        )
        .bind(&child.workflow_id)
        .bind(&child.workflow_name)
        .bind(&child.queue_name)
        .bind(&child.app_version)
        .bind(&child.input)
        .bind(now)
        .bind(&fence.workflow_id)
        .bind(child.deadline_at)
        .bind(child.priority as i64)
        .execute(&mut *tx)
        .await
        .map_err(db_error)?
        .rows_affected()
            == 1;
        let existing: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE workflow_id = $1"
        ))
        .bind(&child.workflow_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let existing: WorkflowRecord = existing
            .ok_or_else(|| StoreError::WorkflowNotFound(child.workflow_id.clone()))?
            .try_into()?;
        if existing.workflow_name != child.workflow_name {
            return Err(StoreError::WorkflowIdConflict {
                workflow_id: child.workflow_id,
                existing_name: existing.workflow_name,
            });
        }
        if !insert_step(
            &mut tx,
            fence,
            step_id,
            START_CHILD_STEP,
            &messaging::child_started_output(&child.workflow_id),
            now,
        )
        .await?
        {
            return Err(StoreError::Unavailable("start_child step recorded concurrently".into()));
        }
        tx.commit().await.map_err(db_error)?;
        if inserted {
            self.announce_soon(crate::changes::Change::Enqueued);
        }
        Ok(child.workflow_id)
    }

    pub(super) async fn await_child_step_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        child_id: &str,
        now: Millis,
    ) -> StoreResult<Option<ChildOutcome>> {
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_await_child(&fence.workflow_id, &done).map(Some);
        }
        let child: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE workflow_id = $1"
        ))
        .bind(child_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let child: WorkflowRecord = child
            .ok_or_else(|| StoreError::WorkflowNotFound(child_id.to_string()))?
            .try_into()?;
        if !child.status.is_terminal() {
            return Ok(None);
        }
        let outcome = messaging::child_outcome(&child);
        if !insert_step(
            &mut tx,
            fence,
            step_id,
            AWAIT_CHILD_STEP,
            &messaging::await_child_output(&outcome),
            now,
        )
        .await?
        {
            return Err(StoreError::Unavailable("await_child step recorded concurrently".into()));
        }
        tx.commit().await.map_err(db_error)?;
        Ok(Some(outcome))
    }

    pub(super) async fn children_impl(&self, workflow_id: &str) -> StoreResult<Vec<String>> {
        sqlx::query_scalar(
            "SELECT workflow_id FROM workflows WHERE parent_workflow_id = $1 ORDER BY created_at, workflow_id",
        )
        .bind(workflow_id)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }

    pub(super) async fn finished_among_impl(&self, ids: &[String]) -> StoreResult<Vec<String>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT workflow_id FROM workflows WHERE workflow_id = ANY($1) \
             AND status IN ('SUCCESS', 'ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')",
        )
        .bind(ids)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)
    }
}
