//! The end of a workflow's records: deleting finished workflows on request.

use super::{validate, Engine, EngineResult};

impl Engine {
    /// Deletes the finished workflow `workflow_id` (with `cascade`, its descendants too) and
    /// everything recorded for it. Returns the ids deleted, the one asked for first.
    pub async fn delete_workflow(&self, workflow_id: &str, cascade: bool) -> EngineResult<Vec<String>> {
        validate::name("workflow_id", workflow_id)?;
        let mut deleted = self.store.delete_workflow(workflow_id, cascade).await?;
        // The one asked for first, then the rest in a stable order.
        deleted.sort_by(|a, b| (a != workflow_id, a).cmp(&(b != workflow_id, b)));
        self.count_deleted("request", deleted.len());
        tracing::info!(workflow_id, cascade, deleted = deleted.len(), "deleted on request");
        Ok(deleted)
    }
}
