//! Streams on PostgreSQL: appends recorded as steps, and reads from an offset. An append locks
//! the workflow row `FOR NO KEY UPDATE` (rather than the usual `FOR SHARE` fence), so two
//! appends of one workflow take turns and `MAX + 1` cannot hand out one offset twice.

use super::messages::insert_step;
use super::PostgresStore;
use crate::messaging::{self, StreamRow};
use crate::rows::{self, db_error, step_columns, workflow_columns, StepRow, WorkflowRow};
use crate::*;

impl PostgresStore {
    pub(super) async fn write_stream_step_impl(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: Option<&str>,
        now: Millis,
    ) -> StoreResult<u64> {
        let name = if value.is_some() {
            WRITE_STREAM_STEP
        } else {
            CLOSE_STREAM_STEP
        };
        let mut tx = self.pool.begin().await.map_err(db_error)?;
        let current: Option<WorkflowRow> = sqlx::query_as(concat!(
            "SELECT ",
            workflow_columns!(),
            " FROM workflows WHERE workflow_id = $1 FOR NO KEY UPDATE"
        ))
        .bind(&fence.workflow_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let current = current.map(WorkflowRecord::try_from).transpose()?;
        match &current {
            Some(w) if w.status == WorkflowStatus::Pending && w.epoch == fence.epoch => {}
            _ => return Err(rows::refusal(&fence.workflow_id, current, fence.epoch)),
        }
        let done: Option<StepRow> = sqlx::query_as(concat!(
            "SELECT ",
            step_columns!(),
            " FROM steps WHERE workflow_id = $1 AND step_id = $2"
        ))
        .bind(&fence.workflow_id)
        .bind(step_id as i64)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        if let Some(done) = done {
            return messaging::replay_stream(&fence.workflow_id, &StepRecord::try_from(done)?, name);
        }
        let offset: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(position) + 1, 0) FROM streams WHERE workflow_id = $1 AND stream_key = $2",
        )
        .bind(&fence.workflow_id)
        .bind(key)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        sqlx::query("INSERT INTO streams (workflow_id, stream_key, position, value, closed, written_at) VALUES ($1, $2, $3, $4, $5, $6)")
            .bind(&fence.workflow_id)
            .bind(key)
            .bind(offset)
            .bind(value)
            .bind(value.is_none())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(db_error)?;
        if !insert_step(
            &mut tx,
            fence,
            step_id,
            name,
            &messaging::stream_output(offset as u64),
            now,
        )
        .await?
        {
            return Err(StoreError::Unavailable("stream step recorded concurrently".into()));
        }
        let change = crate::changes::Change::Stream {
            workflow_id: fence.workflow_id.clone(),
            key: key.to_string(),
        };
        tx.commit().await.map_err(db_error)?;
        self.announce_soon(change);
        Ok(offset as u64)
    }

    pub(super) async fn read_stream_impl(
        &self,
        workflow_id: &str,
        key: &str,
        from: u64,
        limit: u32,
    ) -> StoreResult<Vec<StreamEntry>> {
        if self.workflow(workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let rows: Vec<StreamRow> = sqlx::query_as(
            "SELECT position, value, closed FROM streams WHERE workflow_id = $1 AND stream_key = $2 AND position >= $3 \
             ORDER BY position LIMIT $4",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(from.min(i64::MAX as u64) as i64)
        .bind(limit as i64)
        .fetch_all(&self.pool)
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(StreamEntry::from).collect())
    }
}
