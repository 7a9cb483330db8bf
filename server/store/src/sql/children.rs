//! Child workflows: the child's row and the parent's record of it in one fenced transaction,
//! and the recorded wait for a child to finish.

use super::fencing::{fenced_step, insert_step};
use super::Backend;
use crate::messaging;
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Children for Backend {
    async fn start_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child: NewWorkflow,
        now: Millis,
    ) -> StoreResult<String> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_start_child(&fence.workflow_id, &done);
        }
        let inserted = sqlx::query(
            "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, app_version, input, created_at, updated_at, \
               parent_workflow_id, deadline_at, priority) VALUES ($1, $2, 'ENQUEUED', $3, $4, $5, $6, $6, $7, \
               (SELECT CASE WHEN p.deadline_at IS NULL THEN CAST($8 AS BIGINT) WHEN CAST($8 AS BIGINT) IS NULL THEN p.deadline_at \
                 WHEN p.deadline_at < CAST($8 AS BIGINT) THEN p.deadline_at ELSE CAST($8 AS BIGINT) END FROM workflows p WHERE p.workflow_id = $7), $9) \
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
        let existing = Self::workflow_on(&mut *tx, &child.workflow_id)
            .await?
            .ok_or_else(|| StoreError::WorkflowNotFound(child.workflow_id.clone()))?;
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

    async fn await_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child_id: &str,
        now: Millis,
    ) -> StoreResult<Option<ChildOutcome>> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        if let Some(done) = fenced_step(&mut tx, fence, step_id).await? {
            return messaging::replay_await_child(&fence.workflow_id, &done).map(Some);
        }
        let child = Self::workflow_on(&mut *tx, child_id)
            .await?
            .ok_or_else(|| StoreError::WorkflowNotFound(child_id.to_string()))?;
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

    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>> {
        sqlx::query_scalar(
            "SELECT workflow_id FROM workflows WHERE parent_workflow_id = $1 ORDER BY created_at, workflow_id",
        )
        .bind(workflow_id)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)
    }
}
