//! Messages to workflows: sends (from outside or recorded as a step) and recorded receives.

use async_trait::async_trait;

use crate::*;

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

/// Messages to workflows: sends (from outside or recorded as a step) and recorded receives.
#[async_trait]
pub trait Messages: Send + Sync {
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

    /// Starts `start` unless its id (or, with `return_existing`, its dedup id) is taken, and
    /// delivers `message` to the workflow started or found, in one transaction: the message is
    /// there before the workflow first runs. The message's `workflow_id` is filled in with it.
    /// A start is refused as `start_workflow` refuses it, a send as `send_message` does; either
    /// refusal writes nothing. Not for a debounced start.
    async fn start_and_send(
        &self,
        start: NewWorkflow,
        message: NewMessage,
        now: Millis,
    ) -> StoreResult<(Started, Sent)>;

    /// Every message sent to a workflow, oldest first. `WorkflowNotFound` when it does not exist.
    async fn list_messages(&self, workflow_id: &str) -> StoreResult<Vec<MessageRecord>>;

    /// Which of these (workflow, topic) pairs have an unconsumed message now.
    async fn pending_messages(&self, waits: &[(String, String)]) -> StoreResult<Vec<(String, String)>>;
}
