//! A workflow's records after its run: deleting finished workflows on request, and forking a
//! workflow into a new one that replays part of its history.

use waymark_store::{Fork, WorkflowRecord};

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

    /// Starts a new workflow from `fork.source`'s history before `fork.from_step` (all of it
    /// when `None`): ENQUEUED, on its queue and version unless the fork says otherwise.
    pub async fn fork_workflow(&self, mut fork: Fork) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", &fork.source)?;
        validate::optional_name("new_workflow_id", &fork.new_workflow_id)?;
        if let Some(v) = &fork.app_version {
            validate::name("app_version", v)?;
        }
        if let Some(q) = &fork.queue_name {
            validate::name("queue_name", q)?;
            self.check_queue(q).await?;
        }
        if fork.new_workflow_id.is_empty() {
            fork.new_workflow_id = uuid::Uuid::now_v7().to_string();
        }
        let w = self.store.fork_workflow(&fork, self.now()).await?;
        tracing::info!(workflow_id = %w.workflow_id, source = %fork.source, from_step = ?fork.from_step, "forked");
        self.work_enqueued();
        Ok(w)
    }
}
