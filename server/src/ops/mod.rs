//! The worker stream's operations, a file each: what a workflow asks of the server while it
//! runs (record a step, set an event, start a child, …).
//!
//! An operation's file holds the whole of it: the request as it arrives ([`Command`]: its
//! fence taken off, the rest converted and checked against the worker's key), the writes it
//! composes in one transaction of the store's table operations ([`compose`]), what it wakes
//! once committed, and its tests, run on both stores. The stream's router
//! (`api/worker/route.rs`) lists the operations once; routing, metrics and spans come from that
//! list. So a new operation is its wire message, this one file and one line of that list.
//!
//! Where the store still has a method of its own for an operation (sends, receives, parking
//! and remote steps, each answered with statements of each backend's own; recording a step and
//! completing, which take the group-commit hot path), the file calls that method in the
//! transaction's place. Recording a step and completing go through the engine
//! (`Engine::record_step`, `Engine::complete_workflow`), which the history cap, recovery and
//! continue-as-new share.

pub(crate) mod command;
pub(crate) mod compose;

pub(crate) mod await_child;
pub(crate) mod call_step;
mod complete_workflow;
pub(crate) mod get_event;
mod park;
mod record_step;
pub(crate) mod recv;
mod select;
mod send_message;
mod set_event;
mod start_child;
pub(crate) mod step_result;
mod write_stream;

#[cfg(test)]
mod testing;

pub(crate) use command::{About, Answer, Command};
