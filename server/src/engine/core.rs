//! What every service of a namespace's engine shares, and nothing more: the store and the
//! clock, the configuration, the metric counters, the signal that there is work, the drain
//! flag, whether other replicas' changes are announced, and the places a wait takes under the
//! namespace's and the replica's caps. Each service (queues, schedules, messaging, …) holds an
//! `Arc<Core>` beside the state that is its own.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use tokio::sync::watch;
use waymark_store::{Millis, Store};

use super::{
    dispatch, observe::Counters, quota, sessions::Sessions, waits::WaitPermit, Clock, EngineConfig, EngineResult,
};

pub struct Core {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: EngineConfig,
    /// What it counts for the metrics as things happen (see `observe.rs`).
    pub(crate) counters: Counters,
    /// Tells the workers attached here and the dispatcher that there is work.
    pub(crate) work: WorkSignal,
    /// Flips to true once when the replica starts draining (what `is_shutting_down` reads).
    pub(crate) shutdown: watch::Sender<bool>,
    /// Other replicas' changes arrive as announcements (PostgreSQL NOTIFY, or a single-process
    /// store where there are no other replicas): polling is then only a slow safety net.
    pub(crate) changes_live: AtomicBool,
    /// The replica's caps, shared with every other namespace's engine (see `quota.rs`).
    pub(crate) shared: Arc<quota::Shared>,
    /// This namespace's own limits and what it holds against them.
    pub(crate) quota: quota::Quota,
}

impl Core {
    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    pub(crate) fn namespace(&self) -> &str {
        &self.config.namespace
    }

    /// Payload bytes one page of a listing may carry: two payloads' worth, well inside what a
    /// response may be, so at worst a page holds one large item.
    pub(crate) fn page_budget(&self) -> usize {
        2 * self.config.max_payload_bytes
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Resolves (via `wait_for(|v| *v)`) once the replica starts draining.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Something may have been enqueued (a start, a resume, a recovery, a parked workflow
    /// woken, a remote step attempt due): every worker attached here claims at its next chance.
    /// Call after the write committed.
    pub(crate) fn work_enqueued(&self) {
        self.work.notify();
    }

    /// Workflow `w` was enqueued: only the workers attached here that can run it claim, and the
    /// dispatcher looks only if there is one. Call after the write committed.
    pub(crate) fn workflow_enqueued(&self, w: &waymark_store::WorkflowRecord) {
        self.work.enqueued(w);
    }

    /// How often to look for what other replicas did: the configured interval, or ten times it
    /// (at least 5 s) while their changes are announced.
    pub(crate) fn poll_interval(&self) -> std::time::Duration {
        let base = self.config.dispatch_poll_interval;
        if self.changes_live.load(Ordering::Relaxed) {
            (base * 10).max(std::time::Duration::from_secs(5))
        } else {
            base
        }
    }

    /// Takes a place for a client call that waits (AwaitWorkflow, GetEvent with a timeout,
    /// ReadStream). Past the namespace's limit or the replica's
    /// [`max_waits`](super::EngineConfig::max_waits) the call is refused with
    /// RESOURCE_EXHAUSTED rather than held: each wait costs memory until it ends.
    pub(crate) fn begin_wait(&self) -> EngineResult<WaitPermit> {
        Ok(WaitPermit {
            _place: self.quota.wait_place(&self.shared, self.namespace())?,
        })
    }
}

/// What tells the workers attached here and the dispatcher that there is work: the one thing
/// every service that starts or wakes workflows needs of them.
#[derive(Clone)]
pub(crate) struct WorkSignal {
    pub(super) sessions: Arc<Sessions>,
    pub(super) dispatch: Arc<dispatch::Signals>,
}

impl WorkSignal {
    /// Something may have been enqueued: every worker attached here claims at its next
    /// chance, and the dispatcher looks. Call after the write committed.
    pub(crate) fn notify(&self) {
        self.sessions.want_claims_everywhere();
        self.dispatch.wanted.notify_one();
    }

    /// Workflow `w` was enqueued: the workers attached here that serve its name, queue and
    /// version claim at their next chance, and the dispatcher looks if any does. A start for
    /// a queue no worker here serves costs no claim (other replicas hear of it through the
    /// store's announcement). Call after the write committed.
    pub(crate) fn enqueued(&self, w: &waymark_store::WorkflowRecord) {
        let version = w.app_version.as_deref().unwrap_or("");
        self.enqueued_on(Some(&w.workflow_name), &w.queue_name, version);
    }

    /// Work was enqueued on `queue` (of `workflow_name` and pinned to `app_version` when they
    /// are known; `None` and "" when not): the workers here that could run it claim at their
    /// next chance, and the dispatcher looks if any could.
    pub(crate) fn enqueued_on(&self, workflow_name: Option<&str>, queue: &str, app_version: &str) {
        if self.sessions.want_claims_serving(workflow_name, queue, app_version) {
            self.dispatch.wanted.notify_one();
        }
    }

    /// Wakes the dispatcher alone: room may have opened in a limited queue.
    pub(crate) fn wake_dispatcher(&self) {
        self.dispatch.wanted.notify_one();
    }
}
