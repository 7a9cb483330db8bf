//! Errors the engine returns to its callers, each with a stable reason and a message that is safe
//! to show to a person. Internal details (database errors) are logged, never returned.

use waymark_store::{StoreError, WorkflowStatus};

/// Broad category, mapped one to one onto gRPC codes by the API layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Aborted,
    ResourceExhausted,
    DeadlineExceeded,
    Unavailable,
    Internal,
    Unauthenticated,
    PermissionDenied,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineError {
    pub code: ErrorCode,
    /// Stable, machine-matchable (the ErrorInfo reason).
    pub reason: &'static str,
    /// Safe to show.
    pub message: String,
    /// Facts a program may act on (the ErrorInfo metadata), e.g. the workflow holding a dedup id.
    pub metadata: Vec<(&'static str, String)>,
}

pub type EngineResult<T> = Result<T, EngineError>;

/// A call without a valid API key.
pub fn unauthenticated() -> EngineError {
    EngineError::new(
        ErrorCode::Unauthenticated,
        "UNAUTHENTICATED",
        "a valid API key is required: send `authorization: Bearer <key>`",
    )
}

/// A call its key may not make; `what` says what was refused.
pub fn permission_denied(what: impl Into<String>) -> EngineError {
    EngineError::new(ErrorCode::PermissionDenied, "PERMISSION_DENIED", what)
}

impl EngineError {
    pub fn new(code: ErrorCode, reason: &'static str, message: impl Into<String>) -> Self {
        EngineError {
            code,
            reason,
            message: message.into(),
            metadata: Vec::new(),
        }
    }
    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata.push((key, value.into()));
        self
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, "INVALID_ARGUMENT", message)
    }
    pub fn not_found(workflow_id: &str) -> Self {
        Self::new(
            ErrorCode::NotFound,
            "WORKFLOW_NOT_FOUND",
            format!("workflow {workflow_id:?} does not exist"),
        )
    }
    /// A refusal about the workflow's state (it is gone, finished, not resumable, …): what a
    /// bulk operation skips and counts. Anything else — the database, the server — stops it.
    pub fn is_refusal(&self) -> bool {
        matches!(self.code, ErrorCode::NotFound | ErrorCode::FailedPrecondition)
    }
    pub fn shutting_down() -> Self {
        Self::new(
            ErrorCode::Unavailable,
            "SHUTTING_DOWN",
            "the server is shutting down; retry on another replica",
        )
    }
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.reason, self.message)
    }
}

impl std::error::Error for EngineError {}

fn status_name(s: WorkflowStatus) -> &'static str {
    s.as_str()
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        use ErrorCode::*;
        match e {
            StoreError::WorkflowNotFound(id) => EngineError::not_found(&id),
            StoreError::WorkflowIdConflict { workflow_id, existing_name } => EngineError::new(
                AlreadyExists,
                "WORKFLOW_ID_CONFLICT",
                format!("workflow id {workflow_id:?} is already used by a {existing_name:?} workflow"),
            ),
            StoreError::StaleEpoch { workflow_id, presented, current } => EngineError::new(
                Aborted,
                "STALE_EPOCH",
                format!("workflow {workflow_id:?} was dispatched again (epoch {current}); this write from epoch {presented} is refused"),
            ),
            StoreError::NotRunning { workflow_id, status } => EngineError::new(
                FailedPrecondition,
                "WORKFLOW_NOT_RUNNING",
                format!("workflow {workflow_id:?} is {}, not running", status_name(status)),
            ),
            StoreError::NonDeterminism { workflow_id, step_id, recorded, presented } => EngineError::new(
                FailedPrecondition,
                "NON_DETERMINISM",
                format!(
                    "workflow {workflow_id:?} is not deterministic: step {step_id} was recorded as {recorded:?} but the replay called {presented:?}"
                ),
            ),
            StoreError::InboxFull { workflow_id, limit } => EngineError::new(
                ResourceExhausted,
                "INBOX_FULL",
                format!("workflow {workflow_id:?} has {limit} unread messages, the most its inbox holds; send again once it has read some"),
            ),
            StoreError::StepConflict { workflow_id, step_id } => EngineError::new(
                AlreadyExists,
                "STEP_CONFLICT",
                format!("step {step_id} of workflow {workflow_id:?} is already recorded with a different result"),
            ),
            StoreError::NotResumable { workflow_id, status } => EngineError::new(
                FailedPrecondition,
                "WORKFLOW_NOT_RESUMABLE",
                format!(
                    "workflow {workflow_id:?} is {}; only CANCELLED, ERROR or MAX_RECOVERY_ATTEMPTS_EXCEEDED workflows can be resumed",
                    status_name(status)
                ),
            ),
            StoreError::NotFinished { workflow_id, status } => EngineError::new(
                FailedPrecondition,
                "WORKFLOW_NOT_FINISHED",
                format!(
                    "workflow {workflow_id:?} is {}; only finished workflows can be deleted (cancel it first)",
                    status_name(status)
                ),
            ),
            StoreError::Finished { workflow_id, status } => EngineError::new(
                FailedPrecondition,
                "WORKFLOW_FINISHED",
                format!("workflow {workflow_id:?} is {}: it has finished", status_name(status)),
            ),
            StoreError::ParentNotFinished { workflow_id, parent_workflow_id } => EngineError::new(
                FailedPrecondition,
                "PARENT_NOT_FINISHED",
                format!("workflow {workflow_id:?} is a child of {parent_workflow_id:?}, which has not finished and may still await it"),
            ),
            StoreError::TooManyToDelete { workflow_id, limit } => EngineError::new(
                FailedPrecondition,
                "TOO_MANY_TO_DELETE",
                format!("deleting workflow {workflow_id:?} with its descendants would delete more than {limit} workflows; delete its subtrees first"),
            ),
            StoreError::StepAttemptStale { workflow_id, step_id, attempt } => EngineError::new(
                FailedPrecondition,
                "STEP_ATTEMPT_STALE",
                format!("attempt {attempt} of step {step_id} of workflow {workflow_id:?} is not running on this stream (it timed out, the step is done, or it was dispatched to another worker); its result is refused"),
            ),
            StoreError::QueueExists(name) => EngineError::new(
                AlreadyExists,
                "QUEUE_EXISTS",
                format!("queue {name:?} already exists"),
            ),
            StoreError::QueueNotFound(name) => super::queues::queue_not_found(&name),
            StoreError::Duplicate { dedup_id, holder } => EngineError::new(
                AlreadyExists,
                "DEDUP_ID_TAKEN",
                format!("dedup id {dedup_id:?} is held by workflow {holder:?}, which has not finished; ask for the existing workflow to get it instead"),
            )
            .with("holder_workflow_id", holder),
            StoreError::NotDelayed { workflow_id, status } => EngineError::new(
                FailedPrecondition,
                "WORKFLOW_NOT_DELAYED",
                format!(
                    "workflow {workflow_id:?} is {} and not waiting for a delayed start; only a delayed start can be moved",
                    status_name(status)
                ),
            ),
            StoreError::NamespaceExists(name) => EngineError::new(
                AlreadyExists,
                "NAMESPACE_EXISTS",
                format!("namespace {name:?} already exists"),
            ),
            StoreError::ApiKeyExists(_) => {
                EngineError::new(AlreadyExists, "API_KEY_EXISTS", "a key with this id exists; try again")
            }
            StoreError::ScheduleExists(name) => EngineError::new(
                AlreadyExists,
                "SCHEDULE_EXISTS",
                format!("schedule {name:?} already exists"),
            ),
            StoreError::ScheduleNotFound(name) => super::schedules::schedule_not_found(&name),
            StoreError::Unavailable(detail) => {
                tracing::error!(%detail, "store error");
                EngineError::new(Unavailable, "STORE_UNAVAILABLE", "the database is unavailable; retry later")
            }
        }
    }
}
