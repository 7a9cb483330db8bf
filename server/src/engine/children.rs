//! Child workflows' cancels, which cascade level by level. (Starting and awaiting a child are
//! operations of the worker stream: `ops/start_child.rs`, `ops/await_child.rs`.)

use waymark_store::{WorkflowRecord, WorkflowStatus};

use super::{workflows::Workflows, EngineResult};

impl Workflows {
    /// Cancels a workflow and, with `cascade`, its children and theirs, level by level.
    pub async fn cancel_tree(&self, workflow_id: &str, cascade: bool) -> EngineResult<WorkflowRecord> {
        let root = self.cancel_workflow(workflow_id).await?;
        if cascade {
            let mut level = self.core.store.children(workflow_id).await?;
            while !level.is_empty() {
                let mut next = Vec::new();
                for id in level {
                    let w = self.cancel_workflow(&id).await?;
                    if w.status == WorkflowStatus::Cancelled {
                        next.extend(self.core.store.children(&id).await?);
                    }
                }
                level = next;
            }
        }
        Ok(root)
    }
}
