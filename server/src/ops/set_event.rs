//! `SetEvent`: a workflow sets one of its events (a key's latest value, kept with its history),
//! recorded as its step. The workflows parked on the event go back to their queue, and what
//! waits on it here — clients' `GetEvent` calls, workflows' reads — is woken at once.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::changes::Change;
use waymark_store::recorded as journal;
use waymark_store::{Fence, FenceLock, Millis, ParkedOn, Store, StoreResult, SET_EVENT_STEP};

use super::command::{payload_text, take_fence, About, Answer, Command};
use super::compose::{record, settle, End, Tx};
use crate::engine::{events::BUILTIN_STEP_BYTES, validate, Engine, WorkerSession};

impl Command for v1::SetEvent {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let value = payload_text("event value", self.value.as_ref())?;
        // The step records the key ({"key": …}); the value lives with the event.
        let adds = BUILTIN_STEP_BYTES + self.key.len();
        engine.workers.worker_write(session, &fence, adds).await?;
        validate::name("key", &self.key)?;
        validate::payload("event value", &value, engine.config().max_payload_bytes)?;
        set_event(
            engine.store(),
            &fence,
            self.step_id,
            &self.key,
            &value,
            engine.core.now(),
        )
        .await?;
        session.grow_history(&fence.workflow_id, adds);
        engine.messaging.wake_event(&fence.workflow_id, &self.key).await;
        // Readers parked on it are back in their queue now.
        engine.core.work_enqueued();
        Ok(reply::Result::StepRecorded(v1::StepRecorded {}))
    }
}

/// Sets event `key` of the fenced workflow, recorded as its step `step_id`; the workflows
/// parked on the event go back to their queue. A replay changes nothing.
pub(crate) async fn set_event(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: &str,
    now: Millis,
) -> StoreResult<()> {
    let mut tx = store.begin(now).await?;
    let body = set_event_in(&mut tx, fence, step_id, key, value).await;
    settle(tx, body).await
}

async fn set_event_in(tx: Tx<'_, '_>, fence: &Fence, step_id: u32, key: &str, value: &str) -> StoreResult<End<()>> {
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Shared).await? {
        return journal::replay_set_event(&fence.workflow_id, &done).map(End::Release);
    }
    tx.set_event(&fence.workflow_id, key, value, step_id).await?;
    record(tx, fence, step_id, SET_EVENT_STEP, &journal::set_event_output(key)).await?;
    let on = ParkedOn::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    tx.wake_parked(None, &on).await?;
    let change = Change::Event {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    Ok(End::Commit((), vec![change]))
}

#[cfg(test)]
mod tests {
    //! Written, recorded as the workflow's step, answered from the record on replay, fenced,
    //! and refused as non-determinism when another step is recorded at its position.

    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{fence, step, T};

    use super::set_event;
    use crate::ops::testing::{on_both_stores, running};

    on_both_stores!(set_event_keeps_value_history_and_step, set_event_is_fenced);

    async fn set_event_keeps_value_history_and_step(s: Arc<dyn Store>) {
        let s = &*s;
        running(s, "e").await;
        let f = fence("e", 1);
        assert_eq!(s.get_event("e", "status").await.unwrap(), None);
        set_event(s, &f, 0, "status", r#""waiting""#, T + 1).await.unwrap();
        set_event(s, &f, 1, "status", r#""approved""#, T + 2).await.unwrap();
        set_event(s, &f, 2, "other", "1", T + 3).await.unwrap();
        // A replay of a recorded set changes nothing.
        set_event(s, &f, 0, "status", r#""waiting""#, T + 4).await.unwrap();
        assert_eq!(
            s.get_event("e", "status").await.unwrap().as_deref(),
            Some(r#""approved""#)
        );
        // Each set went into the history once, with the step that set it (the replay added none).
        let history: Vec<(String, u32)> = s
            .list_events("e")
            .await
            .unwrap()
            .into_iter()
            .flat_map(|e| e.history)
            .map(|h| (h.value, h.step_id))
            .collect();
        assert_eq!(
            history,
            [
                ("1".to_string(), 2),
                (r#""waiting""#.into(), 0),
                (r#""approved""#.into(), 1)
            ]
        );
        let steps = s.list_steps("e").await.unwrap();
        assert_eq!(
            steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            [SET_EVENT_STEP, SET_EVENT_STEP, SET_EVENT_STEP]
        );
        // Another kind of step at a recorded set is non-determinism.
        s.record_step(&f, step(3, "plain", "1"), T + 6).await.unwrap();
        assert!(matches!(
            set_event(s, &f, 3, "x", "1", T + 7).await,
            Err(StoreError::NonDeterminism { .. })
        ));
    }

    async fn set_event_is_fenced(s: Arc<dyn Store>) {
        let s = &*s;
        running(s, "e").await;
        let e = set_event(s, &fence("e", 9), 0, "k", "1", T).await.unwrap_err();
        assert!(matches!(e, StoreError::StaleEpoch { .. }));
        assert_eq!(s.get_event("e", "k").await.unwrap(), None);
        assert!(s.list_events("e").await.unwrap().is_empty());
    }
}
