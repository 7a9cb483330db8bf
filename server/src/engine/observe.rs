//! What the engine reports to the metrics: events as they happen (a workflow started, finished,
//! dispatched, recovered), and levels read on demand (workers connected, waits, queue depth).
//!
//! Queue depth is read from the database, so it is cached: a scrape reads it again only when
//! the last read is older than [`QUEUE_COUNTS_MAX_AGE`], whatever the scrape interval.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use waymark_store::{Millis, QueueCounts, WorkflowRecord};

use super::{dispatch_rate::DispatchRate, Clock, Engine};
use crate::telemetry::metrics::{
    self, metrics, FinishedLabels, KindLabels, QueueLabels, QueueStatusLabels, WorkflowLabels,
};

/// How stale the queue depth a scrape reports may be.
pub const QUEUE_COUNTS_MAX_AGE: Duration = Duration::from_secs(5);

/// The last queue counts read, and when (engine clock).
#[derive(Default)]
pub struct QueueCountsCache(Mutex<Option<(Millis, Vec<QueueCounts>)>>);

/// What the engine counts as it happens, for the metrics: one per engine (its namespace is
/// every series' label), so the engine itself holds no counting code.
pub struct Counters {
    namespace: String,
    clock: Arc<dyn Clock>,
    /// Dispatches per minute by queue, for the queue's stats (see `dispatch_rate.rs`).
    dispatch_rate: DispatchRate,
}

impl Counters {
    pub fn new(namespace: String, clock: Arc<dyn Clock>) -> Counters {
        Counters {
            namespace,
            clock,
            dispatch_rate: DispatchRate::default(),
        }
    }

    fn now(&self) -> Millis {
        self.clock.now()
    }

    fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Workflows this replica dispatched from `queue` in each of the last 15 minutes, oldest
    /// first.
    pub fn dispatched_per_minute(&self, queue: &str) -> Vec<u32> {
        self.dispatch_rate.per_minute(queue, self.now())
    }

    /// A queue was deleted: its dispatch rate goes with it.
    pub(crate) fn forget_queue(&self, queue: &str) {
        self.dispatch_rate.forget(queue);
    }

    fn workflow_labels(&self, w: &WorkflowRecord) -> WorkflowLabels {
        WorkflowLabels::of(self.namespace(), &w.workflow_name, &w.queue_name)
    }

    /// A start that made a workflow: counted under its name once a worker has registered it.
    pub(crate) fn start(&self, started: &waymark_store::Started, name_registered: bool) {
        if !started.created {
            return;
        }
        if name_registered {
            self.started(&started.workflow);
        } else {
            // Its name is not a label until a worker registers it: names no worker has
            // declared are whatever clients send, and a label's values must stay bounded.
            self.unregistered_start(&started.workflow);
            tracing::warn!(workflow_id = %started.workflow.workflow_id, workflow_name = %started.workflow.workflow_name,
                "enqueued for a workflow name no worker has registered; it waits until one does");
        }
    }

    /// A workflow was inserted by a client's start or a parent's.
    pub(crate) fn started(&self, w: &WorkflowRecord) {
        metrics()
            .workflows_started
            .get_or_create(&self.workflow_labels(w))
            .inc();
    }

    /// A workflow reached a terminal status through this replica.
    pub(crate) fn finished(&self, w: &WorkflowRecord) {
        let m = metrics();
        m.workflows_finished
            .get_or_create(&FinishedLabels {
                namespace: self.namespace().to_string(),
                workflow_name: metrics::workflow_name(self.namespace(), &w.workflow_name),
                queue: metrics::queue(self.namespace(), &w.queue_name),
                status: w.status.as_str().to_string(),
            })
            .inc();
        if let Some(started) = w.started_at {
            let secs = (self.now() - started).max(0) as f64 / 1000.0;
            m.dispatch_to_finish
                .get_or_create(&self.workflow_labels(w))
                .observe(secs);
        }
    }

    /// A run ended by continuing as new: counted as a finished run of status CONTINUED_AS_NEW
    /// (the workflow itself goes on).
    pub(crate) fn continued(&self, w: &WorkflowRecord) {
        metrics()
            .workflows_finished
            .get_or_create(&FinishedLabels {
                namespace: self.namespace().to_string(),
                workflow_name: metrics::workflow_name(self.namespace(), &w.workflow_name),
                queue: metrics::queue(self.namespace(), &w.queue_name),
                status: waymark_store::WorkflowStatus::ContinuedAsNew.as_str().to_string(),
            })
            .inc();
    }

    /// A workflow went out to a worker; its first dispatch measures its time in the queue.
    pub(crate) fn dispatched(&self, w: &WorkflowRecord) {
        self.dispatch_rate.count(&w.queue_name, self.now());
        if w.epoch == 1 {
            let secs = (self.now() - w.created_at).max(0) as f64 / 1000.0;
            metrics()
                .start_to_dispatch
                .get_or_create(&self.workflow_labels(w))
                .observe(secs);
        }
    }

    pub(crate) fn steps(&self, n: usize) {
        metrics()
            .steps_recorded
            .get_or_create(&metrics::ns(self.namespace()))
            .inc_by(n as u64);
    }

    pub(crate) fn recovered(&self, requeued: usize, dead_lettered: usize) {
        let m = metrics();
        let ns = metrics::ns(self.namespace());
        m.recoveries.get_or_create(&ns).inc_by(requeued as u64);
        m.dead_letters.get_or_create(&ns).inc_by(dead_lettered as u64);
    }

    /// A workflow was enqueued for a name no worker has registered.
    fn unregistered_start(&self, w: &WorkflowRecord) {
        let labels = metrics::QueueLabels::of(self.namespace(), &w.queue_name);
        metrics().unregistered_starts.get_or_create(&labels).inc();
    }

    /// `n` finished workflows were deleted; `reason` says why (`request`, `retention`).
    pub(crate) fn deleted(&self, reason: &str, n: usize) {
        let labels = metrics::ReasonLabels {
            namespace: self.namespace().to_string(),
            reason: reason.to_string(),
        };
        metrics().workflows_deleted.get_or_create(&labels).inc_by(n as u64);
    }

    /// A wakeup went to a worker; `kind` says what woke it.
    pub(crate) fn wakeup(&self, kind: &str) {
        metrics()
            .wakeups
            .get_or_create(&KindLabels {
                namespace: self.namespace().to_string(),
                kind: kind.to_string(),
            })
            .inc();
    }
}

impl Engine {
    /// This engine's namespace, as its metrics and spans name it.
    pub fn namespace(&self) -> &str {
        &self.core.config.namespace
    }

    /// Workflows this replica dispatched from `queue` in each of the last 15 minutes.
    pub fn dispatched_per_minute(&self, queue: &str) -> Vec<u32> {
        self.core.counters.dispatched_per_minute(queue)
    }

    /// What each queue holds, read again when the last read is older than `max_age`.
    pub async fn queue_counts(&self, max_age: Duration) -> Vec<QueueCounts> {
        let now = self.core.now();
        if let Some((at, counts)) = &*self.queue_counts.0.lock().unwrap() {
            if now - at < max_age.as_millis() as Millis {
                return counts.clone();
            }
        }
        match self.core.store.queue_counts(None).await {
            Ok(counts) => {
                *self.queue_counts.0.lock().unwrap() = Some((now, counts.clone()));
                counts
            }
            Err(e) => {
                tracing::debug!(error = %e, "queue counts not read");
                Vec::new()
            }
        }
    }

    /// Sets this namespace's levels in the metrics.
    pub async fn report_levels(&self) {
        let m = metrics();
        let ns = self.namespace().to_string();
        let kind = |k: &str| KindLabels {
            namespace: ns.clone(),
            kind: k.to_string(),
        };
        let sessions = self.sessions.all();
        m.workers_connected
            .get_or_create(&metrics::ns(&ns))
            .set(sessions.len() as i64);
        let (mut credits, mut step_credits, mut held) = (0i64, 0i64, 0i64);
        for s in &sessions {
            credits += s.credits() as i64;
            step_credits += s.step_credits() as i64;
            held += s.in_flight() as i64;
        }
        m.worker_credits.get_or_create(&kind("workflow")).set(credits);
        m.worker_credits.get_or_create(&kind("step")).set(step_credits);
        m.in_flight.get_or_create(&kind("workflow")).set(held);
        let taken = self.core.quota.waits.load(std::sync::atomic::Ordering::SeqCst);
        m.waits.get_or_create(&metrics::ns(&ns)).set(taken as i64);
        let c = self.core.store.connections();
        for (state, n) in [("idle", c.idle), ("in_use", c.open.saturating_sub(c.idle))] {
            m.store_connections
                .get_or_create(&metrics::StoreLabels {
                    namespace: ns.clone(),
                    state: state.to_string(),
                })
                .set(n as i64);
        }
        m.store_reachable
            .get_or_create(&metrics::ns(&ns))
            .set(self.store_health.is_reachable() as i64);
        if !self.store_health.is_reachable() {
            return;
        }
        let now = self.core.now();
        for q in self.queue_counts(QUEUE_COUNTS_MAX_AGE).await {
            // Queues past the label cap share `other`: their depths add up, the oldest age is
            // the oldest of them (the levels were cleared before this scrape).
            let queue = QueueLabels::of(&ns, &q.queue_name);
            for (status, n) in [("ENQUEUED", q.enqueued), ("PENDING", q.pending), ("DELAYED", q.delayed)] {
                m.queue_depth
                    .get_or_create(&QueueStatusLabels {
                        namespace: ns.clone(),
                        queue: queue.queue.clone(),
                        status: status.to_string(),
                    })
                    .inc_by(n as i64);
            }
            m.queue_partitions.get_or_create(&queue).inc_by(q.partitions as i64);
            let age = q.oldest_enqueued_at.map_or(0.0, |at| (now - at).max(0) as f64 / 1000.0);
            let oldest = m.queue_oldest_age.get_or_create(&queue);
            if age > oldest.get() {
                oldest.set(age);
            }
        }
    }
}
