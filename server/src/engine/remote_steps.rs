//! Remote steps: a workflow calls a step by name and any worker that registered the name runs
//! it. The call is queued in the store (once per caller position), dispatched attempt by attempt
//! to workers with step credits, retried with backoff, failed when an attempt outlives its
//! timeout, and its result recorded as the caller's step — which wakes the caller, here or (by
//! NOTIFY) on another replica. Also "wait for the first of", which waits on the same things.

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    sync::{Arc, Mutex},
};

use waymark_store::{
    Fence, Millis, NewStepTask, Outcome, StepAttempt, StepClaim, StepFinished, StepPolicy, StepRecord, StoreError,
    TraceContext, WaitFor, WaitTarget,
};

use super::error::permission_denied;
use super::{validate, waits::step_waits::StepWaiter, Engine, EngineError, EngineResult, ToWorker, WorkerSession};

/// Most attempts claimed for one worker in one round trip.
const MAX_BATCH: u32 = 64;
/// Most targets one "wait for the first of" may name.
pub const MAX_TARGETS: usize = 1000;

/// Defaults for calls that do not say.
pub fn default_policy() -> StepPolicy {
    StepPolicy {
        max_attempts: 3,
        initial_backoff_ms: 1_000,
        backoff_coefficient: 2.0,
        max_backoff_ms: 60_000,
        timeout_ms: 5 * 60_000,
    }
}

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

/// What a workflow asks for when it calls a remote step.
pub struct CallRequest {
    pub step_name: String,
    /// JSON text.
    pub input: String,
    pub policy: StepPolicy,
    /// The span the workflow called it from.
    pub trace: Option<TraceContext>,
}

impl Engine {
    /// Calls (or asks again for) a remote step; `None` while it runs — the caller is woken when
    /// its result is recorded.
    pub async fn call_step(
        &self,
        session: &Arc<WorkerSession>,
        fence: Fence,
        step_id: u32,
        req: CallRequest,
    ) -> EngineResult<Option<StepRecord>> {
        self.worker_write(session, &fence, 0).await?;
        validate::name("step_name", &req.step_name)?;
        validate::payload("step input", &req.input, self.config.max_payload_bytes)?;
        validate_policy(&req.policy)?;
        let key = (fence.workflow_id.clone(), step_id);
        self.waits
            .steps
            .add(key.clone(), StepWaiter::new(session, &fence, step_id));
        let task = NewStepTask {
            step_name: req.step_name,
            input: req.input,
            policy: req.policy,
            trace: req.trace,
        };
        let result = self.store.call_step(&fence, step_id, &task, self.now()).await;
        if !matches!(result, Ok(None)) {
            self.waits.steps.forget(&key);
        } else {
            self.work_enqueued();
        }
        Ok(result?)
    }

    /// A worker's result for an attempt it ran.
    pub async fn finish_step(
        &self,
        session: &WorkerSession,
        attempt: StepAttempt,
        outcome: Outcome,
    ) -> EngineResult<()> {
        session.touch(self.now());
        validate::name("workflow_id", &attempt.workflow_id)?;
        if let Outcome::Output(o) = &outcome {
            validate::payload("step output", o, self.config.max_payload_bytes)?;
        }
        let finished = match self.store.finish_step_task(&attempt, outcome, self.now()).await {
            Err(StoreError::StepAttemptStale { .. }) if !session.registration.name_patterns.is_empty() => {
                // Refused either way; a key that could never serve this step is told so.
                let call = self.store.step_call(&attempt.workflow_id, attempt.step_id).await?;
                return Err(match call {
                    Some((name, _)) if !session.registration.reaches(&name) => {
                        permission_denied(format!("this worker's key does not serve step {name:?}"))
                    }
                    _ => StoreError::StepAttemptStale {
                        workflow_id: attempt.workflow_id,
                        step_id: attempt.step_id,
                        attempt: attempt.attempt,
                    }
                    .into(),
                });
            }
            other => other?,
        };
        match finished {
            StepFinished::Recorded => {
                tracing::debug!(workflow_id = %attempt.workflow_id, step_id = attempt.step_id, "remote step recorded");
                self.step_recorded(&attempt.workflow_id, attempt.step_id).await;
            }
            StepFinished::Retrying { at } => {
                tracing::debug!(workflow_id = %attempt.workflow_id, step_id = attempt.step_id, attempt = attempt.attempt, "remote step failed; retrying");
                self.dispatch.retry_times.add(at);
                self.work_enqueued();
            }
        }
        Ok(())
    }

    /// A step was recorded (here or on another replica): wake whoever waits on it here. Its
    /// caller may also have been parked on it, and is back in its queue.
    pub(crate) async fn step_recorded(&self, workflow_id: &str, step_id: u32) {
        if self.waits.steps.wake(&(workflow_id.to_string(), step_id)).await > 0 {
            self.counters.wakeup("step");
        }
        self.work_enqueued();
    }

    /// Waits for the first (or all) of `targets`; `None` until decided (the workflow is woken
    /// each time one finishes).
    pub async fn select(
        &self,
        session: &Arc<WorkerSession>,
        fence: Fence,
        step_id: u32,
        targets: Vec<WaitTarget>,
        mode: WaitFor,
    ) -> EngineResult<Option<u32>> {
        self.worker_write(session, &fence, 0).await?;
        if targets.is_empty() || targets.len() > MAX_TARGETS {
            return Err(EngineError::invalid(format!(
                "a wait for the first of needs between 1 and {MAX_TARGETS} targets"
            )));
        }
        for t in &targets {
            match t {
                WaitTarget::Workflow(id) => {
                    validate::name("target workflow_id", id)?;
                    self.check_reach(session, id).await?;
                    self.waits
                        .children
                        .add(id.clone(), StepWaiter::new(session, &fence, step_id));
                }
                WaitTarget::Step(s) => self.waits.steps.add(
                    (fence.workflow_id.clone(), *s),
                    StepWaiter::new(session, &fence, step_id),
                ),
            }
        }
        Ok(self
            .store
            .select_step(&fence, step_id, &targets, mode, self.now())
            .await?)
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
        let claimed = match self.store.claim_step_tasks(&claim, now).await {
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
        match self.store.expire_step_tasks(self.now()).await {
            Ok(expired) => {
                for at in expired.retrying {
                    self.dispatch.retry_times.add(at);
                }
                for (workflow_id, step_id) in expired.recorded {
                    tracing::info!(%workflow_id, step_id, "remote step out of attempts after a timeout");
                    self.step_recorded(&workflow_id, step_id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "remote step timeout pass failed"),
        }
    }
}

fn validate_policy(p: &StepPolicy) -> EngineResult<()> {
    const DAY_MS: Millis = 24 * 3600 * 1000;
    if !(1..=1000).contains(&p.max_attempts) {
        return Err(EngineError::invalid("retry max_attempts must be between 1 and 1000"));
    }
    if !(1.0..=100.0).contains(&p.backoff_coefficient) {
        return Err(EngineError::invalid(
            "retry backoff_coefficient must be between 1.0 and 100.0",
        ));
    }
    if !(0..=DAY_MS).contains(&p.initial_backoff_ms) || !(0..=DAY_MS).contains(&p.max_backoff_ms) {
        return Err(EngineError::invalid("retry intervals must be between 0 and 24 hours"));
    }
    if !(1..=7 * DAY_MS).contains(&p.timeout_ms) {
        return Err(EngineError::invalid(
            "a remote step's timeout must be between 1 ms and 7 days",
        ));
    }
    Ok(())
}
