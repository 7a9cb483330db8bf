//! Streams: reads from an offset. (Appends are composed by the engine from table operations:
//! `Transaction::append_stream` under a fence that makes appends of one workflow take turns.)

use super::Backend;
use crate::messaging::StreamRow;
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Streams for Backend {
    #[tracing::instrument(name = "store.read_stream", level = "debug", target = "waymark::store", skip_all)]
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
