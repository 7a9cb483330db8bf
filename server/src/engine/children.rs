//! Child workflows: started from a workflow (the child's row and the parent's record of it in
//! one transaction) and awaited (the outcome recorded as the parent's step), with the parent
//! woken when the child finishes; cancels that cascade level by level.

use std::sync::Arc;

use waymark_store::{ChildOutcome, Fence, NewWorkflow, TraceContext, WorkflowRecord, WorkflowStatus};

use super::{
    validate, waits::step_waits::StepWaiter, workflows::DEFAULT_QUEUE, Engine, EngineError, EngineResult, ErrorCode,
    WorkerSession,
};

/// What the API needs to start a child.
pub struct ChildRequest {
    pub workflow_name: String,
    /// Derived from the parent's id and the step when empty.
    pub child_workflow_id: String,
    /// JSON text.
    pub input: String,
    pub queue_name: String,
    /// The span the parent started it from.
    pub trace: Option<TraceContext>,
    /// Its own tags, over the parent's (which it inherits).
    pub tags: waymark_store::Tags,
}

impl Engine {
    pub async fn start_child(
        &self,
        session: &WorkerSession,
        fence: Fence,
        step_id: u32,
        req: ChildRequest,
    ) -> EngineResult<String> {
        self.worker_write(session, &fence, 0).await?;
        validate::name("workflow_name", &req.workflow_name)?;
        if !session.registration.reaches(&req.workflow_name) {
            return Err(super::worker::out_of_reach(&req.workflow_name));
        }
        validate::optional_name("child_workflow_id", &req.child_workflow_id)?;
        validate::optional_name("queue_name", &req.queue_name)?;
        super::tags::validate("child tags", &req.tags)?;
        // The parent's queue (when none is named, as the contract says) and tags (which the
        // child inherits).
        let parent = self.store.get_workflow(&fence.workflow_id).await?;
        let tags = super::tags::inherit(parent.as_ref().map_or(&Default::default(), |p| &p.tags), req.tags)?;
        let queue_name = if req.queue_name.is_empty() {
            parent
                .map(|p| p.queue_name)
                .unwrap_or_else(|| DEFAULT_QUEUE.to_string())
        } else {
            self.check_queue(&req.queue_name).await?;
            req.queue_name.clone()
        };
        validate::payload("child input", &req.input, self.config.max_payload_bytes)?;
        if !self.is_known_name(&req.workflow_name).await? {
            return Err(EngineError::new(
                ErrorCode::NotFound,
                "WORKFLOW_NAME_UNKNOWN",
                format!("no worker has registered a workflow named {:?}", req.workflow_name),
            ));
        }
        let child_id = if req.child_workflow_id.is_empty() {
            format!("{}/child-{step_id}", fence.workflow_id)
        } else {
            req.child_workflow_id
        };
        let child = NewWorkflow {
            workflow_id: child_id,
            workflow_name: req.workflow_name,
            queue_name,
            app_version: None,
            input: req.input,
            parent_workflow_id: Some(fence.workflow_id.clone()),
            deadline_at: None,
            priority: 0,
            assign: None,
            trace: req.trace,
            tags,
            ..Default::default()
        };
        let labels =
            crate::telemetry::metrics::WorkflowLabels::of(self.namespace(), &child.workflow_name, &child.queue_name);
        let (id, created) = super::recorded::start_child(&*self.store, &fence, step_id, child, self.now()).await?;
        if created {
            crate::telemetry::metrics::metrics()
                .workflows_started
                .get_or_create(&labels)
                .inc();
        }
        self.work_enqueued();
        Ok(id)
    }

    /// `None` while the child runs (the parent is woken when it finishes).
    pub async fn await_child(
        &self,
        session: &Arc<WorkerSession>,
        fence: Fence,
        step_id: u32,
        child_id: String,
    ) -> EngineResult<Option<ChildOutcome>> {
        self.worker_write(session, &fence, 0).await?;
        validate::name("child_workflow_id", &child_id)?;
        self.check_reach(session, &child_id).await?;
        self.waits
            .children
            .add(child_id.clone(), StepWaiter::new(session, &fence, step_id));
        Ok(super::recorded::await_child(&*self.store, &fence, step_id, &child_id, self.now()).await?)
    }

    /// Cancels a workflow and, with `cascade`, its children and theirs, level by level.
    pub async fn cancel_tree(&self, workflow_id: &str, cascade: bool) -> EngineResult<WorkflowRecord> {
        let root = self.cancel_workflow(workflow_id).await?;
        if cascade {
            let mut level = self.store.children(workflow_id).await?;
            while !level.is_empty() {
                let mut next = Vec::new();
                for id in level {
                    let w = self.cancel_workflow(&id).await?;
                    if w.status == WorkflowStatus::Cancelled {
                        next.extend(self.store.children(&id).await?);
                    }
                }
                level = next;
            }
        }
        Ok(root)
    }
}
