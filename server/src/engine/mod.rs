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

use std::sync::{atomic::AtomicBool, Arc};

use tokio::sync::watch;
use waymark_store::Store;

pub mod bulk;
pub mod catalog;
pub mod changes;
pub mod children;
pub mod clock;
pub mod config;
pub mod core;
pub mod dispatch;
pub mod dispatch_rate;
pub mod error;
pub mod events;
pub mod health;
pub mod in_doubt;
pub mod lifecycle;
pub mod lists;
pub mod messages;
pub mod messaging;
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

pub use self::core::Core;
pub(crate) use self::core::WorkSignal;
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::EngineConfig;
pub use error::{EngineError, EngineResult, ErrorCode};
pub use sessions::{Registration, ToWorker, WorkerSession};
pub use worker::Held;

/// A finished workflow's record handed to its awaiters when the waker has it; `None` means
/// "look it up".
pub type Finished = Option<Arc<waymark_store::WorkflowRecord>>;

/// One namespace's engine: the shared [`Core`] and the services over it. A service owns its
/// state and is reached through its accessor (`engine.queues()`, `engine.schedules()`); what is
/// still Engine methods is the workflows' own lifecycle, the worker streams and dispatch.
pub struct Engine {
    /// What every service shares (see `core.rs`).
    pub(crate) core: Arc<Core>,
    pub(crate) sessions: Arc<sessions::Sessions>,
    /// What tells the dispatcher there is work (see `dispatch.rs`).
    pub(crate) dispatch: Arc<dispatch::Signals>,
    /// Everything waiting on this replica (see `waits/`).
    pub(crate) waits: Arc<waits::Waits>,
    /// Whether the database answers; health checks and recovery follow it.
    pub(crate) store_health: health::StoreHealth,
    /// The last queue depth read for the metrics (see `observe.rs`).
    pub(crate) queue_counts: observe::QueueCountsCache,
    /// The queues service (see `queues.rs`).
    pub(crate) queues: Arc<queues::Queues>,
    /// The schedules service (see `schedules/`).
    pub(crate) schedules: schedules::Schedules,
    /// The messaging service: messages, events, streams (see `messaging.rs`).
    pub(crate) messaging: Arc<messaging::Messaging>,
    /// The lifecycle service: deletes, retention, forks, re-pins (see `lifecycle.rs`).
    pub(crate) lifecycle: Arc<lifecycle::Lifecycle>,
    /// The workers service: the streams attached here and what they write (see `worker.rs`).
    pub(crate) workers: worker::Workers,
    /// The workflows service: start, read, await, cancel, … (see `workflows.rs`).
    pub(crate) workflows: workflows::Workflows,
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
        let sessions: Arc<sessions::Sessions> = Default::default();
        let dispatch: Arc<dispatch::Signals> = Default::default();
        let core = Arc::new(Core {
            counters: observe::Counters::new(config.namespace.clone(), clock.clone()),
            store,
            clock,
            config,
            work: WorkSignal {
                sessions: sessions.clone(),
                dispatch: dispatch.clone(),
            },
            shutdown: watch::channel(false).0,
            changes_live: AtomicBool::new(false),
            shared,
            quota: Default::default(),
        });
        let queues = Arc::new(queues::Queues::new(core.clone()));
        let waits = Arc::new(waits::Waits::new(core.clone()));
        let messaging = Arc::new(messaging::Messaging::new(core.clone(), waits.clone()));
        let lifecycle = Arc::new(lifecycle::Lifecycle::new(core.clone(), queues.clone()));
        Arc::new(Engine {
            schedules: schedules::Schedules::new(core.clone(), queues.clone()),
            workers: worker::Workers::new(core.clone(), sessions.clone(), waits.clone()),
            workflows: workflows::Workflows {
                core: core.clone(),
                queues: queues.clone(),
                messaging: messaging.clone(),
                lifecycle: lifecycle.clone(),
                waits: waits.clone(),
                sessions: sessions.clone(),
                dispatch: dispatch.clone(),
                catalog: Default::default(),
            },
            messaging,
            lifecycle,
            queues,
            core,
            sessions,
            dispatch,
            waits,
            store_health: Default::default(),
            queue_counts: Default::default(),
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

    /// Messages, events and streams: sends and reads from outside a workflow.
    pub fn messaging(&self) -> &messaging::Messaging {
        &self.messaging
    }

    /// Deleting, forking and re-pinning workflows, and the retention collector's turns.
    pub fn lifecycle(&self) -> &lifecycle::Lifecycle {
        &self.lifecycle
    }

    /// The worker streams attached here: attach, credits, heartbeats, checkpoints, completions.
    pub fn workers(&self) -> &worker::Workers {
        &self.workers
    }

    /// Workflows: start, read, list, await, delay, cancel, resume, update, act in bulk.
    pub fn workflows(&self) -> &workflows::Workflows {
        &self.workflows
    }

    pub fn config(&self) -> &EngineConfig {
        &self.core.config
    }

    /// The store this engine writes through (the operations compose their transactions on it).
    pub(crate) fn store(&self) -> &dyn Store {
        &*self.core.store
    }

    pub fn backend(&self) -> &'static str {
        self.core.store.backend()
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
        self.core.is_shutting_down()
    }

    /// Stops dispatching and tells every worker to drain. In-flight requests still complete.
    pub async fn begin_shutdown(&self) {
        self.core.shutdown.send_replace(true);
        self.dispatch.wanted.notify_one();
        for s in self.sessions.all() {
            s.send(ToWorker::Drain).await;
        }
    }

    /// Resolves (via `wait_for(|v| *v)`) once the replica starts draining.
    pub fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.core.shutdown_signal()
    }

    /// The engine's clock, for replies that tell a worker the server's time.
    pub fn now_ms(&self) -> waymark_store::Millis {
        self.core.now()
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
