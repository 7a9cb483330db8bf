//! Everything waiting on this replica, in one place: client calls (AwaitWorkflow, GetEvent,
//! ReadStream) in guard-based maps that forget a wait when its call ends, and workflows' steps
//! in registries pruned by whether their stream still holds the workflow. The poller asks the
//! database about what other replicas did for the keys waited on here.

pub mod poller;
pub mod step_waits;
pub mod wait_map;

use std::sync::{atomic::Ordering, Arc};

use super::{events, messages, streams, Core, Finished};

pub struct Waits {
    core: Arc<Core>,
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

impl Waits {
    pub(crate) fn new(core: Arc<Core>) -> Waits {
        Waits {
            core,
            workflows: Default::default(),
            recv: Default::default(),
            events: Default::default(),
            streams: Default::default(),
            children: Default::default(),
            steps: Default::default(),
        }
    }

    /// A workflow this replica just finished (completed, failed, cancelled, timed out): counted
    /// in the metrics, then announced.
    pub(crate) fn finished_here(&self, w: waymark_store::WorkflowRecord) {
        self.core.counters.finished(&w);
        let id = w.workflow_id.clone();
        self.announce_finished(&id, Some(Arc::new(w)));
    }

    /// A workflow reached a terminal status (here, or on another replica as announced or
    /// polled): wake whoever waits on it here (awaiters get the record when there is one;
    /// stream readers look again; workflows awaiting it as a child or a select target).
    pub(crate) fn announce_finished(&self, workflow_id: &str, record: Finished) {
        // A workflow parked awaiting this one is back in its queue. With announcements live the
        // store announces that wake itself (only when there was one to wake), so an ordinary
        // completion costs no claim; a limited queue may have room again either way.
        if self.core.changes_live.load(Ordering::Relaxed) {
            self.core.work.wake_dispatcher();
        } else {
            self.core.work_enqueued();
        }
        self.workflows.wake(&workflow_id.to_string(), record);
        self.streams.wake(workflow_id, None);
        let wakeups = self.children.take(&workflow_id.to_string());
        for _ in &wakeups {
            self.core.counters.wakeup("child");
        }
        // Waking sends on worker streams, which may wait; do it off the caller's path.
        if !wakeups.is_empty() {
            tokio::spawn(async move {
                for w in wakeups {
                    w.send().await;
                }
            });
        }
    }

    /// A step was recorded (here or on another replica): wake whoever waits on it here. Its
    /// caller may also have been parked on it, and is back in its queue.
    pub(crate) async fn step_recorded(&self, workflow_id: &str, step_id: u32) {
        if self.steps.wake(&(workflow_id.to_string(), step_id)).await > 0 {
            self.core.counters.wakeup("step");
        }
        self.core.work_enqueued();
    }
}

/// A client call's place among the waits this replica holds, given back when dropped.
pub struct WaitPermit {
    pub(crate) _place: super::quota::Place,
}
