//! What every command of the worker stream shares: the fence taken off the request once, as it
//! is decoded, and one shape of answer — a reply, or an engine error the stream turns into a
//! `ReplyError`.

use waymark_proto::v1::{self, reply};
use waymark_store::Fence;

use crate::{
    api::{convert, status},
    engine::EngineError,
};

/// A command's answer: the reply the worker gets, or why not.
pub type Answer = Result<reply::Result, EngineError>;

/// The requests that write for a workflow carry its id and the epoch of their dispatch.
pub trait Fenced {
    /// Takes the fence out of the request (the id is moved, not copied).
    fn fence(&mut self) -> Fence;
}

macro_rules! fenced {
    ($($t:ty),* $(,)?) => {
        $(impl Fenced for $t {
            fn fence(&mut self) -> Fence {
                Fence {
                    workflow_id: std::mem::take(&mut self.workflow_id),
                    epoch: self.epoch,
                }
            }
        })*
    };
}

fenced!(
    v1::RecordStep,
    v1::CompleteWorkflow,
    v1::SendMessageStep,
    v1::Recv,
    v1::SetEvent,
    v1::GetEventStep,
    v1::WriteStream,
    v1::StartChild,
    v1::AwaitChild,
    v1::Park,
    v1::CallStep,
    v1::Select,
);

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
