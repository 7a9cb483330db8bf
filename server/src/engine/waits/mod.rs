//! Everything waiting on this replica, in one place: client calls (AwaitWorkflow, GetEvent,
//! ReadStream) in guard-based maps that forget a wait when its call ends, and workflows' steps
//! in registries pruned by whether their stream still holds the workflow. The poller asks the
//! database about what other replicas did for the keys waited on here.

pub mod poller;
pub mod step_waits;
pub mod wait_map;

use super::{events, messages, streams, Finished};

#[derive(Default)]
pub struct Waits {
    /// AwaitWorkflow calls, woken when a workflow finishes through this replica.
    pub(crate) workflows: wait_map::WaitMap<String, Finished>,
    /// Receives waiting for a message.
    pub(crate) recv: messages::RecvWaits,
    /// Event reads, by workflows and by clients.
    pub(crate) events: events::EventWaits,
    /// Stream readers.
    pub(crate) streams: streams::StreamWaits,
    /// Workflows waiting for another workflow (a child, a select target) to finish.
    pub(crate) children: step_waits::StepWaits<String>,
    /// Workflows waiting for a remote step's result (or a select over steps).
    pub(crate) steps: step_waits::StepWaits<(String, u32)>,
}

/// A client call's place among the waits this replica holds, given back when dropped.
pub struct WaitPermit {
    pub(crate) _place: super::quota::Place,
}
