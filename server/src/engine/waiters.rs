//! Who is waiting for which workflow to finish (AwaitWorkflow calls on this replica). A
//! completion through this replica wakes exactly the callers waiting for that workflow and hands
//! them the finished record, so they answer without another read.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::oneshot;
use waymark_store::WorkflowRecord;

/// The finished record when the waker has it; `None` means "look it up".
pub type Finished = Option<Arc<WorkflowRecord>>;

#[derive(Default)]
pub struct Waiters {
    by_workflow: Mutex<HashMap<String, Vec<oneshot::Sender<Finished>>>>,
}

impl Waiters {
    /// Registers interest in `workflow_id`. Register before reading the workflow, so a
    /// completion between the read and the wait is not missed.
    pub fn wait(&self, workflow_id: &str) -> oneshot::Receiver<Finished> {
        let (tx, rx) = oneshot::channel();
        let mut map = self.by_workflow.lock().unwrap();
        let list = map.entry(workflow_id.to_string()).or_default();
        // Waits that gave up (deadline, client gone) leave closed senders behind.
        list.retain(|s| !s.is_closed());
        list.push(tx);
        rx
    }

    /// Wakes everyone waiting for `workflow_id`.
    pub fn wake(&self, workflow_id: &str, finished: Finished) {
        let list = self.by_workflow.lock().unwrap().remove(workflow_id);
        for tx in list.into_iter().flatten() {
            let _ = tx.send(finished.clone());
        }
    }

    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.by_workflow.lock().unwrap().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wakes_only_the_waiters_of_that_workflow() {
        let w = Waiters::default();
        let a1 = w.wait("a");
        let a2 = w.wait("a");
        let mut b = w.wait("b");
        w.wake("a", None);
        assert_eq!(a1.await.unwrap(), None);
        assert_eq!(a2.await.unwrap(), None);
        assert!(b.try_recv().is_err(), "b is still waiting");
        assert_eq!(w.waiting(), 1);
    }

    #[test]
    fn abandoned_waits_are_dropped_on_the_next_registration() {
        let w = Waiters::default();
        drop(w.wait("a"));
        drop(w.wait("a"));
        let _live = w.wait("a");
        assert_eq!(w.waiting(), 1);
    }
}
