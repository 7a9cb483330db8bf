//! `AwaitChild`: a workflow waits for a child it started to finish; the child's outcome is
//! recorded as the parent's step, so a replay sees the same outcome. While the child runs
//! nothing is written, and the parent's worker is woken when the child finishes.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::recorded as journal;
use waymark_store::{ChildOutcome, Fence, FenceLock, Millis, Store, StoreError, StoreResult, AWAIT_CHILD_STEP};

use super::command::{take_fence, About, Answer, Command};
use super::compose::{record, settle, End, Tx};
use crate::engine::{validate, waits::step_waits::StepWaiter, Engine, EngineResult, WorkerSession};
use crate::wire::convert;

impl Command for v1::AwaitChild {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        use v1::recv_result::Outcome as O;
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let result = match run(engine, session, fence, self.step_id, self.child_workflow_id).await? {
            None => v1::ChildResult {
                outcome: O::Waiting as i32,
                ..Default::default()
            },
            Some(done) => v1::ChildResult {
                outcome: O::Delivered as i32,
                status: convert::status_to_wire(done.status) as i32,
                output: done.output.as_deref().and_then(convert::payload),
                failure: done.failure.as_ref().map(convert::failure_to_wire),
            },
        };
        Ok(reply::Result::ChildResult(result))
    }
}

/// The child's outcome once it has finished, recorded; `None` while it runs (the parent is
/// woken when it finishes: the wait is in place before the read).
pub(crate) async fn run(
    engine: &Engine,
    session: &Arc<WorkerSession>,
    fence: Fence,
    step_id: u32,
    child_id: String,
) -> EngineResult<Option<ChildOutcome>> {
    engine.workers.worker_write(session, &fence, 0).await?;
    validate::name("child_workflow_id", &child_id)?;
    engine.workers.check_reach(session, &child_id).await?;
    engine
        .waits
        .children
        .add(child_id.clone(), StepWaiter::new(session, &fence, step_id));
    Ok(await_child(engine.store(), &fence, step_id, &child_id, engine.core.now()).await?)
}

/// If `child_id` has finished, records how as step `step_id` of the fenced workflow and
/// returns it; `None` while it runs. A recorded step is answered from the record.
pub(crate) async fn await_child(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    child_id: &str,
    now: Millis,
) -> StoreResult<Option<ChildOutcome>> {
    let mut tx = store.begin(now).await?;
    let body = await_child_in(&mut tx, fence, step_id, child_id).await;
    settle(tx, body).await
}

async fn await_child_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    child_id: &str,
) -> StoreResult<End<Option<ChildOutcome>>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_await_child(&fence.workflow_id, &done).map(|o| End::Release(Some(o)));
    }
    let child = tx
        .workflow(child_id)
        .await?
        .ok_or_else(|| StoreError::WorkflowNotFound(child_id.to_string()))?;
    if !child.status.is_terminal() {
        return Ok(End::Release(None));
    }
    let outcome = journal::child_outcome(&child);
    let output = journal::await_child_output(&outcome);
    record(tx, fence, step_id, AWAIT_CHILD_STEP, &output).await?;
    Ok(End::Commit(Some(outcome), Vec::new()))
}

#[cfg(test)]
mod tests {
    //! Nothing while the child runs, its outcome once it has finished, the same outcome on
    //! replay; unknown children are not found, and the read is fenced.

    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{claim_one, fence, T};

    use super::await_child;
    use crate::ops::start_child::tests::parent_and_child;
    use crate::ops::testing::on_both_stores;

    on_both_stores!(a_child_is_awaited_and_its_outcome_recorded);

    async fn a_child_is_awaited_and_its_outcome_recorded(s: Arc<dyn Store>) {
        let s = &*s;
        let f = parent_and_child(s).await;
        assert_eq!(await_child(s, &f, 1, "parent/0", T + 4).await.unwrap(), None);
        assert!(s.finished_among(&["parent/0".into()]).await.unwrap().is_empty());
        claim_one(s, "A", "C", "parent/0", T + 5).await;
        s.complete_workflow(&fence("parent/0", 1), Outcome::Output("49".into()), T + 6)
            .await
            .unwrap();
        assert_eq!(
            s.finished_among(&["parent/0".into(), "parent".into()]).await.unwrap(),
            ["parent/0"]
        );
        let done = ChildOutcome {
            status: WorkflowStatus::Success,
            output: Some("49".into()),
            failure: None,
        };
        assert_eq!(
            await_child(s, &f, 1, "parent/0", T + 7).await.unwrap(),
            Some(done.clone())
        );
        assert_eq!(await_child(s, &f, 1, "parent/0", T + 8).await.unwrap(), Some(done));
        assert!(matches!(
            await_child(s, &f, 2, "nobody", T + 9).await,
            Err(StoreError::WorkflowNotFound(_))
        ));
        assert!(matches!(
            await_child(s, &fence("parent", 9), 3, "parent/0", T).await,
            Err(StoreError::StaleEpoch { .. })
        ));
    }
}
