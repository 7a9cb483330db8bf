//! Errors: [`Error`] for calls to the server, [`WorkflowError`] for what a workflow or a step
//! returns.

use tonic_types::StatusExt;

/// A call to the server failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The server refused the request. `reason` is the stable ErrorInfo reason
    /// (e.g. `WORKFLOW_NOT_FOUND`); `message` is safe to show.
    #[error("{message} ({reason})")]
    Rpc {
        code: tonic::Code,
        reason: String,
        message: String,
    },
    /// The server could not be reached.
    #[error("{0}")]
    Transport(String),
    /// A value could not be converted to or from JSON.
    #[error("serialization: {0}")]
    Serialization(String),
    /// A [`Replayer`](crate::Replayer) was given a history of a workflow no one registered.
    #[error("no workflow named {0:?} is registered with this worker")]
    UnknownWorkflow(String),
}

impl Error {
    /// The gRPC code when the server refused the request.
    pub fn code(&self) -> Option<tonic::Code> {
        match self {
            Error::Rpc { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The ErrorInfo reason when the server refused the request.
    pub fn reason(&self) -> Option<&str> {
        match self {
            Error::Rpc { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        let reason = s
            .get_details_error_info()
            .map(|i| i.reason)
            .unwrap_or_else(|| format!("{:?}", s.code()).to_uppercase());
        if s.code() == tonic::Code::Unavailable && reason == "UNAVAILABLE" {
            return Error::Transport(format!("the Waymark server is unavailable: {}", s.message()));
        }
        Error::Rpc {
            code: s.code(),
            reason,
            message: s.message().to_string(),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Serialization(e.to_string())
    }
}

/// Why a workflow stopped. Return it from a workflow function (usually through `?` on a step).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// A step failed for good: its retries were exhausted. Recorded, so a replay fails the same.
    #[error("step {name:?} failed: {message}")]
    Step { name: String, message: String },
    /// The workflow failed for a reason of its own; `kind` is yours to choose.
    #[error("{kind}: {message}")]
    Failed { kind: String, message: String },
    /// The workflow called a different step than its history records at that position.
    #[error("non-determinism: {0}")]
    NonDeterminism(String),
    /// The workflow was cancelled; it stops at its next step.
    #[error("workflow cancelled")]
    Cancelled,
    /// Another dispatch owns the workflow now (this worker was presumed dead); this run stops
    /// without writing anything.
    #[error("workflow taken over by another dispatch: {0}")]
    Fenced(String),
    /// The stream to the server broke; the server gives the workflow to a worker again.
    #[error("disconnected from the server")]
    Disconnected,
    /// The workflow was parked: released from this worker while it waits. The server
    /// dispatches it again when the wait resolves. Not a failure.
    #[error("workflow parked until its wait resolves")]
    Parked,
    /// A value could not be converted to or from JSON.
    #[error("serialization: {0}")]
    Serialization(String),
    /// Only when replaying offline ([`Replayer`](crate::Replayer)): the code made a call at a
    /// position the history does not record, where a live run would go on.
    #[error("the history ends at step {step_id}")]
    HistoryEnded { step_id: u32 },
    /// Not a failure: the run ends and the workflow goes on under its id with this input and
    /// a fresh history. Made by [`WorkflowContext::continue_as_new`](crate::WorkflowContext::continue_as_new).
    #[error("continued as new")]
    ContinueAsNew(serde_json::Value),
}

impl From<waymark_journal::NonDeterminism> for WorkflowError {
    fn from(e: waymark_journal::NonDeterminism) -> Self {
        WorkflowError::NonDeterminism(e.to_string())
    }
}

impl From<waymark_journal::history::ReplayError> for WorkflowError {
    fn from(e: waymark_journal::history::ReplayError) -> Self {
        match e {
            waymark_journal::history::ReplayError::NonDeterminism(e) => e.into(),
            waymark_journal::history::ReplayError::Malformed(e) => WorkflowError::Serialization(e.to_string()),
        }
    }
}

impl WorkflowError {
    /// A failure of the workflow's own, with a kind a program can match.
    pub fn failed(kind: impl Into<String>, message: impl Into<String>) -> Self {
        WorkflowError::Failed {
            kind: kind.into(),
            message: message.into(),
        }
    }

    /// True for the errors that end this run without failing the workflow: someone else is
    /// (or will be) responsible for it.
    pub fn is_interruption(&self) -> bool {
        matches!(
            self,
            WorkflowError::Cancelled
                | WorkflowError::Fenced(_)
                | WorkflowError::Disconnected
                | WorkflowError::Parked
                | WorkflowError::HistoryEnded { .. }
        )
    }

    pub(crate) fn kind(&self) -> String {
        match self {
            WorkflowError::Step { .. } => "StepFailed".into(),
            WorkflowError::Failed { kind, .. } => kind.clone(),
            WorkflowError::NonDeterminism(_) => "NonDeterminism".into(),
            WorkflowError::Serialization(_) => "Serialization".into(),
            WorkflowError::Cancelled => "Cancelled".into(),
            WorkflowError::Fenced(_) => "Fenced".into(),
            WorkflowError::Disconnected => "Disconnected".into(),
            WorkflowError::Parked => "Parked".into(),
            WorkflowError::ContinueAsNew(_) => "ContinueAsNew".into(),
            WorkflowError::HistoryEnded { .. } => "HistoryEnded".into(),
        }
    }
}

impl From<serde_json::Error> for WorkflowError {
    fn from(e: serde_json::Error) -> Self {
        WorkflowError::Serialization(e.to_string())
    }
}
