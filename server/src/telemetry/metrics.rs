//! The Prometheus metrics of a replica: one registry for the process, counted into as work
//! happens (counters and histograms, a few hundred nanoseconds each) and, for what is a level
//! rather than an event (workers connected, queue depth), set just before each scrape from
//! state the replica holds or from aggregates it reads at most every few seconds — a scrape never
//! scans a table.
//!
//! Every series carries the namespace. Label values come from names the server has checked
//! (registered workflow names, queue names, statuses), and workflow and queue names are spelled
//! out only for the first [`MAX_NAMED_PER_NAMESPACE`] of each a namespace shows; the rest are
//! counted together as `other` ([`workflow_name`], [`queue`]), so a client that makes names
//! without end cannot make the scrape grow without end.

use std::sync::LazyLock;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NamespaceLabels {
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkflowLabels {
    pub namespace: String,
    pub workflow_name: String,
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FinishedLabels {
    pub namespace: String,
    pub workflow_name: String,
    pub queue: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueLabels {
    pub namespace: String,
    pub queue: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct QueueStatusLabels {
    pub namespace: String,
    pub queue: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub namespace: String,
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub namespace: String,
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RpcLabels {
    pub method: String,
    pub code: String,
}

/// A worker stream command (`RecordStep`) and the code it was answered with (`Ok`,
/// `Aborted`, …): both from fixed sets.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CommandLabels {
    pub command: &'static str,
    pub code: &'static str,
}

/// A store call's name (`claim_workflows`): one of the store's own methods, a fixed set.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreCallLabels {
    pub call: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StoreLabels {
    pub namespace: String,
    pub state: String,
}

/// Latency buckets in seconds, 0.5 ms to 60 s.
fn latency() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ])
}

/// Waiting and running times in seconds, 1 ms to a day.
fn long_latency() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 1800.0, 3600.0, 21600.0, 86400.0,
    ])
}

type Latency = Family<WorkflowLabels, Histogram, fn() -> Histogram>;

pub struct Metrics {
    registry: Registry,
    pub workflows_started: Family<WorkflowLabels, Counter>,
    pub workflows_finished: Family<FinishedLabels, Counter>,
    /// Starts enqueued for a name no worker had registered (by queue: the name is no label).
    pub unregistered_starts: Family<QueueLabels, Counter>,
    pub steps_recorded: Family<NamespaceLabels, Counter>,
    /// From a workflow's start to its first dispatch.
    pub start_to_dispatch: Latency,
    /// From a workflow's first dispatch to its end.
    pub dispatch_to_finish: Latency,
    pub recoveries: Family<NamespaceLabels, Counter>,
    pub dead_letters: Family<NamespaceLabels, Counter>,
    /// Workflows deleted, by why (`request`: DeleteWorkflow; `retention`: the collector).
    pub workflows_deleted: Family<ReasonLabels, Counter>,
    pub wakeups: Family<KindLabels, Counter>,
    pub rpc_requests: Family<RpcLabels, Counter>,
    pub rpc_duration: Family<RpcLabels, Histogram, fn() -> Histogram>,
    /// Requests on worker streams (one long call each, so not among the RPCs), by command.
    pub worker_commands: Family<CommandLabels, Counter>,
    pub worker_command_duration: Family<CommandLabels, Histogram, fn() -> Histogram>,
    // Levels, set before each scrape.
    pub workers_connected: Family<NamespaceLabels, Gauge>,
    pub worker_credits: Family<KindLabels, Gauge>,
    pub in_flight: Family<KindLabels, Gauge>,
    pub waits: Family<NamespaceLabels, Gauge>,
    pub queue_depth: Family<QueueStatusLabels, Gauge>,
    pub queue_partitions: Family<QueueLabels, Gauge>,
    pub queue_oldest_age: Family<QueueLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    pub store_call_duration: Family<StoreCallLabels, Histogram, fn() -> Histogram>,
    pub store_connections: Family<StoreLabels, Gauge>,
    pub store_reachable: Family<NamespaceLabels, Gauge>,
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            registry: Registry::with_prefix("waymark"),
            workflows_started: Family::default(),
            workflows_finished: Family::default(),
            unregistered_starts: Family::default(),
            steps_recorded: Family::default(),
            start_to_dispatch: Family::new_with_constructor(long_latency),
            dispatch_to_finish: Family::new_with_constructor(long_latency),
            recoveries: Family::default(),
            dead_letters: Family::default(),
            workflows_deleted: Family::default(),
            wakeups: Family::default(),
            rpc_requests: Family::default(),
            rpc_duration: Family::new_with_constructor(latency),
            worker_commands: Family::default(),
            worker_command_duration: Family::new_with_constructor(latency),
            workers_connected: Family::default(),
            worker_credits: Family::default(),
            in_flight: Family::default(),
            waits: Family::default(),
            queue_depth: Family::default(),
            queue_partitions: Family::default(),
            queue_oldest_age: Family::default(),
            store_call_duration: Family::new_with_constructor(latency),
            store_connections: Family::default(),
            store_reachable: Family::default(),
        };
        let mut r = m.registry;
        r.register(
            "workflows_started",
            "Workflows started (by clients, parents and schedules)",
            m.workflows_started.clone(),
        );
        r.register(
            "workflows_finished",
            "Workflows that reached a terminal status",
            m.workflows_finished.clone(),
        );
        r.register(
            "unregistered_starts",
            "Workflows enqueued for a name no worker had registered yet (they wait for one; a typo waits for ever)",
            m.unregistered_starts.clone(),
        );
        r.register("steps_recorded", "Step results made durable", m.steps_recorded.clone());
        r.register_with_unit(
            "start_to_dispatch",
            "From a workflow's start to its first dispatch to a worker",
            Unit::Seconds,
            m.start_to_dispatch.clone(),
        );
        r.register_with_unit(
            "dispatch_to_finish",
            "From a workflow's first dispatch to its end",
            Unit::Seconds,
            m.dispatch_to_finish.clone(),
        );
        r.register(
            "recoveries",
            "Workflows taken back from a lost worker and queued again",
            m.recoveries.clone(),
        );
        r.register(
            "dead_letters",
            "Workflows recovered too often (MAX_RECOVERY_ATTEMPTS_EXCEEDED)",
            m.dead_letters.clone(),
        );
        r.register(
            "workflows_deleted",
            "Finished workflows deleted with everything recorded for them, by why (request, retention)",
            m.workflows_deleted.clone(),
        );
        r.register(
            "wakeups",
            "Wakeups pushed to workers, by what woke them",
            m.wakeups.clone(),
        );
        r.register(
            "rpc_requests",
            "gRPC calls answered, by method and code",
            m.rpc_requests.clone(),
        );
        r.register_with_unit(
            "rpc_duration",
            "Time to answer a gRPC call (to the first response for streams)",
            Unit::Seconds,
            m.rpc_duration.clone(),
        );
        r.register(
            "worker_commands",
            "Requests on worker streams answered (a step recorded, a completion, a send, ...), by command and code",
            m.worker_commands.clone(),
        );
        r.register_with_unit(
            "worker_command_duration",
            "Time to answer a request on a worker stream, by command and code",
            Unit::Seconds,
            m.worker_command_duration.clone(),
        );
        r.register(
            "workers_connected",
            "Worker streams open on this replica",
            m.workers_connected.clone(),
        );
        r.register(
            "worker_credits",
            "Credits workers on this replica have left (kind: workflow or step)",
            m.worker_credits.clone(),
        );
        r.register(
            "in_flight",
            "Workflows and remote-step attempts held by workers on this replica",
            m.in_flight.clone(),
        );
        r.register(
            "waits",
            "Waits registered on this replica (places taken)",
            m.waits.clone(),
        );
        r.register(
            "queue_depth",
            "Unfinished workflows by queue and status (ENQUEUED, PENDING, DELAYED); read at most every few seconds",
            m.queue_depth.clone(),
        );
        r.register(
            "queue_partitions",
            "Partitions with enqueued workflows, by queue",
            m.queue_partitions.clone(),
        );
        r.register_with_unit(
            "queue_oldest_enqueued_age",
            "Age of the oldest ENQUEUED workflow, by queue",
            Unit::Seconds,
            m.queue_oldest_age.clone(),
        );
        r.register_with_unit(
            "store_call_duration",
            "Time a store call took (every replica and namespace), by call",
            Unit::Seconds,
            m.store_call_duration.clone(),
        );
        r.register(
            "store_connections",
            "Database connections of this replica (state: idle or in_use)",
            m.store_connections.clone(),
        );
        r.register(
            "store_reachable",
            "1 while the database answers this replica's pings",
            m.store_reachable.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// The registry in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("writing to a String");
        out
    }

    /// Forgets the levels set at the last scrape (a queue or namespace gone since).
    pub fn clear_levels(&self) {
        self.workers_connected.clear();
        self.worker_credits.clear();
        self.in_flight.clear();
        self.waits.clear();
        self.queue_depth.clear();
        self.queue_partitions.clear();
        self.queue_oldest_age.clear();
        self.store_connections.clear();
        self.store_reachable.clear();
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// Most workflow names, and most queue names, a namespace's series spell out.
pub const MAX_NAMED_PER_NAMESPACE: usize = 100;
/// The label value of every name past the cap.
pub const OTHER: &str = "other";

/// The names a label has spelled out so far, per namespace: a name keeps its own series once it
/// has one, and a name seen first when the namespace has [`MAX_NAMED_PER_NAMESPACE`] is `other`.
struct Named {
    cap: usize,
    seen: std::sync::Mutex<std::collections::HashMap<String, std::collections::HashSet<String>>>,
}

impl Named {
    fn label(&self, namespace: &str, name: &str) -> String {
        let mut seen = self.seen.lock().unwrap();
        let names = seen.entry(namespace.to_string()).or_default();
        if names.contains(name) || (names.len() < self.cap && names.insert(name.to_string())) {
            name.to_string()
        } else {
            OTHER.to_string()
        }
    }
}

static WORKFLOW_NAMES: LazyLock<Named> = LazyLock::new(|| Named {
    cap: MAX_NAMED_PER_NAMESPACE,
    seen: Default::default(),
});
static QUEUES: LazyLock<Named> = LazyLock::new(|| Named {
    cap: MAX_NAMED_PER_NAMESPACE,
    seen: Default::default(),
});

/// A workflow name as the series of `namespace` label it.
pub fn workflow_name(namespace: &str, name: &str) -> String {
    WORKFLOW_NAMES.label(namespace, name)
}

/// A queue name as the series of `namespace` label it.
pub fn queue(namespace: &str, name: &str) -> String {
    QUEUES.label(namespace, name)
}

impl WorkflowLabels {
    pub fn of(namespace: &str, workflow_name: &str, queue_name: &str) -> WorkflowLabels {
        WorkflowLabels {
            namespace: namespace.to_string(),
            workflow_name: self::workflow_name(namespace, workflow_name),
            queue: queue(namespace, queue_name),
        }
    }
}

impl QueueLabels {
    pub fn of(namespace: &str, queue_name: &str) -> QueueLabels {
        QueueLabels {
            namespace: namespace.to_string(),
            queue: queue(namespace, queue_name),
        }
    }
}

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// A namespace's label, for the counters its engine bumps.
pub fn ns(namespace: &str) -> NamespaceLabels {
    NamespaceLabels {
        namespace: namespace.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_cap_are_counted_as_other() {
        let named = Named {
            cap: 3,
            seen: Default::default(),
        };
        let labels: Vec<String> = (0..10).map(|i| named.label("a", &format!("n{i}"))).collect();
        assert_eq!(
            labels,
            ["n0", "n1", "n2", "other", "other", "other", "other", "other", "other", "other"]
        );
        assert_eq!(named.label("a", "n1"), "n1", "a name keeps its series");
        assert_eq!(named.label("b", "n9"), "n9", "each namespace has its own");
        // Through the families: a flood of names makes at most the cap's series, plus other.
        let m = Metrics::new();
        for i in 0..(MAX_NAMED_PER_NAMESPACE + 50) {
            let l = WorkflowLabels::of("flooded", &format!("wf-{i}"), &format!("q-{i}"));
            m.workflows_started.get_or_create(&l).inc();
        }
        let text = m.encode();
        let series = text
            .lines()
            .filter(|l| l.starts_with("waymark_workflows_started_total{"))
            .count();
        assert_eq!(series, MAX_NAMED_PER_NAMESPACE + 1, "{text}");
        assert!(
            text.contains(r#"namespace="flooded",workflow_name="other",queue="other"} 50"#),
            "{text}"
        );
    }

    #[test]
    fn the_registry_encodes_as_openmetrics_text() {
        let m = Metrics::new();
        m.workflows_started
            .get_or_create(&WorkflowLabels {
                namespace: "default".into(),
                workflow_name: "greet".into(),
                queue: "default".into(),
            })
            .inc();
        m.start_to_dispatch
            .get_or_create(&WorkflowLabels {
                namespace: "default".into(),
                workflow_name: "greet".into(),
                queue: "default".into(),
            })
            .observe(0.002);
        let text = m.encode();
        assert!(
            text.contains(
                r#"waymark_workflows_started_total{namespace="default",workflow_name="greet",queue="default"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("# TYPE waymark_start_to_dispatch_seconds histogram"),
            "{text}"
        );
        assert!(text.trim_end().ends_with("# EOF"), "{text}");
    }
}
