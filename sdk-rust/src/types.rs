//! What the client returns: workflows and steps in plain Rust, with JSON values.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;
use waymark_proto::{json, v1};

use crate::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkflowStatus {
    Unspecified,
    Enqueued,
    Delayed,
    Pending,
    Success,
    Error,
    Cancelled,
    MaxRecoveryAttemptsExceeded,
    /// An ended run of a workflow that continued as new (`<id>/run-<n>`).
    ContinuedAsNew,
}

impl WorkflowStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Success | Self::Error | Self::Cancelled | Self::MaxRecoveryAttemptsExceeded | Self::ContinuedAsNew
        )
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "UNSPECIFIED",
            Self::Enqueued => "ENQUEUED",
            Self::Delayed => "DELAYED",
            Self::Pending => "PENDING",
            Self::Success => "SUCCESS",
            Self::Error => "ERROR",
            Self::Cancelled => "CANCELLED",
            Self::MaxRecoveryAttemptsExceeded => "MAX_RECOVERY_ATTEMPTS_EXCEEDED",
            Self::ContinuedAsNew => "CONTINUED_AS_NEW",
        }
    }
    /// Parses the names `as_str` gives, case-insensitively.
    pub fn parse(s: &str) -> Option<Self> {
        let up = s.to_ascii_uppercase();
        [
            Self::Enqueued,
            Self::Delayed,
            Self::Pending,
            Self::Success,
            Self::Error,
            Self::Cancelled,
            Self::MaxRecoveryAttemptsExceeded,
            Self::ContinuedAsNew,
        ]
        .into_iter()
        .find(|st| st.as_str() == up)
    }
    pub fn from_wire(n: i32) -> Self {
        use v1::WorkflowStatus as W;
        match W::try_from(n).unwrap_or(W::Unspecified) {
            W::Unspecified => Self::Unspecified,
            W::Enqueued => Self::Enqueued,
            W::Delayed => Self::Delayed,
            W::Pending => Self::Pending,
            W::Success => Self::Success,
            W::Error => Self::Error,
            W::Cancelled => Self::Cancelled,
            W::MaxRecoveryAttemptsExceeded => Self::MaxRecoveryAttemptsExceeded,
            W::ContinuedAsNew => Self::ContinuedAsNew,
        }
    }
    pub(crate) fn to_wire(self) -> v1::WorkflowStatus {
        use v1::WorkflowStatus as W;
        match self {
            Self::Unspecified => W::Unspecified,
            Self::Enqueued => W::Enqueued,
            Self::Delayed => W::Delayed,
            Self::Pending => W::Pending,
            Self::Success => W::Success,
            Self::Error => W::Error,
            Self::Cancelled => W::Cancelled,
            Self::MaxRecoveryAttemptsExceeded => W::MaxRecoveryAttemptsExceeded,
            Self::ContinuedAsNew => W::ContinuedAsNew,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: String,
    pub message: String,
}

/// A workflow as the server reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowInfo {
    pub workflow_id: String,
    pub workflow_name: String,
    pub status: WorkflowStatus,
    pub queue_name: String,
    pub app_version: String,
    pub input: Value,
    pub output: Option<Value>,
    pub failure: Option<Failure>,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub recovery_attempts: u32,
    pub epoch: u64,
    pub worker_id: String,
    /// The workflow that started this one as its child; empty otherwise.
    pub parent_workflow_id: String,
    /// When it is cancelled if not finished (Unix ms); 0 for none.
    pub deadline_ms: i64,
    /// Lower is dispatched first within the queue.
    pub priority: i32,
    /// Its partition of the queue; empty for none.
    pub partition_key: String,
    /// Its dedup id; empty for none.
    pub dedup_id: String,
    /// When it was first dispatched (Unix ms); 0 before that.
    pub started_at_ms: i64,
    /// While DELAYED: when it goes back to its queue (Unix ms); 0 otherwise.
    pub wake_at_ms: i64,
    /// What it waits for, when it waits and the server can tell (see `GetWorkflow`).
    pub waiting_on: Option<WaitingOn>,
    /// The W3C `traceparent` of the span that started it; empty for none.
    pub traceparent: String,
    /// The workflow this one was forked from ("" when it is not a fork).
    #[serde(default)]
    pub forked_from_workflow_id: String,
    /// The step position the fork ran on from (the source's steps before it were copied).
    #[serde(default)]
    pub forked_from_step: u32,
    /// Its tags: given at the start or inherited from its parent.
    #[serde(default)]
    pub tags: std::collections::BTreeMap<String, String>,
    /// How many runs it continued as new from (0: its first); on an ended run, its number.
    #[serde(default)]
    pub run: u32,
    /// On an ended run (CONTINUED_AS_NEW): the workflow that went on.
    #[serde(default)]
    pub continued_as_workflow_id: String,
}

/// What a waiting workflow waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WaitingOn {
    /// A durable sleep or a delayed start, until `until_ms`.
    Timer {
        until_ms: i64,
    },
    Message {
        topic: String,
        until_ms: i64,
    },
    Event {
        workflow_id: String,
        key: String,
        until_ms: i64,
    },
    /// Another workflow (a child) to finish.
    Workflow {
        workflow_id: String,
        until_ms: i64,
    },
    /// A remote step's result (`attempt` 0 before its first).
    RemoteStep {
        step_id: u32,
        step_name: String,
        attempt: u32,
        until_ms: i64,
    },
}

impl WaitingOn {
    fn from_wire(w: v1::WaitingOn) -> Option<WaitingOn> {
        use v1::waiting_on::What;
        let until_ms = ms(w.until.as_ref());
        Some(match w.what? {
            What::Timer(_) => WaitingOn::Timer { until_ms },
            What::MessageTopic(topic) => WaitingOn::Message { topic, until_ms },
            What::Event(e) => WaitingOn::Event {
                workflow_id: e.workflow_id,
                key: e.key,
                until_ms,
            },
            What::WorkflowId(workflow_id) => WaitingOn::Workflow { workflow_id, until_ms },
            What::RemoteStep(s) => WaitingOn::RemoteStep {
                step_id: s.step_id,
                step_name: s.step_name,
                attempt: s.attempt,
                until_ms,
            },
        })
    }

    /// When the wait ends if nothing comes (Unix ms); 0 for never.
    pub fn until_ms(&self) -> i64 {
        self.parts().1
    }

    /// What it waits for, for people: `a message on "orders"`.
    pub fn describe(&self) -> String {
        self.parts().0
    }

    fn parts(&self) -> (String, i64) {
        match self {
            WaitingOn::Timer { until_ms } => ("a timer".to_string(), *until_ms),
            WaitingOn::Message { topic, until_ms } => (format!("a message on {topic:?}"), *until_ms),
            WaitingOn::Event {
                workflow_id,
                key,
                until_ms,
            } => (format!("event {key:?} of workflow {workflow_id}"), *until_ms),
            WaitingOn::Workflow { workflow_id, until_ms } => (format!("workflow {workflow_id}"), *until_ms),
            WaitingOn::RemoteStep {
                step_id,
                step_name,
                attempt,
                until_ms,
            } => (
                format!("remote step {step_name:?} (step {step_id}, attempt {attempt})"),
                *until_ms,
            ),
        }
    }
}

impl WorkflowInfo {
    /// The output as `T`; an error when the workflow has no output (yet, or it failed).
    pub fn output_as<T: DeserializeOwned>(&self) -> Result<T, Error> {
        match &self.output {
            Some(v) => Ok(serde_json::from_value(v.clone())?),
            None => Err(Error::Serialization(format!(
                "workflow {} has no output; it is {}",
                self.workflow_id,
                self.status.as_str()
            ))),
        }
    }
}

/// Result of a start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Started {
    pub workflow: WorkflowInfo,
    /// False when the id already existed and the existing workflow was returned.
    pub created: bool,
    /// False when no worker has registered the workflow's name yet (a start with
    /// `allow_unregistered`): it waits until one does — or for ever, if the name is misspelt.
    pub name_registered: bool,
}

/// Result of a start-and-send ([`crate::Client::start_and_send`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StartedAndSent {
    /// The workflow that got the message, and whether this call started it.
    pub started: Started,
    pub message_id: String,
    /// True when the idempotency key had delivered a message to it before: nothing new was sent.
    pub duplicate: bool,
}

/// A recorded step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    pub step_id: u32,
    pub name: String,
    pub output: Option<Value>,
    pub failure: Option<Failure>,
    pub attempts: u32,
    pub epoch: u64,
    pub recorded_at_ms: i64,
    /// When it began, when the server knows (steps a worker ran and said how long they took;
    /// remote steps: their call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
}

/// A message sent to a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageInfo {
    pub message_id: String,
    pub workflow_id: String,
    pub topic: String,
    pub payload: Value,
    pub idempotency_key: String,
    pub sent_at_ms: i64,
    pub consumed: bool,
    pub consumed_at_ms: i64,
    pub consumed_by_step: u32,
}

impl From<v1::Message> for MessageInfo {
    fn from(m: v1::Message) -> Self {
        MessageInfo {
            payload: value(m.payload.as_ref()),
            sent_at_ms: ms(m.sent_at.as_ref()),
            consumed_at_ms: ms(m.consumed_at.as_ref()),
            message_id: m.message_id,
            workflow_id: m.workflow_id,
            topic: m.topic,
            idempotency_key: m.idempotency_key,
            consumed: m.consumed,
            consumed_by_step: m.consumed_by_step,
        }
    }
}

/// An event of a workflow: its current value and every value it was set to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventInfo {
    pub key: String,
    pub value: Value,
    pub updated_at_ms: i64,
    /// (value, step that set it, when), oldest first.
    pub history: Vec<(Value, u32, i64)>,
}

impl From<v1::Event> for EventInfo {
    fn from(e: v1::Event) -> Self {
        EventInfo {
            value: value(e.value.as_ref()),
            updated_at_ms: ms(e.updated_at.as_ref()),
            history: e
                .history
                .iter()
                .map(|h| (value(h.value.as_ref()), h.step_id, ms(h.set_at.as_ref())))
                .collect(),
            key: e.key,
        }
    }
}

pub(crate) fn ms(ts: Option<&prost_types::Timestamp>) -> i64 {
    ts.map(|t| t.seconds * 1000 + t.nanos as i64 / 1_000_000).unwrap_or(0)
}

fn value(p: Option<&v1::Payload>) -> Value {
    json::from_payload(p).unwrap_or(Value::Null)
}

fn failure(f: Option<&v1::Failure>) -> Option<Failure> {
    f.map(|f| Failure {
        kind: f.kind.clone(),
        message: f.message.clone(),
    })
}

impl From<v1::Workflow> for WorkflowInfo {
    fn from(w: v1::Workflow) -> Self {
        WorkflowInfo {
            status: WorkflowStatus::from_wire(w.status),
            input: value(w.input.as_ref()),
            output: w.output.as_ref().map(|p| value(Some(p))),
            failure: failure(w.failure.as_ref()),
            created_at_ms: ms(w.created_at.as_ref()),
            updated_at_ms: ms(w.updated_at.as_ref()),
            recovery_attempts: w.recovery_attempts,
            epoch: w.epoch,
            workflow_id: w.workflow_id,
            workflow_name: w.workflow_name,
            queue_name: w.queue_name,
            app_version: w.app_version,
            worker_id: w.worker_id,
            parent_workflow_id: w.parent_workflow_id,
            deadline_ms: ms(w.deadline.as_ref()),
            priority: w.priority,
            started_at_ms: ms(w.started_at.as_ref()),
            wake_at_ms: ms(w.wake_at.as_ref()),
            partition_key: w.partition_key,
            dedup_id: w.dedup_id,
            waiting_on: w.waiting_on.and_then(WaitingOn::from_wire),
            traceparent: w.trace_context.map(|t| t.traceparent).unwrap_or_default(),
            forked_from_workflow_id: w.forked_from_workflow_id,
            forked_from_step: w.forked_from_step,
            tags: w.tags.into_iter().collect(),
            run: w.run,
            continued_as_workflow_id: w.continued_as_workflow_id,
        }
    }
}

impl From<v1::Step> for StepInfo {
    fn from(s: v1::Step) -> Self {
        StepInfo {
            output: s.output.as_ref().map(|p| value(Some(p))),
            failure: failure(s.failure.as_ref()),
            recorded_at_ms: ms(s.recorded_at.as_ref()),
            started_at_ms: s.started_at.as_ref().map(|t| ms(Some(t))),
            step_id: s.step_id,
            name: s.name,
            attempts: s.attempts,
            epoch: s.epoch,
        }
    }
}
