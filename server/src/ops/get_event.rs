//! `GetEvent` (a `GetEventStep` on the wire): a workflow reads another workflow's event,
//! waiting until it is set or its deadline passes; the outcome (the value, or a timeout) is
//! recorded as the reader's step, so a replay reads what the first run read. While it waits,
//! nothing is written: the reader's worker is woken when the event is set here, or by the wait
//! poller when another replica sets it.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::recorded as journal;
use waymark_store::{Fence, FenceLock, Millis, Received, Store, StoreError, StoreResult, GET_EVENT_STEP};

use super::command::{take_fence, wait_outcome, About, Answer, Command};
use super::compose::{record, settle, End, Tx};
use crate::engine::{validate, waits::step_waits::StepWaiter, Engine, EngineResult, WorkerSession};

impl Command for v1::GetEventStep {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let received = run(
            engine,
            session,
            fence,
            self.step_id,
            &self.target_workflow_id,
            &self.key,
            self.deadline_ms,
        )
        .await?;
        let (outcome, value) = wait_outcome(received);
        Ok(reply::Result::EventResult(v1::EventResult {
            outcome: outcome as i32,
            value,
            server_now_ms: engine.now_ms(),
        }))
    }
}

/// The read of `target`'s event `key` for the worker's workflow, as its step `step_id`. The
/// wait is in place before the read, so a set between the two still wakes the reader.
pub(crate) async fn run(
    engine: &Engine,
    session: &Arc<WorkerSession>,
    fence: Fence,
    step_id: u32,
    target: &str,
    key: &str,
    deadline: Millis,
) -> EngineResult<Received> {
    let now = engine.core.now();
    engine.workers.worker_write(session, &fence, 0).await?;
    validate::name("target_workflow_id", target)?;
    validate::name("key", key)?;
    engine.workers.check_reach(session, target).await?;
    validate::wait_deadline("get_event", deadline, now)?;
    engine
        .waits
        .events
        .add_step(target, key, StepWaiter::new(session, &fence, step_id));
    let got = get_event(engine.store(), &fence, step_id, target, key, deadline, now).await?;
    if let Received::Delivered(value) = &got {
        // Known only now: the next write finds the cap if this passed it.
        session.grow_history(&fence.workflow_id, value.len());
    }
    Ok(got)
}

/// Reads another workflow's event for the fenced workflow, recording the outcome as its step:
/// `Delivered` when set, `TimedOut` past `deadline`, else `Waiting` (nothing written). A
/// recorded step is answered from the record.
pub(crate) async fn get_event(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    target: &str,
    key: &str,
    deadline: Millis,
    now: Millis,
) -> StoreResult<Received> {
    let mut tx = store.begin(now).await?;
    let body = get_event_in(&mut tx, fence, step_id, target, key, now >= deadline).await;
    settle(tx, body).await
}

async fn get_event_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    target: &str,
    key: &str,
    past_deadline: bool,
) -> StoreResult<End<Received>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_get_event(&fence.workflow_id, &done).map(End::Release);
    }
    if tx.workflow(target).await?.is_none() {
        return Err(StoreError::WorkflowNotFound(target.to_string()));
    }
    let received = match tx.event(target, key).await? {
        Some(value) => Received::Delivered(value),
        None if past_deadline => Received::TimedOut,
        None => return Ok(End::Release(Received::Waiting)),
    };
    let output = match &received {
        Received::Delivered(value) => journal::get_event_output(Some(value)),
        _ => journal::get_event_output(None),
    };
    record(tx, fence, step_id, GET_EVENT_STEP, &output).await?;
    Ok(End::Commit(received, Vec::new()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{fence, T};

    use super::get_event;
    use crate::ops::set_event::set_event;
    use crate::ops::testing::{on_both_stores, running};

    on_both_stores!(get_event_step_waits_then_records);

    async fn get_event_step_waits_then_records(s: Arc<dyn Store>) {
        let s = &*s;
        running(s, "reader").await;
        running(s, "writer").await;
        let r = fence("reader", 1);
        let later = T + 60_000;
        assert_eq!(
            get_event(s, &r, 0, "writer", "k", later, T + 1).await.unwrap(),
            Received::Waiting
        );
        assert!(s.events_set(&[("writer".into(), "k".into())]).await.unwrap().is_empty());
        set_event(s, &fence("writer", 1), 0, "k", r#"{"v":1}"#, T + 2)
            .await
            .unwrap();
        assert_eq!(
            s.events_set(&[("writer".into(), "k".into()), ("writer".into(), "z".into())])
                .await
                .unwrap(),
            [("writer".to_string(), "k".to_string())]
        );
        assert_eq!(
            get_event(s, &r, 0, "writer", "k", later, T + 3).await.unwrap(),
            Received::Delivered(r#"{"v":1}"#.into())
        );
        // Recorded: a later set does not change what the replay reads.
        set_event(s, &fence("writer", 1), 1, "k", "2", T + 4).await.unwrap();
        assert_eq!(
            get_event(s, &r, 0, "writer", "k", later, T + 5).await.unwrap(),
            Received::Delivered(r#"{"v":1}"#.into())
        );
        // Timeouts are recorded too.
        assert_eq!(
            get_event(s, &r, 1, "writer", "never", T + 6, T + 6).await.unwrap(),
            Received::TimedOut
        );
        assert_eq!(
            get_event(s, &r, 1, "writer", "never", later, T + 7).await.unwrap(),
            Received::TimedOut
        );
        assert!(matches!(
            get_event(s, &r, 2, "nobody", "k", later, T + 8).await,
            Err(StoreError::WorkflowNotFound(_))
        ));
    }
}
