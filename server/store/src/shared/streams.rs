//! Streams: reads from an offset. (Appends are composed by the engine from table operations:
//! `Transaction::append_stream` under a fence that makes appends of one workflow take turns.)

use super::fencing::workflow_on;
use crate::dialect::Backend;
use crate::messaging::StreamRow;
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Streams for B {
    #[tracing::instrument(name = "store.read_stream", level = "debug", target = "waymark::store", skip_all)]
    async fn read_stream(&self, workflow_id: &str, key: &str, from: u64, limit: u32) -> StoreResult<Vec<StreamEntry>> {
        if workflow_on::<B>(self.reader(), workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        let rows: Vec<StreamRow> = B::query_as(
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

    #[tracing::instrument(name = "store.list_streams", level = "debug", target = "waymark::store", skip_all)]
    async fn list_streams(&self, workflow_id: &str, limit: u32) -> StoreResult<Vec<StreamSummary>> {
        if workflow_on::<B>(self.reader(), workflow_id).await?.is_none() {
            return Err(StoreError::WorkflowNotFound(workflow_id.to_string()));
        }
        // The close marker is the one entry without a value.
        let rows: Vec<(String, i64, i64, i64)> = B::query_as(
            "SELECT stream_key, COUNT(value), COUNT(*), MAX(written_at) FROM streams WHERE workflow_id = $1 \
             GROUP BY stream_key ORDER BY stream_key LIMIT $2",
        )
        .bind(workflow_id)
        .bind(limit as i64)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(key, values, entries, updated_at)| StreamSummary {
                key,
                length: values as u64,
                closed: entries > values,
                updated_at,
            })
            .collect())
    }
}
