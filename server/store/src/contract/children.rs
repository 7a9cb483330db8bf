//! Child workflows: which ones a workflow started, and how an awaited one ended. (Starting and
//! awaiting a child are composed by the engine from [`crate::Transaction`]'s table operations.)

use async_trait::async_trait;

use crate::*;

/// How a child (or any awaited workflow) ended, as the awaiting step recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub status: WorkflowStatus,
    /// JSON text, when it succeeded.
    pub output: Option<String>,
    pub failure: Option<Failure>,
}

/// Child workflows: which ones a workflow started.
#[async_trait]
pub trait Children: Send + Sync {
    /// Ids of the workflows started as children of this one.
    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>>;
}
