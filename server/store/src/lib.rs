//! The storage contract: everything the engine asks of a database, in the engine's own terms.
//!
//! No driver types and no SQL cross this boundary. Two implementations live beside it —
//! [`sqlite::SqliteStore`] (the embedded default) and [`postgres::PostgresStore`] (production,
//! shared by any number of server replicas) — and one conformance suite ([`conformance`]) runs
//! the same cases against both.
//!
//! Time is passed in by the caller as milliseconds since the Unix epoch, so the engine's clock
//! can be injected and every time-based decision (lease expiry, recovery) tested without waiting.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub mod admission;
mod batch;
pub mod changes;
#[doc(hidden)]
pub mod conformance;
mod messaging;
pub mod postgres;
pub mod queues;
mod remote;
mod rows;
pub mod schedules;
pub mod sqlite;

pub use remote::{
    ExpiredSteps, NewStepTask, StepAttempt, StepClaim, StepFinished, StepPolicy, StepTask, WaitFor, WaitTarget,
    SELECT_STEP, STEP_TIMED_OUT, WAIT_ALL_STEP,
};

pub use queues::{QueueLimits, QueueRecord, QueueUpdate, RateLimit, DEFAULT_QUEUE};
pub use schedules::{ScheduleFire, ScheduleRecord, ScheduleSpec, ScheduleState};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

/// Lifecycle of a workflow, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum WorkflowStatus {
    Enqueued,
    Delayed,
    Pending,
    Success,
    Error,
    Cancelled,
    MaxRecoveryAttemptsExceeded,
}

impl WorkflowStatus {
    pub const ALL: [WorkflowStatus; 7] = [
        WorkflowStatus::Enqueued,
        WorkflowStatus::Delayed,
        WorkflowStatus::Pending,
        WorkflowStatus::Success,
        WorkflowStatus::Error,
        WorkflowStatus::Cancelled,
        WorkflowStatus::MaxRecoveryAttemptsExceeded,
    ];

    /// The name stored in the database and shown to operators.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowStatus::Enqueued => "ENQUEUED",
            WorkflowStatus::Delayed => "DELAYED",
            WorkflowStatus::Pending => "PENDING",
            WorkflowStatus::Success => "SUCCESS",
            WorkflowStatus::Error => "ERROR",
            WorkflowStatus::Cancelled => "CANCELLED",
            WorkflowStatus::MaxRecoveryAttemptsExceeded => "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
        }
    }

    pub fn parse(s: &str) -> Option<WorkflowStatus> {
        WorkflowStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// Ended with an outcome (SUCCESS or ERROR): nothing can make it run again.
    pub fn has_outcome(self) -> bool {
        matches!(self, WorkflowStatus::Success | WorkflowStatus::Error)
    }

    /// Finished for good (until an operator resumes it).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Success
                | WorkflowStatus::Error
                | WorkflowStatus::Cancelled
                | WorkflowStatus::MaxRecoveryAttemptsExceeded
        )
    }
}

/// Why a workflow or step failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: String,
    pub message: String,
}

/// How a workflow or step ended. Values are JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Output(String),
    Failure(Failure),
}

/// A workflow as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowRecord {
    pub workflow_id: String,
    pub workflow_name: String,
    pub status: WorkflowStatus,
    pub queue_name: String,
    pub app_version: Option<String>,
    /// JSON text.
    pub input: String,
    /// Set when terminal with an outcome (SUCCESS or ERROR).
    pub outcome: Option<Outcome>,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub recovery_attempts: u32,
    pub epoch: u64,
    pub worker_id: Option<String>,
    /// The workflow that started this one as a child.
    pub parent_workflow_id: Option<String>,
    /// Cancelled if not finished by then.
    pub deadline_at: Option<Millis>,
    /// Lower is dispatched first within the queue.
    pub priority: i32,
    /// Its partition of the queue ("" for none).
    pub partition_key: String,
    pub dedup_id: Option<String>,
    /// When it was first dispatched.
    pub started_at: Option<Millis>,
    /// While DELAYED: when it is put back in its queue (a delayed start, or a parked wait's
    /// timeout).
    pub wake_at: Option<Millis>,
}

/// What a client asks for when starting a workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewWorkflow {
    pub workflow_id: String,
    pub workflow_name: String,
    pub queue_name: String,
    pub app_version: Option<String>,
    pub input: String,
    /// Set for child workflows.
    pub parent_workflow_id: Option<String>,
    /// Cancel it if it has not finished by then. A child's is capped by its parent's.
    pub deadline_at: Option<Millis>,
    /// Lower is dispatched first within the queue; FIFO within a priority.
    pub priority: i32,
    /// Dispatch it at once to this worker stream (which has room for it): the workflow is
    /// inserted PENDING at epoch 1, saving a separate claim. Ignored when the id already exists,
    /// when it has a delay, and when its queue has limits (a limited queue admits through its
    /// claim only, which the store checks as it inserts).
    pub assign: Option<Assignment>,
    /// The partition of its queue ("" for none). A queue with a partition concurrency runs at
    /// most that many workflows of one key at a time, and takes partitions in turn.
    pub partition_key: String,
    /// Held by at most one live (not yet terminal) workflow of the queue; a second start with
    /// it is refused with [`StoreError::Duplicate`], or gets the holder when `return_existing`.
    pub dedup_id: Option<String>,
    pub return_existing: bool,
    /// Not dispatched before then: inserted DELAYED and put in its queue by the wake pass.
    pub run_at: Option<Millis>,
    /// Collapse onto the not-yet-started workflow with the same name and key (which takes
    /// this input, and this `run_at` capped by its own `until`); `run_at` must be set.
    pub debounce: Option<Debounce>,
}

/// A debounce key and the latest time the workflow it names may be put off to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Debounce {
    pub key: String,
    pub until: Millis,
}

/// A worker stream a new workflow is dispatched to as it is inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub worker_id: String,
    pub session_id: String,
    /// The worker's version; pins the workflow when the start did not choose one.
    pub app_version: String,
}

/// Result of a start: the workflow, and whether this call created it.
#[derive(Debug, Clone)]
pub struct Started {
    pub workflow: WorkflowRecord,
    pub created: bool,
}

/// A recorded step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub step_id: u32,
    pub name: String,
    pub outcome: Outcome,
    pub attempts: u32,
    pub epoch: u64,
    pub recorded_at: Millis,
}

/// A step to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewStep {
    pub step_id: u32,
    pub name: String,
    pub outcome: Outcome,
    pub attempts: u32,
}

/// The fencing token a worker's write carries: which dispatch of which workflow it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub workflow_id: String,
    pub epoch: u64,
}

/// Filters and page position for listing workflows. Newest first, by (created_at, workflow_id).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub statuses: Vec<WorkflowStatus>,
    pub workflow_name: Option<String>,
    pub queue_name: Option<String>,
    pub created_at_or_after: Option<Millis>,
    pub created_before: Option<Millis>,
    /// Continue after this (created_at, workflow_id) position.
    pub after: Option<(Millis, String)>,
    pub limit: u32,
}

/// What a worker can take: the claim's filter.
#[derive(Debug, Clone)]
pub struct Claim {
    pub worker_id: String,
    /// The stream the workflows go out on; its lease keeps them from recovery.
    pub session_id: String,
    pub app_version: String,
    pub workflow_names: Vec<String>,
    pub queues: Vec<String>,
    pub limit: u32,
}

/// A workflow dispatched to a worker, with its checkpoints.
#[derive(Debug, Clone)]
pub struct ClaimedWorkflow {
    pub workflow: WorkflowRecord,
    pub steps: Vec<StepRecord>,
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

/// What a recovery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Put back in their queue.
    pub requeued: Vec<String>,
    /// Recovered more often than the limit allows: now MAX_RECOVERY_ATTEMPTS_EXCEEDED.
    pub dead_lettered: Vec<String>,
}

/// A message to deliver to a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// Chosen by the caller (unique).
    pub message_id: String,
    /// The receiving workflow.
    pub workflow_id: String,
    /// "" is the default topic.
    pub topic: String,
    /// JSON text.
    pub payload: String,
    /// A second send with the same key to the same workflow is not delivered again.
    pub idempotency_key: Option<String>,
    /// Most unread messages the receiver's inbox may hold: a send that finds it full is
    /// refused with `InboxFull` (a keyed resend of a message already sent is still answered as
    /// the duplicate it is). 0: no limit. Concurrent sends may each see room, so the inbox can
    /// pass the limit by as many sends as are in flight at once.
    pub max_unread: u32,
}

/// A message as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRecord {
    pub message_id: String,
    pub workflow_id: String,
    pub topic: String,
    pub payload: String,
    pub idempotency_key: Option<String>,
    pub sent_at: Millis,
    pub consumed_at: Option<Millis>,
    pub consumed_by_step: Option<u32>,
}

/// Result of a send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sent {
    pub message_id: String,
    /// The idempotency key was used before: nothing new was delivered, and `message_id` is the
    /// first send's.
    pub duplicate: bool,
}

/// A receive waiting in the server (step `step_id` of the fenced workflow, until `deadline`),
/// which a send can complete in its own transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecvWaiter {
    pub fence: Fence,
    pub step_id: u32,
    pub deadline: Millis,
}

/// Result of a receive attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Received {
    /// The oldest unconsumed message (JSON text), now consumed and recorded as the step.
    Delivered(String),
    /// Nothing arrived before the deadline; recorded as the step.
    TimedOut,
    /// Nothing yet and the deadline is ahead; nothing was written.
    Waiting,
}

/// An event of a workflow: its current value and the values it was set to, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub key: String,
    /// JSON text.
    pub value: String,
    pub updated_at: Millis,
    pub history: Vec<EventValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventValue {
    pub value: String,
    pub step_id: u32,
    pub set_at: Millis,
}

/// Step names the store records for messaging and events, so a replay can check it is at the
/// same call (the journal's names, under the names the store has always used).
pub use waymark_journal::names::{
    AWAIT_CHILD as AWAIT_CHILD_STEP, CLOSE_STREAM as CLOSE_STREAM_STEP, GET_EVENT as GET_EVENT_STEP, RECV as RECV_STEP,
    SEND as SEND_STEP, SET_EVENT as SET_EVENT_STEP, START_CHILD as START_CHILD_STEP, WRITE_STREAM as WRITE_STREAM_STEP,
};

/// What a parked workflow waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParkedOn {
    /// Only its wake time (a durable sleep).
    Timer,
    /// A message to it on this topic.
    Message(String),
    /// Another workflow's event.
    Event { workflow_id: String, key: String },
    /// The result of its own remote step at this position.
    Step(u32),
    /// Another workflow (a child) reaching a terminal status.
    Workflow(String),
}

impl ParkedOn {
    /// The stored form, matched by the write that resolves the wait.
    pub fn key(&self) -> String {
        match self {
            ParkedOn::Timer => "timer".to_string(),
            ParkedOn::Message(topic) => format!("message\n{topic}"),
            ParkedOn::Event { workflow_id, key } => format!("event\n{workflow_id}\n{key}"),
            ParkedOn::Step(step_id) => format!("step\n{step_id}"),
            // Matched by the `workflows_wake_awaiting` trigger of migration 0010.
            ParkedOn::Workflow(id) => format!("workflow\n{id}"),
        }
    }
}

/// How a child (or any awaited workflow) ended, as the awaiting step recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub status: WorkflowStatus,
    /// JSON text, when it succeeded.
    pub output: Option<String>,
    pub failure: Option<Failure>,
}

/// One entry of a workflow's stream: a value, or the close marker (the last entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry {
    pub offset: u64,
    /// JSON text; `None` for the close marker.
    pub value: Option<String>,
    pub closed: bool,
}

/// Errors of the storage contract. Messages never carry SQL; `Unavailable` keeps the driver's
/// text for logs only.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("workflow {0:?} not found")]
    WorkflowNotFound(String),
    #[error("workflow {workflow_id:?} already exists as a {existing_name:?} workflow")]
    WorkflowIdConflict { workflow_id: String, existing_name: String },
    /// The write carries an epoch older than the workflow's: another dispatch owns it.
    #[error("workflow {workflow_id:?} is owned by epoch {current}, not {presented}")]
    StaleEpoch {
        workflow_id: String,
        presented: u64,
        current: u64,
    },
    /// The workflow is not PENDING (cancelled, finished, or back in its queue).
    #[error("workflow {workflow_id:?} is {status:?}, not running")]
    NotRunning {
        workflow_id: String,
        status: WorkflowStatus,
    },
    /// A different step name is recorded at this position.
    #[error("step {step_id} of workflow {workflow_id:?} is recorded as {recorded:?}, not {presented:?}")]
    NonDeterminism {
        workflow_id: String,
        step_id: u32,
        recorded: String,
        presented: String,
    },
    /// The same step was recorded with a different outcome.
    #[error("step {step_id} of workflow {workflow_id:?} is already recorded with a different result")]
    StepConflict { workflow_id: String, step_id: u32 },
    /// The workflow cannot be resumed from its status.
    #[error("workflow {workflow_id:?} is {status:?}; only CANCELLED or dead-lettered workflows can be resumed")]
    NotResumable {
        workflow_id: String,
        status: WorkflowStatus,
    },
    /// A remote step's result names an attempt that is no longer running (it timed out and was
    /// dispatched again, or the step is already done).
    #[error("attempt {attempt} of step {step_id} of workflow {workflow_id:?} is no longer running")]
    StepAttemptStale {
        workflow_id: String,
        step_id: u32,
        attempt: u32,
    },
    /// The receiver's inbox holds `limit` unread messages already.
    #[error("the inbox of workflow {workflow_id:?} holds {limit} unread messages")]
    InboxFull { workflow_id: String, limit: u32 },
    #[error("queue {0:?} already exists")]
    QueueExists(String),
    #[error("queue {0:?} does not exist")]
    QueueNotFound(String),
    /// A live workflow of the queue holds the dedup id.
    #[error("dedup id {dedup_id:?} is held by workflow {holder:?}")]
    Duplicate { dedup_id: String, holder: String },
    /// The workflow is not waiting for its delayed start (it was dispatched already, or never
    /// had a delay).
    #[error("workflow {workflow_id:?} is {status:?}, not waiting for a delayed start")]
    NotDelayed {
        workflow_id: String,
        status: WorkflowStatus,
    },
    #[error("schedule {0:?} already exists")]
    ScheduleExists(String),
    #[error("schedule {0:?} does not exist")]
    ScheduleNotFound(String),
    /// The database failed or could not be reached.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Records each step, then completes: the way to `complete_with_steps` one write at a time.
async fn record_then_complete<S: Store + ?Sized>(
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

/// Everything the engine needs from a database.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Which backend, for logs: "sqlite" or "postgres".
    fn backend(&self) -> &'static str;

    /// Insert a workflow ENQUEUED (or PENDING, dispatched, when `new.assign` is set), or return
    /// the existing one with the same id untouched. An existing id under another workflow name
    /// is `WorkflowIdConflict`.
    async fn start_workflow(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started>;

    async fn get_workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>>;

    /// Up to `query.limit` workflows, newest first.
    async fn list_workflows(&self, query: &ListQuery) -> StoreResult<Vec<WorkflowRecord>>;

    /// Recorded steps in order. `WorkflowNotFound` when the workflow does not exist.
    async fn list_steps(&self, workflow_id: &str) -> StoreResult<Vec<StepRecord>>;

    /// Take up to `claim.limit` ENQUEUED workflows the worker can run, lowest priority first,
    /// oldest first within a priority: each becomes
    /// PENDING, owned by the worker, with its epoch raised by one and its app version pinned.
    /// Concurrent claims never take the same workflow. Queues with limits are not claimed here
    /// (judged by their stored row as the claim runs); see [`Store::claim_limited`].
    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>>;

    /// Like `claim_workflows` for the one queue `queue` (`claim.queues` is ignored), which has
    /// limits: under the queue's lock, counts what runs (fleet-wide, on this worker, per
    /// partition) and what started within the rate window, and takes no more than every limit
    /// allows, partitions in turn (see [`admission`]). Claims of one queue run one at a time
    /// across all replicas.
    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>>;

    /// Moves the start of a workflow still waiting for its delayed start (DELAYED, never
    /// dispatched) to `run_at`. [`StoreError::NotDelayed`] otherwise.
    async fn set_start_time(&self, workflow_id: &str, run_at: Millis, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Checkpoint a step, fenced: refused unless the workflow is PENDING at exactly this epoch.
    async fn record_step(&self, fence: &Fence, step: NewStep, now: Millis) -> StoreResult<Recorded>;

    /// Finish a workflow, status-gated: when it is already terminal the recorded outcome stands
    /// and is returned (`adopted`); otherwise the write is fenced like `record_step`.
    async fn complete_workflow(&self, fence: &Fence, outcome: Outcome, now: Millis) -> StoreResult<Completed>;

    /// Records `steps` as `record_step` would (fenced; one already recorded the same way is
    /// fine) and then completes like `complete_workflow`. A backend may do both in one
    /// transaction; this default does them in turn, which is safe too: a crash in between
    /// leaves the steps recorded and the workflow to be recovered and replayed.
    async fn complete_with_steps(
        &self,
        fence: &Fence,
        steps: Vec<NewStep>,
        outcome: Outcome,
        now: Millis,
    ) -> StoreResult<Completed> {
        record_then_complete(self, fence, steps, outcome, now).await
    }

    /// Cancel a workflow that has not finished; a finished one is returned unchanged.
    async fn cancel_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Put a CANCELLED or dead-lettered workflow back in its queue, with its recovery count reset.
    async fn resume_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Create or extend the lease of one worker stream: the workflows dispatched on it are safe
    /// from recovery until `until`.
    async fn renew_session_lease(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        now: Millis,
    ) -> StoreResult<()>;

    /// Take back at once every workflow still owned by this worker (it reconnected, so it dropped
    /// them). Counts as a recovery, like `recover_expired`.
    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// Take back workflows a live worker says it no longer holds (its heartbeat left them out:
    /// the SDK lost the run). Only a workflow still PENDING at the listed epoch is taken back —
    /// one that finished, parked or was dispatched again meanwhile is left alone. Counts as a
    /// recovery, like `recover_expired`.
    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// Take back the PENDING workflows whose stream's lease ended before `now` (or that have no
    /// live stream at all): each one's recovery count goes up by one and it returns to ENQUEUED,
    /// or becomes MAX_RECOVERY_ATTEMPTS_EXCEEDED when the count passes the limit.
    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// One trivial round trip to the database: Ok while it answers. For health reporting.
    async fn ping(&self) -> StoreResult<()>;

    /// Forget worker streams whose lease ended before `before` and that own nothing.
    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64>;

    /// Delivers a message from outside any workflow. `WorkflowNotFound` when the receiver does
    /// not exist.
    async fn send_message(&self, message: NewMessage, now: Millis) -> StoreResult<Sent>;

    /// Like `send_message`, and in the same transaction completes `waiter` — a receive of the
    /// message's receiver on its topic — when it still waits (fence holds, step unrecorded,
    /// deadline ahead): the oldest unconsumed message of the topic is consumed and recorded as
    /// the waiter's step. Returns that message's payload when it did. One commit instead of two
    /// on the path from a send to the receive it ends.
    async fn send_message_delivering(
        &self,
        message: NewMessage,
        waiter: &RecvWaiter,
        now: Millis,
    ) -> StoreResult<(Sent, Option<String>)>;

    /// Delivers a message from a workflow, recording the send as its step `step_id` in the same
    /// transaction (fenced). On replay (the step is already recorded) nothing is sent again and
    /// the recorded message id is returned.
    async fn send_message_step(
        &self,
        fence: &Fence,
        step_id: u32,
        message: NewMessage,
        now: Millis,
    ) -> StoreResult<String>;

    /// Takes the oldest unconsumed message of `topic` for the fenced workflow, marking it
    /// consumed and recording it as step `step_id` in one transaction; past `deadline` with
    /// nothing to take, records the timeout instead. A recorded step is answered from the
    /// record. Concurrent receivers never take the same message.
    async fn recv(
        &self,
        fence: &Fence,
        step_id: u32,
        topic: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received>;

    /// Every message sent to a workflow, oldest first. `WorkflowNotFound` when it does not exist.
    async fn list_messages(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>>;

    /// Which of these (workflow, topic) pairs have an unconsumed message now.
    async fn pending_messages(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>>;

    /// Sets an event of the fenced workflow: current value, history entry and step `step_id`
    /// in one transaction. A replay (step recorded) changes nothing.
    async fn set_event_step(&self, fence: &Fence, step_id: u32, key: &str, value: &str, now: Millis)
        -> StoreResult<()>;

    /// The current value of an event; `WorkflowNotFound` when the workflow does not exist.
    async fn get_event(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>>;

    /// Reads another workflow's event from the fenced workflow and records the outcome as step
    /// `step_id`: `Delivered(value)` when set, `TimedOut` past `deadline`, else `Waiting`
    /// (nothing written). A recorded step is answered from the record.
    async fn get_event_step(
        &self,
        fence: &Fence,
        step_id: u32,
        target_workflow_id: &str,
        key: &str,
        deadline: Millis,
        now: Millis,
    ) -> StoreResult<Received>;

    /// Every event of a workflow with its history; `WorkflowNotFound` when it does not exist.
    async fn list_events(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>>;

    /// Which of these (workflow, key) events are set now.
    async fn events_set(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>>;

    /// Appends `value` to the fenced workflow's stream `key` (or, with `None`, closes it),
    /// recorded as step `step_id` in the same transaction; returns the entry's offset. A replay
    /// (step recorded) returns the recorded offset and writes nothing.
    async fn write_stream_step(
        &self,
        fence: &Fence,
        step_id: u32,
        key: &str,
        value: Option<&str>,
        now: Millis,
    ) -> StoreResult<u64>;

    /// Up to `limit` entries of stream `key` from offset `from`, in order.
    /// `WorkflowNotFound` when the workflow does not exist.
    async fn read_stream(&self, workflow_id: &str, key: &str, from: u64, limit: u32) -> StoreResult<Vec<StreamEntry>>;

    /// Starts a child of the fenced workflow, recording it as step `step_id` in the same
    /// transaction as the child's row. On replay (step recorded) returns the recorded child id
    /// and starts nothing. A child id already taken by another workflow name is
    /// `WorkflowIdConflict`; taken by the same name, it is joined.
    async fn start_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child: NewWorkflow,
        now: Millis,
    ) -> StoreResult<String>;

    /// If `child_id` has finished, records its outcome as step `step_id` of the fenced workflow
    /// and returns it; `None` while it runs. A recorded step is answered from the record.
    async fn await_child_step(
        &self,
        fence: &Fence,
        step_id: u32,
        child_id: &str,
        now: Millis,
    ) -> StoreResult<Option<ChildOutcome>>;

    /// Cancels every unfinished workflow whose deadline is before `now`; returns them (as
    /// cancelled, with the worker that was running them).
    async fn cancel_expired(&self, now: Millis) -> StoreResult<Vec<WorkflowRecord>>;

    /// Parks the fenced workflow, waiting as step `step_id`: DELAYED, off its worker, until
    /// `wake_at` or until what it waits `on` happens (the write that makes it happen puts it back
    /// in its queue). Returns false, changing nothing, when the wait has already resolved —
    /// including when step `step_id` is recorded (a send completed the receive itself); for a
    /// timer, `step_id` is the sleep's own recorded wake time and is not such a sign.
    async fn park(&self, fence: &Fence, step_id: u32, wake_at: Millis, on: &ParkedOn, now: Millis)
        -> StoreResult<bool>;

    /// Puts parked workflows whose wake time has come back in their queue; returns how many.
    async fn wake_due(&self, now: Millis) -> StoreResult<u64>;

    /// Ids of the workflows started as children of this one.
    async fn children(&self, workflow_id: &str) -> StoreResult<Vec<String>>;

    /// Which of these workflows have finished.
    async fn finished_among(&self, workflow_ids: &[String]) -> StoreResult<Vec<String>>;

    /// Changes other replicas commit, as they commit (see [`changes`]). `None` when this
    /// backend cannot announce them; the engine then polls. A single-process backend returns a
    /// channel that stays silent: there are no other replicas.
    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::UnboundedReceiver<changes::Change>>>;

    /// Remembers that a worker registered these workflow names.
    async fn register_workflow_names(&self, names: &[String], now: Millis) -> StoreResult<()>;

    /// Whether any worker ever registered this workflow name.
    async fn is_workflow_name_known(&self, name: &str) -> StoreResult<bool>;

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

    /// Which of these (workflow, step) positions are recorded.
    async fn steps_recorded(&self, keys: &[(String, u32)]) -> StoreResult<Vec<(String, u32)>>;

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

    /// Creates a queue; `QueueExists` when the name is taken.
    async fn create_queue(&self, name: &str, limits: &QueueLimits, now: Millis) -> StoreResult<QueueRecord>;

    /// Changes some of a queue's limits, reading and writing the row under its lock;
    /// `QueueNotFound` when there is no such queue.
    async fn update_queue(&self, name: &str, update: &QueueUpdate, now: Millis) -> StoreResult<QueueRecord>;

    async fn get_queue(&self, name: &str) -> StoreResult<Option<QueueRecord>>;

    /// Every queue, by name.
    async fn list_queues(&self) -> StoreResult<Vec<QueueRecord>>;

    /// Removes a queue; false when there was none. Its workflows keep their queue name.
    async fn delete_queue(&self, name: &str) -> StoreResult<bool>;

    /// Creates, without limits, those of `names` that do not exist (a worker declaring them).
    async fn ensure_queues(&self, names: &[String], now: Millis) -> StoreResult<()>;

    /// Creates a schedule at version 1; `ScheduleExists` when the name is taken.
    async fn create_schedule(&self, name: &str, state: &ScheduleState, now: Millis) -> StoreResult<ScheduleRecord>;

    /// Replaces a schedule's state if it is still at `version` (raising it): `None`, writing
    /// nothing, when it changed or fired since it was read; `ScheduleNotFound` when it is gone.
    async fn update_schedule(
        &self,
        name: &str,
        version: u64,
        state: &ScheduleState,
        now: Millis,
    ) -> StoreResult<Option<ScheduleRecord>>;

    async fn get_schedule(&self, name: &str) -> StoreResult<Option<ScheduleRecord>>;

    /// Every schedule, by name.
    async fn list_schedules(&self) -> StoreResult<Vec<ScheduleRecord>>;

    /// Removes a schedule; false when there was none. The workflows it started stay.
    async fn delete_schedule(&self, name: &str) -> StoreResult<bool>;

    /// Up to `limit` unpaused schedules with a next fire time, earliest first: those due, then
    /// the next to come. One indexed read, however many schedules exist.
    async fn upcoming_schedules(&self, limit: u32) -> StoreResult<Vec<ScheduleRecord>>;

    /// Fires a schedule in one transaction: starts `fire.workflow` as `start_workflow` would
    /// (an id already taken is left as it is and returned, whatever its workflow name) and
    /// moves the schedule to `fire.next_fire_at`, recording `fire.fire_at` as its last fire and
    /// raising its version; only while it is unpaused and still at `fire.version`. `None`,
    /// writing nothing, otherwise (another replica fired it, or it changed or went away).
    async fn fire_schedule(&self, fire: &ScheduleFire, now: Millis) -> StoreResult<Option<Started>>;

    /// Starts workflows for schedule `name` outside its timetable (a trigger, a backfill), all
    /// in one transaction, each as `start_workflow` would; ids already taken are left as they
    /// are and returned with `created` false, whatever their workflow name. The schedule's own
    /// row is not changed. `ScheduleNotFound` when the schedule does not exist.
    async fn start_scheduled(&self, name: &str, workflows: &[NewWorkflow], now: Millis) -> StoreResult<Vec<Started>>;
}

impl From<waymark_journal::NonDeterminism> for StoreError {
    fn from(e: waymark_journal::NonDeterminism) -> Self {
        StoreError::NonDeterminism {
            workflow_id: e.workflow_id,
            step_id: e.step_id,
            recorded: e.recorded,
            presented: e.presented,
        }
    }
}
