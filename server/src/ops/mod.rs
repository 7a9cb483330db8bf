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
//! Where the store still has a method of its own for an operation (recording a step and
//! completing, which take the group-commit hot path; sends, receives, parking and remote steps),
//! the file holds the request and calls the engine, which calls that method.

pub(crate) mod command;
pub(crate) mod compose;

pub(crate) mod await_child;
mod complete_workflow;
pub(crate) mod get_event;
mod messages;
mod park;
mod record_step;
mod remote_steps;
mod set_event;
mod start_child;
mod write_stream;

#[cfg(test)]
mod testing;

pub(crate) use command::{About, Answer, Command};
