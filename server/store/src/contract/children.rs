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
    /// Starts a child of the fenced workflow, recording it as step `step_id` in the same
    /// transaction as the child's row. On replay (step recorded) returns the recorded child id
    /// and starts nothing. A child id already taken by another workflow name is
    /// `WorkflowIdConflict`; taken by the same name, it is joined.
    async fn start_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child: NewWorkflow,
        now: Millis,
    ) -> StoreResult<String>;

    /// If `child_id` has finished, records its outcome as step `step_id` of the fenced workflow
    /// and returns it; `None` while it runs. A recorded step is answered from the record.
    async fn await_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child_id: &str,
        now: Millis,
    ) -> StoreResult<Option<ChildOutcome>>;

    /// Ids of the workflows started as children of this one.
    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>>;
}
