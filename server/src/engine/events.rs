//! Events: a workflow sets a key's value; clients and other workflows read it, waiting until
//! it is set. Waits are registered before the read (no lost wakeups) and woken by a set through
//! this replica at once; sets through other replicas are found by the wait poller.

use std::time::Duration;

use waymark_store::EventRecord;

use super::waits::step_waits::{StepWaiter, StepWaits};
use super::waits::wait_map::{Wait, WaitMap};
use super::{messaging::Messaging, validate, EngineError, EngineResult};

/// About what a built-in step's name and JSON add to a history besides the key it names.
pub(crate) const BUILTIN_STEP_BYTES: usize = 40;

/// Longest a client may wait for an event in one call.
pub const MAX_CLIENT_WAIT: Duration = Duration::from_secs(24 * 3600);

/// (workflow, key).
type EventKey = (String, String);

/// Reads waiting on this replica for an event to be set, by (workflow, key).
#[derive(Default)]
pub struct EventWaits {
    /// Workflows' reads, one per waiting step.
    workflows: StepWaits<EventKey>,
    /// Clients' GetEvent calls; an entry goes when its call ends.
    clients: WaitMap<EventKey, ()>,
}

/// How a client's wait for an event ended.
pub(crate) enum EventWait {
    Set(String),
    TimedOut,
    /// The workflow ended without setting it (only when the wait asked to stop then).
    Ended,
}

impl EventWaits {
    fn add_client(&self, workflow_id: &str, key: &str) -> Wait<'_, EventKey, ()> {
        self.clients.wait((workflow_id.to_string(), key.to_string()))
    }

    /// Wakes `waiter` (a workflow's read, from its step) when `workflow_id`'s event `key` is set.
    pub(crate) fn add_step(&self, workflow_id: &str, key: &str, waiter: StepWaiter) {
        self.workflows.add((workflow_id.to_string(), key.to_string()), waiter);
    }

    /// The event a live read of `workflow_id` waits on here, and that read's position.
    pub(crate) fn waited_by(&self, workflow_id: &str) -> Option<(EventKey, u32)> {
        self.workflows.waited_by(workflow_id)
    }

    pub(crate) fn keys(&self) -> Vec<EventKey> {
        let mut keys = self.workflows.keys();
        keys.extend(self.clients.keys());
        keys.sort();
        keys.dedup();
        keys
    }

    #[cfg(test)]
    pub(crate) fn clients_waiting(&self) -> usize {
        self.clients.len()
    }
}

pub(crate) fn validate_key(key: &str) -> EngineResult<()> {
    validate::name("key", key)
}

impl Messaging {
    /// A client's read, waiting up to `timeout` for the event to be set. `None`: not set (in
    /// time).
    pub async fn get_event(&self, workflow_id: &str, key: &str, timeout: Duration) -> EngineResult<Option<String>> {
        validate::name("workflow_id", workflow_id)?;
        validate_key(key)?;
        if timeout > MAX_CLIENT_WAIT {
            return Err(EngineError::invalid("timeout must be at most 24 hours"));
        }
        match self.wait_for_event(workflow_id, key, timeout, None, false).await? {
            EventWait::Set(v) => Ok(Some(v)),
            EventWait::TimedOut | EventWait::Ended => Ok(None),
        }
    }

    /// A client's wait for `workflow_id`'s event `key`, up to `timeout`. It holds `place` among
    /// the server's waits, or takes one once it must wait (a read that answers at once takes
    /// none). With `until_ended`, it also stops when the workflow ends without setting it.
    pub(crate) async fn wait_for_event(
        &self,
        workflow_id: &str,
        key: &str,
        timeout: Duration,
        mut place: Option<super::waits::WaitPermit>,
        until_ended: bool,
    ) -> EngineResult<EventWait> {
        let give_up = tokio::time::Instant::now() + timeout;
        let mut shutdown = self.core.shutdown_signal();
        loop {
            let set = self.waits.events.add_client(workflow_id, key);
            let ended = until_ended.then(|| self.waits.workflows.wait(workflow_id.to_string()));
            if let Some(v) = self.core.store.get_event(workflow_id, key).await? {
                return Ok(EventWait::Set(v));
            }
            // (A workflow that does not exist was answered NOT_FOUND by the read above.)
            if until_ended && self.workflow(workflow_id).await?.status.is_terminal() {
                // It may have set it just before it ended.
                return Ok(match self.core.store.get_event(workflow_id, key).await? {
                    Some(v) => EventWait::Set(v),
                    None => EventWait::Ended,
                });
            }
            if tokio::time::Instant::now() >= give_up {
                return Ok(EventWait::TimedOut);
            }
            if place.is_none() {
                place = Some(self.core.begin_wait()?);
            }
            // Woken when the event is set (or the workflow ends) here; another replica's doing
            // is found by the poll.
            let poll = tokio::time::Instant::now() + self.core.poll_interval().max(Duration::from_millis(200));
            let ended = async move {
                match ended {
                    Some(w) => w.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = set => {}
                _ = ended => {}
                _ = tokio::time::sleep_until(poll.min(give_up)) => {}
                _ = shutdown.wait_for(|v| *v) => return Err(EngineError::shutting_down()),
            }
        }
    }

    pub async fn list_events(&self, workflow_id: &str) -> EngineResult<Vec<EventRecord>> {
        validate::name("workflow_id", workflow_id)?;
        Ok(self.core.store.list_events(workflow_id).await?)
    }

    pub(crate) async fn wake_event(&self, workflow_id: &str, key: &str) {
        let k = (workflow_id.to_string(), key.to_string());
        self.waits.events.clients.wake(&k, ());
        for _ in 0..self.waits.events.workflows.wake(&k).await {
            self.core.counters.wakeup("event");
        }
    }
}
