//! The engine: every decision Waymark makes about workflows, independent of gRPC.
//!
//! The API layer converts requests into calls here and errors back into statuses; the engine
//! talks to the database only through the [`Store`] contract and reads time only from its
//! [`Clock`], so its decisions can be tested with an in-process store and a manual clock.
//!
//! Parts: [`workflows`] (the client API), [`worker`] (what a connected worker asks; the
//! worker stream's operations themselves are in `crate::ops`), [`dispatch`] (pushing ENQUEUED workflows to workers with credits), [`recovery`] (taking
//! back workflows from workers whose lease ended), [`waits`] (everything waiting on this
//! replica), [`schedules`] (cron schedules and the scheduler that fires them).

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Arc,
};

use tokio::sync::watch;
use waymark_store::Store;

pub mod bulk;
pub mod catalog;
pub mod changes;
pub mod children;
pub mod clock;
pub mod config;
pub mod dispatch;
pub mod dispatch_rate;
pub mod error;
pub mod events;
pub mod health;
pub mod in_doubt;
pub mod lifecycle;
pub mod lists;
pub mod messages;
pub mod observe;
pub mod pages;
pub mod queues;
pub mod quota;
pub mod recovery;
pub mod remote_steps;
pub mod retention;
pub mod runs;
pub mod schedules;
pub mod sessions;
pub mod start_and_send;
pub mod stream_traces;
pub mod streams;
pub mod tags;
pub mod updates;
pub mod validate;
pub mod waiting;
pub mod waits;
pub mod worker;
pub mod worker_list;
pub mod workflow_list;
pub mod workflows;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::EngineConfig;
pub use error::{EngineError, EngineResult, ErrorCode};
pub use sessions::{Registration, ToWorker, WorkerSession};
pub use worker::Held;

/// What tells the workers attached here and the dispatcher that there is work: the one thing
/// every service that starts or wakes workflows needs of them.
#[derive(Clone)]
pub(crate) struct WorkSignal {
    sessions: Arc<sessions::Sessions>,
    dispatch: Arc<dispatch::Signals>,
}

impl WorkSignal {
    /// Something may have been enqueued: every worker attached here claims at its next
    /// chance, and the dispatcher looks. Call after the write committed.
    pub(crate) fn notify(&self) {
        self.sessions.want_claims_everywhere();
        self.dispatch.wanted.notify_one();
    }
}

/// A finished workflow's record handed to its awaiters when the waker has it; `None` means
/// "look it up".
pub type Finished = Option<Arc<waymark_store::WorkflowRecord>>;

pub struct Engine {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: EngineConfig,
    pub(crate) sessions: Arc<sessions::Sessions>,
    /// What tells the dispatcher there is work (see `dispatch.rs`).
    pub(crate) dispatch: Arc<dispatch::Signals>,
    /// Everything waiting on this replica (see `waits/`).
    pub(crate) waits: waits::Waits,
    /// Workflow names and queues known here (see `catalog.rs`).
    pub(crate) catalog: catalog::Catalog,
    /// Other replicas' changes arrive as announcements (PostgreSQL NOTIFY, or a single-process
    /// store where there are no other replicas): polling is then only a slow safety net.
    pub(crate) changes_live: AtomicBool,
    /// Whether the database answers; health checks and recovery follow it.
    pub(crate) store_health: health::StoreHealth,
    /// Flips to true once when the replica starts draining (what `is_shutting_down` reads).
    pub(crate) shutdown: watch::Sender<bool>,
    /// The last queue depth read for the metrics (see `observe.rs`).
    pub(crate) queue_counts: observe::QueueCountsCache,
    /// What it counts for the metrics as things happen (see `observe.rs`).
    pub(crate) counters: Arc<observe::Counters>,
    /// The queues service (see `queues.rs`).
    pub(crate) queues: Arc<queues::Queues>,
    /// The schedules service (see `schedules/`).
    pub(crate) schedules: schedules::Schedules,
    /// Tells the workers attached here and the dispatcher that there is work.
    pub(crate) work: WorkSignal,
    /// The replica's caps, shared with every other namespace's engine (see `quota.rs`).
    pub(crate) shared: Arc<quota::Shared>,
    /// This namespace's own limits and what it holds against them.
    pub(crate) quota: quota::Quota,
}

impl Engine {
    /// An engine with caps of its own (one namespace, or a test).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, config: EngineConfig) -> Arc<Engine> {
        let shared = quota::Shared::new(config.max_waits, config.max_worker_streams);
        Self::sharing(store, clock, config, shared)
    }

    /// An engine taking its places from `shared`: the caps of the replica it is one namespace of.
    pub fn sharing(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        shared: Arc<quota::Shared>,
    ) -> Arc<Engine> {
        let counters = Arc::new(observe::Counters::new(config.namespace.clone(), clock.clone()));
        let queues = Arc::new(queues::Queues::new(store.clone(), clock.clone(), counters.clone()));
        let sessions: Arc<sessions::Sessions> = Default::default();
        let dispatch: Arc<dispatch::Signals> = Default::default();
        let work = WorkSignal {
            sessions: sessions.clone(),
            dispatch: dispatch.clone(),
        };
        let shutdown = watch::channel(false).0;
        let schedules = schedules::Schedules::new(
            store.clone(),
            clock.clone(),
            queues.clone(),
            config.max_payload_bytes,
            work.clone(),
            shutdown.subscribe(),
        );
        Arc::new(Engine {
            store,
            clock,
            sessions,
            dispatch,
            waits: Default::default(),
            shared,
            quota: Default::default(),
            catalog: Default::default(),
            changes_live: AtomicBool::new(false),
            store_health: Default::default(),
            shutdown,
            queue_counts: Default::default(),
            counters,
            queues,
            schedules,
            work,
            config,
        })
    }

    /// Follows whether the database is reachable (true) or not.
    pub fn store_reachable(&self) -> watch::Receiver<bool> {
        self.store_health.subscribe()
    }

    /// Queues: created, changed, read and removed by operators; checked by every start.
    pub fn queues(&self) -> &queues::Queues {
        &self.queues
    }

    /// Schedules: created, changed, paused, triggered and backfilled by operators.
    pub fn schedules(&self) -> &schedules::Schedules {
        &self.schedules
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The store this engine writes through (the operations compose their transactions on it).
    pub(crate) fn store(&self) -> &dyn Store {
        &*self.store
    }

    pub fn backend(&self) -> &'static str {
        self.store.backend()
    }

    /// Starts the dispatcher, the recovery loop and the scheduler.
    pub fn spawn_background(self: &Arc<Self>) -> Vec<tokio::task::JoinHandle<()>> {
        vec![
            tokio::spawn(dispatch::run(self.clone())),
            tokio::spawn(recovery::run(self.clone())),
            tokio::spawn(waits::poller::run_poller(self.clone())),
            tokio::spawn(changes::run(self.clone())),
            tokio::spawn(schedules::scheduler::run(self.clone())),
            tokio::spawn(health::run(self.clone())),
            tokio::spawn(retention::run(self.clone())),
        ]
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Stops dispatching and tells every worker to drain. In-flight requests still complete.
    pub async fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
        self.dispatch.wanted.notify_one();
        for s in self.sessions.all() {
            s.send(ToWorker::Drain).await;
        }
    }

    /// Resolves (via `wait_for(|v| *v)`) once the replica starts draining.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    /// Something may have been enqueued (a start, a resume, a recovery, a parked workflow
    /// woken, a remote step attempt due): every worker attached here claims at its next chance.
    /// Call after the write committed.
    pub(crate) fn work_enqueued(&self) {
        self.work.notify();
    }

    /// A workflow reached a terminal status through this replica: wake whoever waits on it
    /// here (awaiters get the record when there is one; stream readers look again).
    /// A workflow this replica just finished (completed, failed, cancelled, timed out): counted
    /// in the metrics, then announced.
    pub(crate) fn finished_here(&self, w: waymark_store::WorkflowRecord) {
        self.counters.finished(&w);
        let id = w.workflow_id.clone();
        self.announce_finished(&id, Some(Arc::new(w)));
    }

    pub(crate) fn announce_finished(&self, workflow_id: &str, record: Finished) {
        // A workflow parked awaiting this one is back in its queue. With announcements live the
        // store announces that wake itself (only when there was one to wake), so an ordinary
        // completion costs no claim; a limited queue may have room again either way.
        if self.changes_live.load(Ordering::Relaxed) {
            self.dispatch.wanted.notify_one();
        } else {
            self.work_enqueued();
        }
        self.waits.workflows.wake(&workflow_id.to_string(), record);
        self.waits.streams.wake(workflow_id, None);
        let wakeups = self.waits.children.take(&workflow_id.to_string());
        for _ in &wakeups {
            self.counters.wakeup("child");
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

    /// The engine's clock, for replies that tell a worker the server's time.
    pub fn now_ms(&self) -> waymark_store::Millis {
        self.clock.now()
    }

    pub(crate) fn now(&self) -> waymark_store::Millis {
        self.clock.now()
    }

    pub(crate) fn ms(d: std::time::Duration) -> waymark_store::Millis {
        d.as_millis() as waymark_store::Millis
    }
}

#[cfg(test)]
mod bounds_tests;
#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
