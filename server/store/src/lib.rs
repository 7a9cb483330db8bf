//! The storage contract: everything the engine asks of a database, in the engine's own terms.
//!
//! No driver types and no SQL cross this boundary. Two implementations live beside it —
//! [`sqlite::SqliteStore`] (the embedded default) and [`postgres::PostgresStore`] (production,
//! shared by any number of server replicas) — sharing the SQL written and compiled once in `shared/` (generic over
//! the [`dialect`] traits each backend implements), and one
//! conformance suite (crate `waymark-store-conformance`, in `conformance/`) runs the same cases
//! against both. The contract is one
//! trait per concern (`contract/`) plus a transaction handle ([`Transaction`]).
//!
//! Time is passed in by the caller as milliseconds since the Unix epoch, so the engine's clock
//! can be injected and every time-based decision (lease expiry, recovery) tested without waiting.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

mod batch;
pub mod changes;
mod contract;
mod dialect;
mod messaging;
pub mod postgres;
pub mod queues;
pub mod recorded;
mod remote;
mod rows;
pub mod schedules;
pub mod schema;
mod shared;
pub mod sqlite;

pub use contract::{
    children::*,
    events::*,
    keys::{ApiKeyRecord, ApiKeys},
    lifecycle::{Collect, ContinuedAsNew, Covered, Fork, Lifecycle, MAX_DELETE},
    messages::*,
    namespaces::{NamespaceLimits, NamespaceList, NamespaceRecord},
    queues::{QueueCounts, Queues},
    remote_steps::RemoteSteps,
    schedules::Schedules,
    steps::*,
    streams::*,
    transaction::{FenceLock, Transaction},
    workers::*,
    workflows::*,
};
pub use remote::{
    ExpiredSteps, NewStepTask, StepAttempt, StepClaim, StepFinished, StepPolicy, StepTask, WaitFor, WaitTarget,
    SELECT_STEP, STEP_TIMED_OUT, WAIT_ALL_STEP,
};

pub use queues::{QueueLimits, QueueRecord, QueueUpdate, RateLimit, DEFAULT_QUEUE};
pub use schedules::{ScheduleFire, ScheduleRecord, ScheduleSpec, ScheduleState};
pub use schema::SchemaPolicy;

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
    /// A run that ended by continuing as new: the workflow went on under its id with a fresh
    /// history, and this row keeps the run's.
    ContinuedAsNew,
}

impl WorkflowStatus {
    pub const ALL: [WorkflowStatus; 8] = [
        WorkflowStatus::Enqueued,
        WorkflowStatus::Delayed,
        WorkflowStatus::Pending,
        WorkflowStatus::Success,
        WorkflowStatus::Error,
        WorkflowStatus::Cancelled,
        WorkflowStatus::MaxRecoveryAttemptsExceeded,
        WorkflowStatus::ContinuedAsNew,
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
            WorkflowStatus::ContinuedAsNew => "CONTINUED_AS_NEW",
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
                | WorkflowStatus::ContinuedAsNew
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

impl Outcome {
    /// The status a workflow finishes in with this outcome.
    pub fn status(&self) -> WorkflowStatus {
        match self {
            Outcome::Output(_) => WorkflowStatus::Success,
            Outcome::Failure(_) => WorkflowStatus::Error,
        }
    }
}

/// The fencing token a worker's write carries: which dispatch of which workflow it comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub workflow_id: String,
    pub epoch: u64,
}

/// Step names the store records for messaging and events, so a replay can check it is at the
/// same call (the journal's names, under the names the store has always used).
pub use waymark_journal::names::{
    AWAIT_CHILD as AWAIT_CHILD_STEP, CLOSE_STREAM as CLOSE_STREAM_STEP, GET_EVENT as GET_EVENT_STEP, RECV as RECV_STEP,
    SEND as SEND_STEP, SET_EVENT as SET_EVENT_STEP, START_CHILD as START_CHILD_STEP, WRITE_STREAM as WRITE_STREAM_STEP,
};

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
    #[error("workflow {workflow_id:?} is {status:?}; only CANCELLED, ERROR or dead-lettered workflows can be resumed")]
    NotResumable {
        workflow_id: String,
        status: WorkflowStatus,
    },
    /// A remote step's result names an attempt that is no longer running (it timed out and was
    /// dispatched again, or the step is already done), or comes from a stream the attempt was not
    /// dispatched to.
    #[error("attempt {attempt} of step {step_id} of workflow {workflow_id:?} is not running on this stream")]
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
    /// Only finished workflows can be deleted.
    #[error("workflow {workflow_id:?} is {status:?}, not finished")]
    NotFinished {
        workflow_id: String,
        status: WorkflowStatus,
    },
    /// The workflow has finished: it cannot be changed any more.
    #[error("workflow {workflow_id:?} is {status:?}, finished")]
    Finished {
        workflow_id: String,
        status: WorkflowStatus,
    },
    /// A child is not deleted while its parent may still await it.
    #[error("workflow {workflow_id:?} has a parent {parent_workflow_id:?} that has not finished")]
    ParentNotFinished {
        workflow_id: String,
        parent_workflow_id: String,
    },
    #[error("deleting workflow {workflow_id:?} would delete more than {limit} workflows")]
    TooManyToDelete { workflow_id: String, limit: usize },
    #[error("API key {0:?} already exists")]
    ApiKeyExists(String),
    #[error("namespace {0:?} already exists")]
    NamespaceExists(String),
    /// The database failed or could not be reached.
    #[error("database unavailable: {0}")]
    Unavailable(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// A store's database connections at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Connections {
    pub open: u32,
    pub idle: u32,
}

/// Everything the engine needs from a database: one trait per concern (each in `contract/`),
/// and what concerns the database as a whole.
#[async_trait]
pub trait Store:
    Workflows
    + Steps
    + Workers
    + Messages
    + Events
    + Streams
    + Children
    + RemoteSteps
    + Queues
    + Schedules
    + ApiKeys
    + NamespaceList
    + Lifecycle
    + 'static
{
    /// Which backend, for logs: "sqlite" or "postgres".
    fn backend(&self) -> &'static str;

    /// One trivial round trip to the database: Ok while it answers. For health reporting.
    async fn ping(&self) -> StoreResult<()>;

    /// Migrations this build knows that the database has not applied (another replica of an
    /// older build may have opened it, or it was restored from an older backup). For health.
    async fn pending_migrations(&self) -> StoreResult<usize>;

    /// This store's database connections now, for metrics.
    fn connections(&self) -> Connections;

    /// Changes other replicas commit, as they commit (see [`changes`]). `None` when this
    /// backend cannot announce them; the engine then polls. A single-process backend returns a
    /// channel that stays silent: there are no other replicas. The channel holds at most
    /// [`changes::MAX_QUEUED`] changes; past that, new ones are dropped and found by polling.
    async fn subscribe(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<changes::Change>>>;

    /// Begins a transaction at `now`, for an operation composed of table operations (see
    /// [`Transaction`]).
    async fn begin(&self, now: Millis) -> StoreResult<Box<dyn Transaction + '_>>;
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
