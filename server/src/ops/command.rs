//! What every command of the worker stream shares: the [`Command`] each request kind is, the
//! fence taken off the request once, as it is decoded, and one shape of answer — a reply, or an
//! engine error the stream turns into a `ReplyError`.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::Fence;

use crate::{
    engine::{Engine, EngineError, WorkerSession},
    wire::{convert, status},
};

/// A command's answer: the reply the worker gets, or why not.
pub type Answer = Result<reply::Result, EngineError>;

/// One request kind of the worker stream, in a file of its own. The stream's router
/// (`api/worker/route.rs`) lists every command once; its routing, metrics and span come from
/// that list and this trait.
pub(crate) trait Command: Sized {
    /// The workflow it is for, and the epoch and step it carries (for its span).
    fn about(&self) -> About<'_>;
    /// Takes the fence off the request, converts the rest, calls the engine and answers.
    async fn apply(self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer;
}

/// What a command is about: the workflow, and its epoch and step where it has them.
pub(crate) struct About<'a> {
    pub workflow_id: &'a str,
    pub epoch: Option<u64>,
    pub step_id: Option<u32>,
}

impl<'a> About<'a> {
    /// A command that writes step `step_id` of a workflow, under its dispatch's epoch.
    pub fn step(workflow_id: &'a str, epoch: u64, step_id: u32) -> About<'a> {
        About {
            workflow_id,
            epoch: Some(epoch),
            step_id: Some(step_id),
        }
    }
}

/// The fence of a request that writes for a workflow: its id (moved out, not copied) and the
/// epoch of the dispatch it writes under.
pub fn take_fence(workflow_id: &mut String, epoch: u64) -> Fence {
    Fence {
        workflow_id: std::mem::take(workflow_id),
        epoch,
    }
}

/// A malformed field, as the engine's INVALID_ARGUMENT.
pub fn invalid(s: tonic::Status) -> EngineError {
    EngineError::invalid(s.message().to_string())
}

/// A payload's JSON text, or INVALID_ARGUMENT naming the field.
pub fn payload_text(field: &str, p: Option<&v1::Payload>) -> Result<String, EngineError> {
    convert::payload_text(field, p).map_err(invalid)
}

/// A refusal as the worker gets it.
pub fn reply_error(e: EngineError) -> reply::Result {
    reply::Result::Error(v1::ReplyError {
        code: status::code(e.code) as i32,
        reason: e.reason.to_string(),
        message: e.message,
    })
}

/// A wait's answer on the wire: still waiting, delivered (with its value), or timed out.
pub fn wait_outcome(r: waymark_store::Received) -> (v1::recv_result::Outcome, Option<v1::Payload>) {
    use v1::recv_result::Outcome as O;
    use waymark_store::Received;
    match r {
        Received::Delivered(p) => (O::Delivered, convert::payload(&p)),
        Received::TimedOut => (O::TimedOut, None),
        Received::Waiting => (O::Waiting, None),
    }
}
