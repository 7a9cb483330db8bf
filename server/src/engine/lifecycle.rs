//! The lifecycle service: a workflow's records after (or beside) its run — deleting finished
//! workflows on request and by the retention collector (`retention.rs`), forking a workflow
//! into a new one that replays part of its history, and re-pinning an unfinished one to
//! another version.

use std::sync::Arc;

use waymark_store::{Fork, WorkflowRecord};

use super::{queues::Queues, validate, worker_list, Core, EngineError, EngineResult, ErrorCode};

pub struct Lifecycle {
    pub(super) core: Arc<Core>,
    /// A fork onto another queue needs that queue to exist.
    queues: Arc<Queues>,
}

impl Lifecycle {
    pub(crate) fn new(core: Arc<Core>, queues: Arc<Queues>) -> Lifecycle {
        Lifecycle { core, queues }
    }

    /// Deletes the finished workflow `workflow_id` (with `cascade`, its descendants too) and
    /// everything recorded for it. Returns the ids deleted, the one asked for first.
    pub async fn delete_workflow(&self, workflow_id: &str, cascade: bool) -> EngineResult<Vec<String>> {
        validate::name("workflow_id", workflow_id)?;
        let mut deleted = self.core.store.delete_workflow(workflow_id, cascade).await?;
        // The one asked for first, then the rest in a stable order.
        deleted.sort_by(|a, b| (a != workflow_id, a).cmp(&(b != workflow_id, b)));
        self.core.counters.deleted("request", deleted.len());
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
            self.queues.check(q).await?;
        }
        if fork.new_workflow_id.is_empty() {
            fork.new_workflow_id = uuid::Uuid::now_v7().to_string();
        }
        let w = self.core.store.fork_workflow(&fork, self.core.now()).await?;
        tracing::info!(workflow_id = %w.workflow_id, source = %fork.source, from_step = ?fork.from_step, "forked");
        self.core.work_enqueued();
        Ok(w)
    }

    /// Re-pins the unfinished `workflow_id` to `app_version`. Unless `allow_unserved`, a
    /// connected worker of that version must register the workflow's name.
    pub async fn set_workflow_version(
        &self,
        workflow_id: &str,
        app_version: &str,
        allow_unserved: bool,
    ) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        validate::name("app_version", app_version)?;
        if !allow_unserved {
            let w = self
                .core
                .store
                .get_workflow(workflow_id)
                .await?
                .ok_or_else(|| EngineError::not_found(workflow_id))?;
            if !worker_list::served_names(&self.core, app_version)
                .await?
                .contains(&w.workflow_name)
            {
                return Err(EngineError::new(
                    ErrorCode::FailedPrecondition,
                    "VERSION_NOT_SERVED",
                    format!(
                        "no connected worker of version {app_version:?} registers workflow {:?}; start one first, or allow an unserved version to let the workflow wait for one",
                        w.workflow_name
                    ),
                ));
            }
        }
        let w = self
            .core
            .store
            .set_app_version(workflow_id, app_version, self.core.now())
            .await?;
        tracing::info!(workflow_id, app_version, "re-pinned");
        self.core.work_enqueued();
        Ok(w)
    }
}
