//! Workflows' steps waiting on this replica, on their workers' streams, for something keyed `K`
//! to happen: a child to finish, a remote step's result, an event to be set. When it happens
//! here (or the poller finds it happened elsewhere) each waiting step gets a wakeup and asks
//! again.
//!
//! One registry for every kind, so pruning lives in one place: an entry is alive while its
//! worker's stream holds the workflow at the epoch that registered it. A workflow that finished,
//! parked (the store wakes a parked workflow itself), was taken back or lost its stream leaves a
//! dead entry, dropped the next time its key is touched or the poller lists the keys — so the
//! poller never asks the database about waits nobody has any more.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::{Arc, Mutex, Weak},
};

use crate::engine::{ToWorker, WorkerSession};

/// One workflow step waiting.
pub struct StepWaiter {
    session: Weak<WorkerSession>,
    workflow_id: String,
    epoch: u64,
    /// The waiting workflow's step that the wakeup is for.
    step_id: u32,
}

impl StepWaiter {
    /// Step `step_id` of the workflow `fence` names, running on `session`, waits.
    pub fn new(session: &Arc<WorkerSession>, fence: &waymark_store::Fence, step_id: u32) -> Self {
        StepWaiter {
            session: Arc::downgrade(session),
            workflow_id: fence.workflow_id.clone(),
            epoch: fence.epoch,
            step_id,
        }
    }

    /// Its session, while that still holds the workflow at the waiting epoch.
    fn live(&self) -> Option<Arc<WorkerSession>> {
        self.session
            .upgrade()
            .filter(|s| s.holds(&self.workflow_id, self.epoch))
    }

    fn same_step(&self, other: &StepWaiter) -> bool {
        self.workflow_id == other.workflow_id && self.step_id == other.step_id
    }
}

/// A wakeup to send: the session and what to tell it.
pub struct Wakeup {
    session: Arc<WorkerSession>,
    workflow_id: String,
    step_id: u32,
}

impl Wakeup {
    pub async fn send(self) {
        let (workflow_id, step_id) = (self.workflow_id, self.step_id);
        self.session.send(ToWorker::Wakeup { workflow_id, step_id }).await;
    }
}

pub struct StepWaits<K> {
    by_key: Mutex<HashMap<K, Vec<StepWaiter>>>,
}

impl<K> Default for StepWaits<K> {
    fn default() -> Self {
        StepWaits {
            by_key: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash + Clone> StepWaits<K> {
    /// Registers `waiter` on `key`. The same step asking again (after a wakeup for another of
    /// its targets) replaces its entry; dead entries of the key go.
    pub fn add(&self, key: K, waiter: StepWaiter) {
        let mut map = self.by_key.lock().unwrap();
        let list = map.entry(key).or_default();
        list.retain(|w| !w.same_step(&waiter) && w.live().is_some());
        list.push(waiter);
    }

    /// What a live step of `workflow_id` waits on here, and that step's position.
    pub fn waited_by(&self, workflow_id: &str) -> Option<(K, u32)> {
        let map = self.by_key.lock().unwrap();
        map.iter().find_map(|(key, list)| {
            list.iter()
                .find(|w| w.workflow_id == workflow_id && w.live().is_some())
                .map(|w| (key.clone(), w.step_id))
        })
    }

    /// Removes every wait on `key` (it was answered without waiting).
    pub fn forget(&self, key: &K) {
        self.by_key.lock().unwrap().remove(key);
    }

    /// Takes every wait on `key`: the wakeups to send, for the ones still alive.
    pub fn take(&self, key: &K) -> Vec<Wakeup> {
        let list = self.by_key.lock().unwrap().remove(key).unwrap_or_default();
        list.into_iter()
            .filter_map(|w| {
                Some(Wakeup {
                    session: w.live()?,
                    workflow_id: w.workflow_id,
                    step_id: w.step_id,
                })
            })
            .collect()
    }

    /// Wakes every step waiting on `key`; how many were woken.
    pub async fn wake(&self, key: &K) -> usize {
        let wakeups = self.take(key);
        let n = wakeups.len();
        for w in wakeups {
            w.send().await;
        }
        n
    }

    /// The keys something alive still waits on (for the poller), dropping dead entries.
    pub fn keys(&self) -> Vec<K> {
        let mut map = self.by_key.lock().unwrap();
        map.retain(|_, list| {
            list.retain(|w| w.live().is_some());
            !list.is_empty()
        });
        map.keys().cloned().collect()
    }

    /// Waits registered, alive or not yet pruned.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_key.lock().unwrap().values().map(Vec::len).sum()
    }
}
