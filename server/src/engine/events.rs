//! Events: a workflow sets a key's value; clients and other workflows read it, waiting until
//! it is set. Waits are registered before the read (no lost wakeups) and woken by a set through
//! this replica at once; sets through other replicas are found by the wait poller.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use tokio::sync::oneshot;
use waymark_store::{EventRecord, Fence, Millis, Received};

use super::{validate, Engine, EngineError, EngineResult, ToWorker, WorkerSession};

/// Longest a client may wait for an event in one call.
pub const MAX_CLIENT_WAIT: Duration = Duration::from_secs(24 * 3600);
/// Longest a workflow may wait for an event: ten years.
const MAX_WAIT_MS: Millis = 10 * 366 * 24 * 3600 * 1000;

enum Waiter {
    /// A workflow's step waiting on its worker's stream.
    Workflow {
        session: Weak<WorkerSession>,
        workflow_id: String,
        step_id: u32,
    },
    /// A client's GetEvent call.
    Client(oneshot::Sender<()>),
}

/// Reads waiting on this replica for an event to be set, by (workflow, key).
#[derive(Default)]
pub struct EventWaits {
    by_key: Mutex<HashMap<(String, String), Vec<Waiter>>>,
}

impl EventWaits {
    fn add(&self, workflow_id: &str, key: &str, waiter: Waiter) {
        let mut map = self.by_key.lock().unwrap();
        let list = map.entry((workflow_id.to_string(), key.to_string())).or_default();
        list.retain(|w| match w {
            Waiter::Client(tx) => !tx.is_closed(),
            Waiter::Workflow { session, .. } => session.strong_count() > 0,
        });
        list.push(waiter);
    }

    fn take(&self, workflow_id: &str, key: &str) -> Vec<Waiter> {
        self.by_key
            .lock()
            .unwrap()
            .remove(&(workflow_id.to_string(), key.to_string()))
            .unwrap_or_default()
    }

    pub(crate) fn keys(&self) -> Vec<(String, String)> {
        self.by_key.lock().unwrap().keys().cloned().collect()
    }
}

fn validate_key(key: &str) -> EngineResult<()> {
    validate::name("key", key)
}

impl Engine {
    /// Sets an event of the worker's workflow, recorded as its step.
    pub async fn set_event(
        &self,
        session: &WorkerSession,
        fence: Fence,
        step_id: u32,
        key: String,
        value: String,
    ) -> EngineResult<()> {
        self.worker_write(session, &fence)?;
        validate_key(&key)?;
        validate::payload("event value", &value, self.config.max_payload_bytes)?;
        self.store
            .set_event_step(&fence, step_id, &key, &value, self.now())
            .await?;
        self.wake_event(&fence.workflow_id, &key).await;
        // Readers parked on it are back in their queue now.
        self.work_enqueued();
        Ok(())
    }

    /// A client's read, waiting up to `timeout` for the event to be set. `None`: not set (in
    /// time).
    pub async fn get_event(&self, workflow_id: &str, key: &str, timeout: Duration) -> EngineResult<Option<String>> {
        validate::name("workflow_id", workflow_id)?;
        validate_key(key)?;
        if timeout > MAX_CLIENT_WAIT {
            return Err(EngineError::invalid("timeout must be at most 24 hours"));
        }
        let give_up = tokio::time::Instant::now() + timeout;
        let mut shutdown = self.shutdown_signal();
        loop {
            let (tx, woken) = oneshot::channel();
            self.event_waits.add(workflow_id, key, Waiter::Client(tx));
            if let Some(v) = self.store.get_event(workflow_id, key).await? {
                return Ok(Some(v));
            }
            if tokio::time::Instant::now() >= give_up {
                return Ok(None);
            }
            let poll = tokio::time::Instant::now() + self.poll_interval().max(Duration::from_millis(200));
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep_until(poll.min(give_up)) => {}
                _ = shutdown.wait_for(|v| *v) => return Err(EngineError::shutting_down()),
            }
        }
    }

    /// A workflow's read of another workflow's event, recorded as its step.
    #[allow(clippy::too_many_arguments)]
    pub async fn get_event_step(
        &self,
        session: &Arc<WorkerSession>,
        fence: Fence,
        step_id: u32,
        target: String,
        key: String,
        deadline: Millis,
    ) -> EngineResult<Received> {
        let now = self.now();
        self.worker_write(session, &fence)?;
        validate::name("target_workflow_id", &target)?;
        validate_key(&key)?;
        if deadline < 0 || deadline > now + MAX_WAIT_MS {
            return Err(EngineError::invalid(
                "get_event deadline must be a time between now and ten years from now",
            ));
        }
        let waiter = Waiter::Workflow {
            session: Arc::downgrade(session),
            workflow_id: fence.workflow_id.clone(),
            step_id,
        };
        self.event_waits.add(&target, &key, waiter);
        Ok(self
            .store
            .get_event_step(&fence, step_id, &target, &key, deadline, now)
            .await?)
    }

    pub async fn list_events(&self, workflow_id: &str) -> EngineResult<Vec<EventRecord>> {
        validate::name("workflow_id", workflow_id)?;
        Ok(self.store.list_events(workflow_id).await?)
    }

    pub(crate) async fn wake_event(&self, workflow_id: &str, key: &str) {
        for w in self.event_waits.take(workflow_id, key) {
            match w {
                Waiter::Client(tx) => {
                    let _ = tx.send(());
                }
                Waiter::Workflow {
                    session,
                    workflow_id,
                    step_id,
                } => {
                    if let Some(s) = session.upgrade() {
                        s.send(ToWorker::Wakeup { workflow_id, step_id }).await;
                    }
                }
            }
        }
    }
}
