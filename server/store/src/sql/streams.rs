//! Streams: appends recorded as steps, and reads from an offset. An append's fence locks the
//! workflow row for itself (PostgreSQL's `FOR NO KEY UPDATE` rather than the usual `FOR SHARE`;
//! SQLite's one writer), so two appends of one workflow take turns.

use super::fencing::{fenced_step_alone, insert_step};
use super::Backend;
use crate::messaging::{self, StreamRow};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Streams for Backend {
    async fn write_stream_step(
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
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        // Appends of one workflow take turns, so `MAX + 1` cannot hand out one offset twice.
        let done = fenced_step_alone(&mut tx, fence, step_id).await?;
        if let Some(done) = done {
            return messaging::replay_stream(&fence.workflow_id, &done, name);
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

    async fn read_stream(&self, workflow_id: &str, key: &str, from: u64, limit: u32) -> StoreResult<Vec<StreamEntry>> {
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
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(StreamEntry::from).collect())
    }
}
