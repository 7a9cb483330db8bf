//! `StartChild`: a workflow starts a child workflow, recorded as its step in the same
//! transaction as the child's row, so a crash between the two cannot leave an orphan or a
//! second child. A replay joins the recorded child.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::changes::Change;
use waymark_store::recorded as journal;
use waymark_store::{Fence, FenceLock, Millis, NewWorkflow, Store, StoreError, StoreResult, START_CHILD_STEP};

use super::command::{payload_text, take_fence, About, Answer, Command};
use super::compose::{record, settle, End, Tx};
use crate::engine::{
    tags, validate, workflows::DEFAULT_QUEUE, Engine, EngineError, EngineResult, ErrorCode, WorkerSession,
};
use crate::telemetry::metrics;
use crate::wire::convert;

impl Command for v1::StartChild {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let input = payload_text("child input", self.input.as_ref())?;
        let trace = convert::trace_from_wire(self.trace_context.as_ref());
        let step_id = self.step_id;
        let child_workflow_id = run(engine, session, fence, step_id, self, input, trace).await?;
        Ok(reply::Result::ChildStarted(v1::ChildStarted { child_workflow_id }))
    }
}

/// Checks the request against the worker's key and the catalog, derives the child's queue,
/// tags and id from its parent where the request leaves them out, and starts it.
async fn run(
    engine: &Engine,
    session: &WorkerSession,
    fence: Fence,
    step_id: u32,
    req: v1::StartChild,
    input: String,
    trace: Option<waymark_store::TraceContext>,
) -> EngineResult<String> {
    engine.workers.worker_write(session, &fence, 0).await?;
    validate::name("workflow_name", &req.workflow_name)?;
    if !session.registration.reaches(&req.workflow_name) {
        return Err(crate::engine::worker::out_of_reach(&req.workflow_name));
    }
    validate::optional_name("child_workflow_id", &req.child_workflow_id)?;
    validate::optional_name("queue_name", &req.queue_name)?;
    let own_tags: waymark_store::Tags = req.tags.into_iter().collect();
    tags::validate("child tags", &own_tags)?;
    // The parent's queue (when none is named, as the contract says) and tags (which the child
    // inherits).
    let parent = engine.store().get_workflow(&fence.workflow_id).await?;
    let tags = tags::inherit(parent.as_ref().map_or(&Default::default(), |p| &p.tags), own_tags)?;
    let queue_name = if req.queue_name.is_empty() {
        parent
            .map(|p| p.queue_name)
            .unwrap_or_else(|| DEFAULT_QUEUE.to_string())
    } else {
        engine.queues.check(&req.queue_name).await?;
        req.queue_name
    };
    validate::payload("child input", &input, engine.config().max_payload_bytes)?;
    if !engine.workflows.is_known_name(&req.workflow_name).await? {
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
        input,
        parent_workflow_id: Some(fence.workflow_id.clone()),
        deadline_at: None,
        priority: 0,
        assign: None,
        trace,
        tags,
        ..Default::default()
    };
    let labels = metrics::WorkflowLabels::of(engine.namespace(), &child.workflow_name, &child.queue_name);
    let (name, queue) = (child.workflow_name.clone(), child.queue_name.clone());
    let (id, created) = start_child(engine.store(), &fence, step_id, child, engine.core.now()).await?;
    if created {
        metrics::metrics().workflows_started.get_or_create(&labels).inc();
        // Only the workers here that could run the child claim (a child is pinned to no version).
        engine.core.work.enqueued_on(Some(&name), &queue, "");
    }
    Ok(id)
}

/// Starts a child of the fenced workflow, recorded as its step in the same transaction as the
/// child's row. A replay returns the recorded child id. A child id taken by another workflow
/// name is `WorkflowIdConflict`; taken by the same name, it is joined. Also says whether the
/// child was created by this call.
pub(crate) async fn start_child(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    child: NewWorkflow,
    now: Millis,
) -> StoreResult<(String, bool)> {
    let mut tx = store.begin(now).await?;
    let body = start_child_in(&mut tx, fence, step_id, child).await;
    settle(tx, body).await
}

async fn start_child_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    child: NewWorkflow,
) -> StoreResult<End<(String, bool)>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        let id = journal::replay_start_child(&fence.workflow_id, &done)?;
        return Ok(End::Release((id, false)));
    }
    let inserted = tx.insert_child(&fence.workflow_id, &child).await?;
    let existing = tx
        .workflow(&child.workflow_id)
        .await?
        .ok_or_else(|| StoreError::WorkflowNotFound(child.workflow_id.clone()))?;
    if existing.workflow_name != child.workflow_name {
        return Err(StoreError::WorkflowIdConflict {
            workflow_id: child.workflow_id,
            existing_name: existing.workflow_name,
        });
    }
    let output = journal::child_started_output(&child.workflow_id);
    record(tx, fence, step_id, START_CHILD_STEP, &output).await?;
    let changes = if inserted {
        vec![Change::enqueued_on(&child.queue_name)]
    } else {
        Vec::new()
    };
    Ok(End::Commit((child.workflow_id, inserted), changes))
}

#[cfg(test)]
pub(crate) mod tests {
    //! Started with its record, joined on replay, refused when its id names another kind of
    //! workflow, fenced.

    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{claim_one, fence, get, session, start, wf, T};

    use super::start_child;
    use crate::ops::testing::on_both_stores;

    on_both_stores!(children_start_with_their_record_and_join_on_replay);

    pub(crate) fn child(id: &str) -> NewWorkflow {
        NewWorkflow {
            input: "7".into(),
            ..wf(id, "C", "q")
        }
    }

    /// Starts workflow `parent` (claimed by worker `A`, epoch 1) and its child `parent/0`.
    pub(crate) async fn parent_and_child(s: &dyn Store) -> Fence {
        start(s, wf("parent", "P", "q"), T).await;
        s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
        claim_one(s, "A", "P", "parent", T).await;
        let f = fence("parent", 1);
        assert_eq!(
            start_child(s, &f, 0, child("parent/0"), T + 1).await.unwrap(),
            ("parent/0".to_string(), true)
        );
        f
    }

    async fn children_start_with_their_record_and_join_on_replay(s: Arc<dyn Store>) {
        let s = &*s;
        let f = parent_and_child(s).await;
        let c = get(s, "parent/0").await;
        assert_eq!(
            (c.status, c.parent_workflow_id.as_deref(), c.input.as_str()),
            (WorkflowStatus::Enqueued, Some("parent"), "7")
        );
        // A replay re-joins the recorded child, even when it would derive another id.
        assert_eq!(
            start_child(s, &f, 0, child("parent/other"), T + 2).await.unwrap(),
            ("parent/0".to_string(), false)
        );
        assert!(
            s.get_workflow("parent/other").await.unwrap().is_none(),
            "no second child"
        );
        assert_eq!(s.children("parent").await.unwrap(), ["parent/0"]);
        // An id used by another kind of workflow is a conflict, and nothing is recorded.
        let taken = NewWorkflow {
            workflow_name: "Other".into(),
            ..child("parent")
        };
        assert!(matches!(
            start_child(s, &f, 1, taken, T + 3).await,
            Err(StoreError::WorkflowIdConflict { .. })
        ));
        assert_eq!(s.list_steps("parent").await.unwrap().len(), 1);
        // Fenced like every step.
        assert!(matches!(
            start_child(s, &fence("parent", 9), 3, child("x"), T).await,
            Err(StoreError::StaleEpoch { .. })
        ));
    }
}
