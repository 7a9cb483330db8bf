//! A workflow's streams, read from an offset. (Appends and closes, recorded as steps, are
//! composed by the engine from [`crate::Transaction`]'s table operations.)

use async_trait::async_trait;

use crate::*;

/// One entry of a workflow's stream: a value, or the close marker (the last entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    pub offset: u64,
    /// JSON text; `None` for the close marker.
    pub value: Option<String>,
    pub closed: bool,
}

/// One stream of a workflow, summed up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamSummary {
    pub key: String,
    /// Values written (the close marker is not one).
    pub length: u64,
    pub closed: bool,
    /// When its last entry was written.
    pub updated_at: Millis,
}

/// A workflow's streams, read from an offset.
#[async_trait]
pub trait Streams: Send + Sync {
    /// Up to `limit` entries of stream `key` from offset `from`, in order.
    /// `WorkflowNotFound` when the workflow does not exist.
    async fn read_stream(&self, workflow_id: &str, key: &str, from: u64, limit: u32) -> StoreResult<Vec<StreamEntry>>;

    /// The workflow's streams, by key, at most `limit`. `WorkflowNotFound` when the workflow
    /// does not exist.
    async fn list_streams(&self, workflow_id: &str, limit: u32) -> StoreResult<Vec<StreamSummary>>;
}
