//! Remote steps, the engine's part: dispatching due attempts to workers with step credits,
//! failing attempts that outlive their timeout, and waking callers when a result is recorded
//! (here or, by NOTIFY, on another replica). The calls themselves are operations of the worker
//! stream: `ops/call_step.rs`, `ops/step_result.rs`, `ops/select.rs`.

use std::{cmp::Reverse, collections::BinaryHeap, sync::Mutex};

use waymark_store::{Millis, StepClaim};

use super::{Engine, ToWorker, WorkerSession};

/// Most attempts claimed for one worker in one round trip.
const MAX_BATCH: u32 = 64;
/// Retry times this replica knows of: the dispatcher wakes for the earliest.
#[derive(Default)]
pub struct RetryTimes {
    due: Mutex<BinaryHeap<Reverse<Millis>>>,
}

impl RetryTimes {
    pub(crate) fn add(&self, at: Millis) {
        self.due.lock().unwrap().push(Reverse(at));
    }

    /// The earliest time still ahead of `now`, dropping those that have come.
    pub(crate) fn next_after(&self, now: Millis) -> Option<Millis> {
        let mut due = self.due.lock().unwrap();
        while due.peek().is_some_and(|Reverse(t)| *t <= now) {
            due.pop();
        }
        due.peek().map(|Reverse(t)| *t)
    }
}

impl Engine {
    /// A failed remote step attempt is due again at `at`: the dispatcher wakes for it.
    pub(crate) fn retry_at(&self, at: Millis) {
        self.dispatch.retry_times.add(at);
        self.core.work_enqueued();
    }

    /// Claims due attempts for one worker stream that runs remote steps and sends them.
    pub(crate) async fn dispatch_steps(&self, session: &WorkerSession, now: Millis) {
        let names = &session.registration.step_names;
        if names.is_empty() {
            return;
        }
        if session.step_credits() == 0 || !session.take_step_claim_wanted() {
            return;
        }
        let limit = session.reserve_steps(MAX_BATCH);
        if limit == 0 {
            session.want_step_claims();
            return;
        }
        let claim = StepClaim {
            worker_id: session.registration.worker_id.clone(),
            session_id: session.lease_id.clone(),
            step_names: names.clone(),
            limit,
        };
        let claimed = match self.core.store.claim_step_tasks(&claim, now).await {
            Ok(c) => c,
            Err(e) => {
                session.grant_steps(limit);
                session.want_step_claims();
                tracing::warn!(error = %e, "step claim failed; retrying at the next pass");
                return;
            }
        };
        session.grant_steps(limit - claimed.len() as u32);
        if claimed.len() as u32 == limit {
            session.want_step_claims();
        }
        for t in claimed {
            tracing::debug!(workflow_id = %t.workflow_id, step_id = t.step_id, attempt = t.attempt, "dispatch step");
            // If the stream is gone the attempt times out or is failed when its lease ends.
            session.send(ToWorker::DispatchStep(Box::new(t))).await;
        }
    }

    /// Fails attempts past their timeout or whose worker is gone; wakes the callers whose
    /// result that recorded.
    pub(crate) async fn expire_steps(&self) {
        match self.core.store.expire_step_tasks(self.core.now()).await {
            Ok(expired) => {
                for at in expired.retrying {
                    self.dispatch.retry_times.add(at);
                }
                for (workflow_id, step_id) in expired.recorded {
                    tracing::info!(%workflow_id, step_id, "remote step out of attempts after a timeout");
                    self.waits.step_recorded(&workflow_id, step_id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "remote step timeout pass failed"),
        }
    }
}
