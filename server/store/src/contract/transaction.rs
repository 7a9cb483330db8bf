//! One transaction, for the durable operations the engine composes out of table operations:
//! check the fence, write what the operation writes, record it as the workflow's step, wake
//! what waited for it — all in one commit. Hot paths with a faster shape of their own (step
//! records and completions, group-committed; claims) stay whole operations of their concern's
//! trait.

use async_trait::async_trait;

use crate::changes::Change;
use crate::*;

/// How the fence holds the workflow's row until the transaction ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceLock {
    /// Other fenced writes of the workflow go on beside this one; an epoch change waits.
    Shared,
    /// Fenced writes of the workflow take turns: for a write that reads what the last one
    /// wrote (a stream append hands out `MAX + 1`; a receive takes the oldest unread message).
    Alone,
}

/// A transaction on the store, at the time `now` it was begun with. Nothing is written until
/// [`Transaction::commit`]. End one that keeps nothing with [`Transaction::rollback`]: dropped,
/// it rolls back too, but only when its connection is next taken care of, and until then the
/// rows it holds stay locked (a claim passes a locked workflow by).
#[async_trait]
pub trait Transaction: Send {
    /// Checks the fence — the workflow is PENDING at the fence's epoch, else `StaleEpoch`,
    /// `NotRunning` or `WorkflowNotFound` — holding its row until the transaction ends, and
    /// returns the step already recorded at `step_id`, if any (the call is a replay).
    async fn fence(&mut self, fence: &Fence, step_id: u32, lock: FenceLock) -> StoreResult<Option<StepRecord>>;

    /// Records a built-in step of the fenced workflow: `output` (JSON text), one attempt.
    /// False when a concurrent request for the same step recorded it first.
    async fn record_step(&mut self, fence: &Fence, step_id: u32, name: &str, output: &str) -> StoreResult<bool>;

    /// The workflow as stored.
    async fn workflow(&mut self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>>;

    /// Sets an event's current value and adds it to the event's history, as set by step
    /// `step_id` of its workflow.
    async fn set_event(&mut self, workflow_id: &str, key: &str, value: &str, step_id: u32) -> StoreResult<()>;

    /// An event's current value.
    async fn event(&mut self, workflow_id: &str, key: &str) -> StoreResult<Option<String>>;

    /// Appends `value` to a workflow's stream, or with `None` its close marker; returns the
    /// entry's offset. Under a [`FenceLock::Alone`] fence, so two appends cannot take one
    /// offset.
    async fn append_stream(&mut self, workflow_id: &str, key: &str, value: Option<&str>) -> StoreResult<u64>;

    /// Inserts `child` ENQUEUED as a child of `parent` (its deadline capped by the parent's),
    /// unless its id is taken; true when it was inserted.
    async fn insert_child(&mut self, parent: &str, child: &NewWorkflow) -> StoreResult<bool>;

    /// Sends a message: puts it in its receiver's inbox (refused with `WorkflowNotFound`, with
    /// `NotRunning` for a receiver that ended with an outcome, with `InboxFull` past the
    /// message's `max_unread`; a resend under its idempotency key is answered as the duplicate
    /// it is), and puts a receiver parked on its topic back in its queue.
    async fn send(&mut self, message: &NewMessage) -> StoreResult<Sent>;

    /// Takes the oldest unread message on `topic` of a workflow's inbox, marking it read by
    /// step `step_id`; concurrent takers never take the same one (the row is locked and
    /// skipped). `None` when there is none to take.
    async fn take_message(&mut self, workflow_id: &str, topic: &str, step_id: u32) -> StoreResult<Option<String>>;

    /// Puts back in its queue every workflow parked on `on` (for a message or a step result:
    /// only `workflow_id`, the one that waits); returns how many.
    async fn wake_parked(&mut self, workflow_id: Option<&str>, on: &ParkedOn) -> StoreResult<u64>;

    /// Commits, then tells the other replicas of `changes`.
    async fn commit(self: Box<Self>, changes: Vec<Change>) -> StoreResult<()>;

    /// Ends the transaction, keeping nothing, and lets go of its locks now.
    async fn rollback(self: Box<Self>);
}
