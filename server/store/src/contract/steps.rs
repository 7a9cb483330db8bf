//! A workflow's recorded steps and its completion: the fenced writes of the hot path.

use async_trait::async_trait;

use crate::*;

/// A recorded step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub step_id: u32,
    pub name: String,
    pub outcome: Outcome,
    pub attempts: u32,
    pub epoch: u64,
    pub recorded_at: Millis,
    /// When it began, when known (see [`NewStep::started_at`]; a remote step: its call).
    pub started_at: Option<Millis>,
}

/// A step to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    pub step_id: u32,
    pub name: String,
    pub outcome: Outcome,
    pub attempts: u32,
    /// When it began (the checkpoint's time less the duration its worker reported); `None`
    /// when not known. Only shown: a replay never reads it, and a second report of the same
    /// step that differs only here matches the first.
    pub started_at: Option<Millis>,
}

/// Result of recording a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Written now.
    New,
    /// The same step with the same outcome was already recorded (a retried request).
    AlreadyRecorded,
}

/// The outcome that stands after a completion.
#[derive(Debug, Clone)]
pub struct Completed {
    pub workflow: WorkflowRecord,
    /// True when the workflow had already finished and this completion adopted that outcome.
    pub adopted: bool,
}

/// Records each step, then completes: the way to `complete_with_steps` one write at a time.
pub(crate) async fn record_then_complete<S: Steps + ?Sized>(
    store: &S,
    fence: &Fence,
    steps: Vec<NewStep>,
    outcome: Outcome,
    now: Millis,
) -> StoreResult<Completed> {
    for step in steps {
        match store.record_step(fence, step, now).await {
            Ok(_) => {}
            // Finished already (a retried completion): the completion below adopts its outcome.
            Err(StoreError::NotRunning { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    store.complete_workflow(fence, outcome, now).await
}

/// A workflow's recorded steps and its completion: the fenced writes of the hot path.
#[async_trait]
pub trait Steps: Send + Sync {
    /// Recorded steps in order. `WorkflowNotFound` when the workflow does not exist.
    async fn list_steps(&self, workflow_id: &str) -> StoreResult<Vec<StepRecord>>;

    /// Checkpoint a step, fenced: refused unless the workflow is PENDING at exactly this epoch.
    async fn record_step(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded>;

    /// Finish a workflow, status-gated: when it is already terminal the recorded outcome stands
    /// and is returned (`adopted`); otherwise the write is fenced like `record_step`.
    async fn complete_workflow(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Completed>;

    /// Records `steps` as `record_step` would (fenced; one already recorded the same way is
    /// fine) and then completes like `complete_workflow`, in one transaction where it can; one
    /// by one is safe too (`record_then_complete`): a crash in between leaves the steps
    /// recorded and the workflow to be recovered and replayed.
    async fn complete_with_steps(
        &self,
        fence: &Fence,
        steps: Vec<NewStep>,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<Completed>;

    /// Which of these (workflow, step) positions are recorded.
    async fn steps_recorded(&self, keys: &[(String, u32)]) -> StoreResult<Vec<(String, u32)>>;
}
