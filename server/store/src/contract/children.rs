//! Child workflows: started and awaited as recorded steps of their parent.

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

/// Child workflows: started and awaited as recorded steps of their parent.
#[async_trait]
pub trait Children: Send + Sync {
    /// Ids of the workflows started as children of this one.
    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>>;
}
