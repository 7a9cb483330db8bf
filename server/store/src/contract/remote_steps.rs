//! Remote steps: a workflow's call queued for another worker, its attempts, and select over waits.

use async_trait::async_trait;

use crate::*;

/// Remote steps: a workflow's call queued for another worker, its attempts, and select over waits.
#[async_trait]
pub trait RemoteSteps: Send + Sync {
    /// Calls remote step `task` as step `step_id` of the fenced workflow: returns the recorded
    /// result when there is one; otherwise makes sure the call is queued (once, however often it
    /// is asked) and returns `None`. A different step at that position is `NonDeterminism`.
    async fn call_step(
        &self,
        fence: &Fence,
        step_id: u32,
        task: &NewStepTask,
        now: Millis,
    ) -> StoreResult<Option<StepRecord>>;

    /// The name and current attempt (0 before the first) of the call made as step `step_id` of
    /// `workflow_id`, if there is one.
    async fn step_call(&self, workflow_id: &str, step_id: u32) -> StoreResult<Option<(String, u32)>>;

    /// Takes up to `claim.limit` queued remote step calls that are due and that this worker
    /// runs, oldest first, starting their next attempt. Concurrent claims never take the same
    /// call. Calls of finished workflows are not taken.
    async fn claim_step_tasks(&self, claim: &StepClaim, now: Millis) -> StoreResult<Vec<StepTask>>;

    /// Takes a worker's result for a running attempt: a failure with attempts left goes back to
    /// the queue after its backoff; anything else is recorded as the caller's step, and a
    /// caller parked on it goes back to its queue. `StepAttemptStale` when the attempt is not
    /// the one running.
    async fn finish_step_task(&self, attempt: &StepAttempt, outcome: Outcome, now: Millis)
        -> StoreResult<StepFinished>;

    /// Fails the running attempts past their start-to-close timeout, or whose worker stream's
    /// lease ended, as if they had reported a failure; drops the calls of finished workflows.
    async fn expire_step_tasks(&self, now: Millis) -> StoreResult<ExpiredSteps>;

    /// Waits for the first (or all) of `targets`: once decided, records the index of the one
    /// that finished first (for all: last) as step `step_id` of the fenced workflow and returns
    /// it; `None` until then. A recorded step is answered from the record.
    async fn select_step(
        &self,
        fence: &Fence,
        step_id: u32,
        targets: &[WaitTarget],
        mode: WaitFor,
        now: Millis,
    ) -> StoreResult<Option<u32>>;
}
