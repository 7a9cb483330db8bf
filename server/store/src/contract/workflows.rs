//! Starting, reading, listing, cancelling, resuming and parking workflows.

use async_trait::async_trait;

use crate::*;

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
    /// While DELAYED and parked: what resolves its wait.
    pub parked_on: Option<ParkedOn>,
    /// The span that started it, handed to every dispatch (see [`TraceContext`]).
    pub trace: Option<TraceContext>,
    /// The workflow this one was forked from, and where.
    pub forked_from: Option<Lineage>,
    /// Its tags (empty: none).
    pub tags: Tags,
    /// How many runs it continued as new from (0: its first run); on an ended run's row
    /// (CONTINUED_AS_NEW), that run's number.
    pub run: u32,
    /// On an ended run's row: the workflow that went on.
    pub continued_as: Option<String>,
}

/// A workflow's tags: key to value, in key order. Given at the start or inherited from the
/// parent, never changed afterwards.
pub type Tags = std::collections::BTreeMap<String, String>;

/// Where a fork came from: its source, and the step position it ran on from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lineage {
    pub workflow_id: String,
    pub from_step: u32,
}

/// Where a piece of work sits in a distributed trace: a W3C `traceparent` and its `tracestate`,
/// kept as they were given (the server checks them before they get here) and handed back with
/// the work, so whatever runs it later opens its spans under the span that asked for it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceContext {
    pub traceparent: String,
    pub tracestate: String,
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
    /// The span that started it (a client's call, a parent's start).
    pub trace: Option<TraceContext>,
    /// Its tags (a child's already merged over its parent's).
    pub tags: Tags,
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

/// Filters and page position for listing workflows. Newest first, by (created_at, workflow_id).
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub statuses: Vec<WorkflowStatus>,
    pub workflow_name: Option<String>,
    pub queue_name: Option<String>,
    pub created_at_or_after: Option<Millis>,
    pub created_before: Option<Millis>,
    /// Running on, or last run by, this worker.
    pub worker_id: Option<String>,
    pub app_version: Option<String>,
    /// Children of this workflow.
    pub parent_workflow_id: Option<String>,
    /// Carrying every one of these tags.
    pub tags: Tags,
    /// Whose id starts with this.
    pub id_prefix: Option<String>,
    /// Continue after this (created_at, workflow_id) position.
    pub after: Option<(Millis, String)>,
    pub limit: u32,
}

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

    /// Reads back the stored form; `None` for one this version does not know.
    pub fn from_key(key: &str) -> Option<ParkedOn> {
        let mut parts = key.splitn(3, '\n');
        Some(match (parts.next()?, parts.next(), parts.next()) {
            ("timer", None, None) => ParkedOn::Timer,
            ("message", Some(topic), None) => ParkedOn::Message(topic.to_string()),
            ("event", Some(workflow_id), Some(key)) => ParkedOn::Event {
                workflow_id: workflow_id.to_string(),
                key: key.to_string(),
            },
            ("step", Some(step_id), None) => ParkedOn::Step(step_id.parse().ok()?),
            ("workflow", Some(id), None) => ParkedOn::Workflow(id.to_string()),
            _ => return None,
        })
    }
}

/// Starting, reading, listing, cancelling, resuming and parking workflows.
#[async_trait]
pub trait Workflows: Send + Sync {
    /// Insert a workflow ENQUEUED (or PENDING, dispatched, when `new.assign` is set), or return
    /// the existing one with the same id untouched. An existing id under another workflow name
    /// is `WorkflowIdConflict`.
    async fn start_workflow(&self, new: NewWorkflow, now: Millis) -> StoreResult<Started>;

    async fn get_workflow(&self, workflow_id: &str) -> StoreResult<Option<WorkflowRecord>>;

    /// Up to `query.limit` workflows, newest first.
    async fn list_workflows(&self, query: &ListQuery) -> StoreResult<Vec<WorkflowRecord>>;

    /// How many workflows `query`'s filters match (its position and limit ignored).
    async fn count_workflows(&self, query: &ListQuery) -> StoreResult<u64>;

    /// Moves the start of a workflow still waiting for its delayed start (DELAYED, never
    /// dispatched) to `run_at`. [`StoreError::NotDelayed`] otherwise.
    async fn set_start_time(&self, workflow_id: &str, run_at: Millis, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Cancel a workflow that has not finished; a finished one is returned unchanged.
    async fn cancel_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord>;

    /// Put a CANCELLED or dead-lettered workflow back in its queue, with its recovery count reset;
    /// an ERROR one too, without its failure and, when its last recorded step failed, without
    /// that step (and its remote-step attempts), so the step runs again.
    async fn resume_workflow(&self, workflow_id: &str, now: Millis) -> StoreResult<WorkflowRecord>;

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

    /// Which of these workflows have finished.
    async fn finished_among(&self, workflow_ids: &[String]) -> StoreResult<Vec<String>>;

    /// Remembers that a worker registered these workflow names.
    async fn register_workflow_names(&self, names: &[String], now: Millis) -> StoreResult<()>;

    /// Whether any worker ever registered this workflow name.
    async fn is_workflow_name_known(&self, name: &str) -> StoreResult<bool>;
}
