//! Flow control with real processes: limits hold fleet-wide (three replicas on one PostgreSQL,
//! thirty workers), priority order, partition fairness under a deep backlog, dedup ids, delayed
//! starts that can be moved, debounce, bad input, and the CLI.
//!
//! Concurrency is checked from the workers' side: each `hold` workflow logs the interval it held
//! a slot, which lies inside the time the server had it PENDING, so an overlap seen in the log
//! never exceeds what the server admitted. The rate limit is checked on the server's own record
//! of when each workflow first went out (`started_at`).

use std::{collections::HashMap, path::Path, time::Duration};

use waymark_integration_tests::{
    cli, fast_recovery_args, on_both_stores, setup, wait_for, wait_for_registration, Backend, ServerProcess,
    TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, Error, ListOptions, QueueLimits, StartOptions, WorkflowInfo, WorkflowStatus};

/// (workflow id, worker pid, start ms, end ms) from the `WAYMARK_INTERVALS` log.
fn intervals(path: &Path) -> Vec<(String, u32, u128, u128)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split(' ').collect();
            Some((
                p[0].to_string(),
                p[1].parse().ok()?,
                p[2].parse().ok()?,
                p[3].parse().ok()?,
            ))
        })
        .collect()
}

/// Most intervals open at one instant.
fn max_overlap<'a>(spans: impl Iterator<Item = &'a (String, u32, u128, u128)>) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for (_, _, start, end) in spans {
        edges.push((*start, 1));
        edges.push((*end, -1));
    }
    // Ends before starts at the same instant: touching intervals do not overlap.
    edges.sort();
    let (mut open, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        open += d;
        most = most.max(open);
    }
    most as usize
}

fn worker(server: &str, dir: &Path, name: &str, queues: &str, capacity: u32) -> WorkerProcess {
    let intervals = dir.join("intervals.log");
    WorkerProcess::start_with_env(
        server,
        &dir.join("effects.log"),
        capacity,
        name,
        &[
            ("WAYMARK_QUEUES", queues),
            ("WAYMARK_INTERVALS", intervals.to_str().unwrap()),
        ],
    )
}

fn on(queue: &str, id: String) -> StartOptions {
    StartOptions {
        workflow_id: Some(id),
        queue: Some(queue.into()),
        ..Default::default()
    }
}

/// Every workflow of `queue`, through as many pages as it takes.
async fn all_of(c: &Client, queue: &str) -> Vec<WorkflowInfo> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let (page, next) = c
            .list(ListOptions {
                queue: Some(queue.into()),
                page_size: 1000,
                page_token: token,
                ..Default::default()
            })
            .await
            .unwrap();
        out.extend(page);
        match next {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => return out,
        }
    }
}

async fn wait_all_done(c: &Client, queue: &str, n: usize) -> Vec<WorkflowInfo> {
    wait_for(
        &format!("{n} workflows of {queue} to succeed"),
        Duration::from_secs(120),
        || async {
            let all = all_of(c, queue).await;
            let done = all.iter().filter(|w| w.status == WorkflowStatus::Success).count();
            (done == n).then_some(all)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_limits_hold_across_three_replicas_and_thirty_workers() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    // Nothing is killed here, so leases keep their default length: thirty workers and three
    // replicas on a loaded machine can miss a short lease, and a workflow recovered from a live
    // worker runs twice (once as a zombie), which would count against the limits measured here.
    let args: Vec<String> = ["--dispatch-poll-interval", "100ms"].map(String::from).to_vec();
    let replicas = [
        ServerProcess::start(&db, &args).await,
        ServerProcess::start(&db, &args).await,
        ServerProcess::start(&db, &args).await,
    ];
    let clients = [
        replicas[0].client().await,
        replicas[1].client().await,
        replicas[2].client().await,
    ];
    let c = &clients[0];
    let limit = |global, worker, rate| QueueLimits {
        global_concurrency: global,
        worker_concurrency: worker,
        rate_limit: rate,
        partition_concurrency: None,
    };
    c.create_queue("global5", &limit(Some(5), None, None)).await.unwrap();
    c.create_queue("worker2", &limit(None, Some(2), None)).await.unwrap();
    c.create_queue("rate10", &limit(None, None, Some((10, Duration::from_secs(1)))))
        .await
        .unwrap();
    let workers: Vec<WorkerProcess> = (0..30)
        .map(|i| {
            let server = &replicas[i % 3].addr;
            worker(server, &db.dir, &format!("w{i}"), "global5,worker2,rate10", 10)
        })
        .collect();
    // All thirty attached before the first start, or the first few take all the work.
    for w in &workers {
        w.wait_connected().await;
    }
    wait_for_registration(c, "hold").await;
    // Starts spread over the replicas, all at once.
    let mut starts = tokio::task::JoinSet::new();
    for (queue, n, ms) in [("global5", 60, 150), ("worker2", 150, 100), ("rate10", 40, 5)] {
        for i in 0..n {
            let c = clients[i % 3].clone();
            starts.spawn(async move {
                c.start_json(
                    "hold",
                    serde_json::json!({ "ms": ms }),
                    on(queue, format!("{queue}-{i}")),
                )
                .await
                .unwrap()
            });
        }
    }
    while let Some(r) = starts.join_next().await {
        r.unwrap();
    }
    wait_all_done(c, "global5", 60).await;
    wait_all_done(c, "worker2", 150).await;
    let rated = wait_all_done(c, "rate10", 40).await;
    let spans = intervals(&db.dir.join("intervals.log"));
    let of = |q: &str| -> Vec<(String, u32, u128, u128)> {
        spans
            .iter()
            .filter(|s| s.0.starts_with(&format!("{q}-")))
            .cloned()
            .collect()
    };
    // Global concurrency 5: never more than five at once anywhere in the fleet.
    let global = of("global5");
    assert_eq!(global.len(), 60);
    let most = max_overlap(global.iter());
    assert!((2..=5).contains(&most), "global5 ran {most} at once");
    // Per-worker concurrency 2: never more than two at once in any one worker.
    let per_worker = of("worker2");
    assert_eq!(per_worker.len(), 150);
    let mut by_pid: HashMap<u32, Vec<(String, u32, u128, u128)>> = HashMap::new();
    for s in per_worker {
        by_pid.entry(s.1).or_default().push(s);
    }
    for (pid, spans) in &by_pid {
        let most = max_overlap(spans.iter());
        assert!(most <= 2, "worker {pid} ran {most} of worker2 at once");
    }
    assert!(
        by_pid.len() > 5,
        "the work spread over the fleet ({} workers)",
        by_pid.len()
    );
    // Rate limit 10 per second: no one-second window holds more than ten first dispatches.
    let mut started: Vec<i64> = rated.iter().map(|w| w.started_at_ms).collect();
    assert!(started.iter().all(|&t| t > 0));
    started.sort();
    for (i, t) in started.iter().enumerate() {
        let in_window = started[i..].iter().take_while(|&&u| u < t + 1000).count();
        assert!(in_window <= 10, "{in_window} starts within a second of {t}");
    }
    assert!(
        started[39] - started[0] >= 3000,
        "40 starts at 10/s take at least three seconds"
    );
}

/// A replica killed -9 while its workers hold claims on a limited queue: the other replica takes
/// the work back once their leases end; nothing is stranded, nothing runs in two places at once,
/// and the limit holds across the crash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_replica_killed_while_dispatching_strands_nothing() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let args = fast_recovery_args();
    let mut a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let c = b.client().await;
    let three = QueueLimits {
        global_concurrency: Some(3),
        ..Default::default()
    };
    c.create_queue("g3", &three).await.unwrap();
    let _on_a = worker(&a.addr, &db.dir, "on-a", "g3", 5);
    let _on_b = worker(&b.addr, &db.dir, "on-b", "g3", 5);
    wait_for_registration(&c, "hold").await;
    for i in 0..24 {
        c.start_json("hold", serde_json::json!({"ms": 1000}), on("g3", format!("g3-{i}")))
            .await
            .unwrap();
    }
    // The worker attached to A, known by a workflow it finished; A is killed while that worker
    // holds a claim.
    let log = db.dir.join("intervals.log");
    let a_pid = _on_a.pid();
    let a_worker = wait_for("the worker on A to finish one", Duration::from_secs(60), || async {
        let id = intervals(&log).into_iter().find(|s| s.1 == a_pid)?.0;
        let w = c.get(&id).await.ok()?;
        Some(w.worker_id).filter(|w| !w.is_empty())
    })
    .await;
    // A claim taken moments ago has most of its second still to run, so it is still held
    // when A dies, however slow the listing was.
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    wait_for("the worker on A to take a claim", Duration::from_secs(60), || async {
        let fresh = all_of(&c, "g3").await.into_iter().any(|w| {
            w.status == WorkflowStatus::Pending && w.worker_id == a_worker && now_ms() - w.started_at_ms < 300
        });
        fresh.then_some(())
    })
    .await;
    a.kill();
    // With A gone its worker can finish nothing: what it holds now is what A's death stranded.
    let held: Vec<String> = all_of(&c, "g3")
        .await
        .into_iter()
        .filter(|w| w.status == WorkflowStatus::Pending && w.worker_id == a_worker)
        .map(|w| w.workflow_id)
        .collect();
    assert!(!held.is_empty(), "A's worker held a claim when A was killed");
    let all = wait_all_done(&c, "g3", 24).await;
    assert!(all.iter().all(|w| w.status == WorkflowStatus::Success));
    for w in all.iter().filter(|w| held.contains(&w.workflow_id)) {
        assert!(
            w.recovery_attempts >= 1 && w.worker_id != a_worker,
            "{} was taken back from A's worker and finished elsewhere: {w:?}",
            w.workflow_id
        );
    }
    let spans = of_queue(&intervals(&db.dir.join("intervals.log")), "g3");
    assert!(max_overlap(spans.iter()) <= 3, "the limit held across the crash");
    let mut by_id: HashMap<&str, Vec<(u128, u128)>> = HashMap::new();
    for s in &spans {
        by_id.entry(s.0.as_str()).or_default().push((s.2, s.3));
    }
    assert_eq!(by_id.len(), 24, "every workflow ran");
    for (id, mut runs) in by_id {
        runs.sort();
        for pair in runs.windows(2) {
            assert!(pair[0].1 <= pair[1].0, "{id} ran in two places at once: {runs:?}");
        }
    }
}

fn of_queue(spans: &[(String, u32, u128, u128)], queue: &str) -> Vec<(String, u32, u128, u128)> {
    spans
        .iter()
        .filter(|s| s.0.starts_with(&format!("{queue}-")))
        .cloned()
        .collect()
}

fn reason<T: std::fmt::Debug>(r: Result<T, Error>) -> (tonic::Code, String, String) {
    match r {
        Err(Error::Rpc { code, reason, message }) => (code, reason, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Lower priority first, FIFO within a priority, through a queue that runs one at a time.
// conformance: queue_limits
async fn priority_orders_a_limited_queue(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let serial = QueueLimits {
        global_concurrency: Some(1),
        ..Default::default()
    };
    c.create_queue("serial", &serial).await.unwrap();
    wait_for_registration(c, "hold").await;
    let order = [("a", 5), ("b", 0), ("c", -3), ("d", 0), ("e", 5), ("f", -3)];
    for (id, priority) in order {
        let options = StartOptions {
            priority,
            ..on("serial", id.to_string())
        };
        c.start_json("hold", serde_json::json!({"ms": 1}), options)
            .await
            .unwrap();
    }
    let _w = worker(&s.server.addr, &s.db.dir, "serial", "serial", 4);
    let done = wait_all_done(c, "serial", 6).await;
    let at: HashMap<&str, i64> = done.iter().map(|w| (w.workflow_id.as_str(), w.started_at_ms)).collect();
    let expected = ["c", "f", "b", "d", "a", "e"];
    for pair in expected.windows(2) {
        assert!(
            at[pair[0]] <= at[pair[1]],
            "{} started after {}: {at:?}",
            pair[0],
            pair[1]
        );
    }
    let spans = intervals(&s.db.dir.join("intervals.log"));
    assert_eq!(max_overlap(spans.iter()), 1, "one at a time");
}

/// Starts `n` `hold` workflows (`big-0`…) in the partition `big` of the queue `fair` through the
/// store's own start path, in this process: the rows and the group commit a StartWorkflow gets,
/// without a debug server's gRPC path for each of them (100,000 of those took over a minute).
async fn deep_backlog(url: &str, n: usize) {
    use futures::StreamExt;
    use waymark_store::{NewWorkflow, Workflows};
    async fn start_all(store: &dyn Workflows, n: usize) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let started: Vec<_> = futures::stream::iter(0..n)
            .map(|i| {
                store.start_workflow(
                    NewWorkflow {
                        workflow_id: format!("big-{i}"),
                        workflow_name: "hold".into(),
                        queue_name: "fair".into(),
                        input: r#"{"ms":20}"#.into(),
                        partition_key: "big".into(),
                        ..Default::default()
                    },
                    now,
                )
            })
            .buffer_unordered(512)
            .collect()
            .await;
        for s in started {
            assert!(s.expect("started").created);
        }
    }
    if url.starts_with("sqlite:") {
        start_all(&waymark_store::sqlite::SqliteStore::open(url).await.unwrap(), n).await;
    } else {
        start_all(&waymark_store::postgres::PostgresStore::open(url).await.unwrap(), n).await;
    }
}

/// A fair queue: one partition's deep backlog does not hold up another's short one.
async fn a_deep_partition_does_not_starve_a_short_one(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let fair = QueueLimits {
        partition_concurrency: Some(2),
        ..Default::default()
    };
    c.create_queue("fair", &fair).await.unwrap();
    wait_for_registration(c, "hold").await;
    // The whole backlog is in place before anything serves the queue.
    let deep: usize = if backend == Backend::Postgres { 100_000 } else { 10_000 };
    deep_backlog(&s.db.url, deep).await;
    let waiting = c
        .list_page(ListOptions {
            queue: Some("fair".into()),
            statuses: vec![WorkflowStatus::Enqueued],
            page_size: 1,
            include_total: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(waiting.total, Some(deep as u64), "the backlog waits whole");
    for i in 0..10 {
        let options = StartOptions {
            partition_key: Some("small".into()),
            ..on("fair", format!("small-{i}"))
        };
        c.start_json("hold", serde_json::json!({"ms": 20}), options)
            .await
            .unwrap();
    }
    let _w = worker(&s.server.addr, &s.db.dir, "fair", "fair", 8);
    wait_for("the short partition to finish", Duration::from_secs(120), || async {
        let mut done = 0;
        for i in 0..10 {
            done += (c.get(&format!("small-{i}")).await.unwrap().status == WorkflowStatus::Success) as usize;
        }
        (done == 10).then_some(())
    })
    .await;
    let spans = intervals(&s.db.dir.join("intervals.log"));
    let big_done = spans.iter().filter(|s| s.0.starts_with("big-")).count();
    assert!(
        big_done < deep / 10,
        "the short partition waited behind {big_done} of the deep one's {deep}"
    );
    let big: Vec<_> = spans.iter().filter(|s| s.0.starts_with("big-")).cloned().collect();
    let small: Vec<_> = spans.iter().filter(|s| s.0.starts_with("small-")).cloned().collect();
    assert!(
        max_overlap(big.iter()) <= 2 && max_overlap(small.iter()) <= 2,
        "partition limit"
    );
}

/// Dedup ids, delayed starts that move, debounce, and their bad input.
async fn dedup_delay_and_debounce(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    wait_for_registration(c, "hold").await;
    let hour = Duration::from_secs(3600);
    // A delayed start holds its dedup id while it waits.
    let held = StartOptions {
        dedup_id: Some("order-1".into()),
        delay: Some(hour),
        ..StartOptions::id("first")
    };
    let first = c
        .start_json("hold", serde_json::json!({"ms": 1}), held.clone())
        .await
        .unwrap();
    assert_eq!(first.workflow.status, WorkflowStatus::Delayed);
    assert!(first.workflow.wake_at_ms > first.workflow.created_at_ms + 3_500_000);
    let second = StartOptions {
        workflow_id: Some("second".into()),
        ..held.clone()
    };
    let (code, why, message) = reason(c.start_json("hold", serde_json::json!({"ms": 1}), second.clone()).await);
    assert_eq!((code, why.as_str()), (tonic::Code::AlreadyExists, "DEDUP_ID_TAKEN"));
    assert!(message.contains("\"first\""), "{message}");
    let existing = StartOptions {
        return_existing: true,
        ..second.clone()
    };
    let got = c
        .start_json("hold", serde_json::json!({"ms": 1}), existing)
        .await
        .unwrap();
    assert_eq!((got.workflow.workflow_id.as_str(), got.created), ("first", false));
    // Moved to now, it runs; then the id is free again.
    c.delay("first", Duration::ZERO).await.unwrap();
    let w = c.await_workflow("first", Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success);
    assert!(w.started_at_ms > 0);
    let again = c
        .start_json("hold", serde_json::json!({"ms": 1}), second)
        .await
        .unwrap();
    assert!(again.created);
    let (code, why, _) = reason(c.delay("first", hour).await);
    assert_eq!(
        (code, why.as_str()),
        (tonic::Code::FailedPrecondition, "WORKFLOW_NOT_DELAYED")
    );
    // Debounce: three starts, one workflow, the last input.
    let mut ids = Vec::new();
    for n in 1..=3u64 {
        let options = StartOptions {
            delay: Some(hour),
            debounce_key: Some("user-7".into()),
            ..Default::default()
        };
        let r = c
            .start_json("hold", serde_json::json!({ "ms": n }), options)
            .await
            .unwrap();
        assert_eq!(r.created, n == 1);
        ids.push(r.workflow.workflow_id);
    }
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    c.delay(&ids[0], Duration::ZERO).await.unwrap();
    let w = c.await_workflow(&ids[0], Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!(3)), "ran once, with the latest input");
    // Bad input.
    let bad = [
        StartOptions {
            debounce_key: Some("k".into()),
            ..Default::default()
        },
        StartOptions {
            delay: Some(hour),
            debounce_key: Some("k".into()),
            dedup_id: Some("d".into()),
            ..Default::default()
        },
        StartOptions {
            delay: Some(Duration::from_secs(400 * 24 * 3600)),
            ..Default::default()
        },
        StartOptions {
            delay: Some(hour),
            debounce_key: Some("k".into()),
            debounce_max_delay: Some(Duration::from_secs(60)),
            ..Default::default()
        },
    ];
    for options in bad {
        let (code, why, _) = reason(c.start_json("hold", serde_json::json!({"ms": 1}), options).await);
        assert_eq!((code, why.as_str()), (tonic::Code::InvalidArgument, "INVALID_ARGUMENT"));
    }
    let long_id = StartOptions {
        dedup_id: Some("x".repeat(300)),
        ..Default::default()
    };
    let (code, why, _) = reason(c.start_json("hold", serde_json::json!({"ms": 1}), long_id).await);
    assert_eq!((code, why.as_str()), (tonic::Code::InvalidArgument, "INVALID_ARGUMENT"));
    let nowhere = StartOptions {
        dedup_id: Some("d".into()),
        queue: Some("nowhere".into()),
        ..Default::default()
    };
    let (code, why, _) = reason(c.start_json("hold", serde_json::json!({"ms": 1}), nowhere).await);
    assert_eq!((code, why.as_str()), (tonic::Code::NotFound, "QUEUE_NOT_FOUND"));
    let (code, why, _) = reason(c.delay("nobody", hour).await);
    assert_eq!((code, why.as_str()), (tonic::Code::NotFound, "WORKFLOW_NOT_FOUND"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_starts_with_flow_options_and_moves_a_delay() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let addr = &s.server.addr;
    let (code, _, err) = cli(addr, &["queue", "create", "parts", "--partition-concurrency", "1"]);
    assert_eq!(code, 0, "{err}");
    wait_for_registration(&s.client, "hold").await;
    let (code, out, err) = cli(
        addr,
        &[
            "workflow",
            "start",
            "hold",
            "--input",
            r#"{"ms": 1}"#,
            "--queue",
            "parts",
            "--partition-key",
            "tenant-1",
            "--dedup-id",
            "job-9",
            "--delay",
            "1h",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let id = v["workflow"]["workflow_id"].as_str().unwrap().to_string();
    assert_eq!(
        (
            &v["workflow"]["status"],
            &v["workflow"]["partition_key"],
            &v["workflow"]["dedup_id"]
        ),
        (
            &serde_json::json!("DELAYED"),
            &serde_json::json!("tenant-1"),
            &serde_json::json!("job-9")
        )
    );
    let (code, out, _) = cli(addr, &["workflow", "get", &id]);
    assert!(
        code == 0 && out.contains("tenant-1") && out.contains("runs at"),
        "{out}"
    );
    let (code, _, err) = cli(
        addr,
        &["workflow", "start", "hold", "--queue", "parts", "--dedup-id", "job-9"],
    );
    assert!(code == 1 && err.contains("DEDUP_ID_TAKEN"), "{err}");
    let (code, out, _) = cli(
        addr,
        &[
            "workflow",
            "start",
            "hold",
            "--queue",
            "parts",
            "--dedup-id",
            "job-9",
            "--return-existing",
        ],
    );
    assert!(code == 0 && out.trim() == id, "{out}");
    // Nothing serves "parts" yet: moved to now, it waits ENQUEUED for a worker of its queue.
    let (code, _, err) = cli(addr, &["workflow", "delay", &id, "0s"]);
    assert_eq!(code, 0, "{err}");
    let _w = worker(&s.server.addr, &s.db.dir, "parts", "parts", 2);
    let w = s
        .client
        .await_workflow(&id, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(w.status, WorkflowStatus::Success);
    let (code, _, err) = cli(addr, &["workflow", "start", "hold", "--debounce-key", "k"]);
    assert!(code == 2 && err.contains("--delay"), "{err}");
}

/// A child started without a queue runs on its parent's.
async fn children_start_on_their_parents_queue(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let _w = worker(&s.server.addr, &s.db.dir, "family", "family-q", 4);
    wait_for_registration(c, "hold").await;
    wait_for(
        "the family-q worker to declare its queue",
        Duration::from_secs(60),
        || async { c.get_queue("family-q").await.ok() },
    )
    .await;
    let input = serde_json::json!({"children": [["echo", 5]]});
    c.start_json("family", input, on("family-q", "parent".into()))
        .await
        .unwrap();
    let w = c.await_workflow("parent", Some(Duration::from_secs(60))).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success, "{w:?}");
    let on_queue = all_of(c, "family-q").await;
    let child = on_queue.iter().find(|w| w.parent_workflow_id == "parent");
    assert!(child.is_some(), "the child ran on family-q: {on_queue:?}");
}

on_both_stores!(
    children_start_on_their_parents_queue,
    priority_orders_a_limited_queue,
    a_deep_partition_does_not_starve_a_short_one,
    dedup_delay_and_debounce,
);
