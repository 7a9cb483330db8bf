//! Dispatch through queues with limits:
//! 1. limited throughput: N trivial workflows waiting in a queue with every limit set (high
//!    enough not to bind); workers attach and take them; dispatches per second from the first
//!    arrival at a worker to the last;
//! 2. backlog depth: dispatch rate of the first `WINDOW` workflows a freshly attached worker
//!    receives from a limited queue holding 1,000 waiting workflows, and holding 1,000,000
//!    (median of `ROUNDS` rounds each). A deep backlog must not slow dispatch down.
//!
//! The backlogs are seeded with one bulk INSERT (a bench fixture; going through StartWorkflow a
//! million times would measure starts, not dispatch).

use std::{
    collections::HashSet,
    sync::Mutex,
    time::{Duration, Instant},
};

use anyhow::Context;
use futures::StreamExt;
use tokio::sync::Notify;
use waymark_integration_tests::Backend;
use waymark_sdk::{
    Client, ListOptions, QueueLimits, StartOptions, Worker, WorkflowContext, WorkflowError, WorkflowInfo,
    WorkflowStatus,
};

use crate::verify::{expect_output, thousands};

/// Arrivals of `noop` workflows at the workers of this process: when, and which workflow. The
/// id lets a run tell a second dispatch of one workflow from a new one.
static ARRIVALS: Mutex<Vec<(Instant, String)>> = Mutex::new(Vec::new());
/// Woken at every arrival, so `take` waits for arrivals rather than polling for them.
static ARRIVED: Notify = Notify::const_new();

pub async fn noop(ctx: WorkflowContext, _input: serde_json::Value) -> Result<u32, WorkflowError> {
    ARRIVALS
        .lock()
        .unwrap()
        .push((Instant::now(), ctx.workflow_id().to_string()));
    ARRIVED.notify_waiters();
    Ok(0)
}

const WINDOW: usize = 1000;
const ROUNDS: usize = 3;

pub struct Queued {
    pub limited_workflows: usize,
    pub limited_dispatch_per_s: f64,
    pub shallow_per_s: f64,
    pub deep: usize,
    pub deep_per_s: f64,
}

impl Queued {
    pub fn depth_ratio(&self) -> f64 {
        self.shallow_per_s / self.deep_per_s
    }
}

fn limits() -> QueueLimits {
    QueueLimits {
        worker_concurrency: Some(5_000),
        global_concurrency: Some(100_000),
        rate_limit: Some((1_000_000, Duration::from_secs(1))),
        partition_concurrency: None,
    }
}

/// Every status but SUCCESS: what a queue whose workflows all ran must not hold.
const NOT_SUCCESS: [WorkflowStatus; 6] = [
    WorkflowStatus::Enqueued,
    WorkflowStatus::Delayed,
    WorkflowStatus::Pending,
    WorkflowStatus::Error,
    WorkflowStatus::Cancelled,
    WorkflowStatus::MaxRecoveryAttemptsExceeded,
];

/// A workflow of `queue` in one of `statuses`, if it holds any (a page of one is enough): the
/// whole row, so a failed check can say which workflow it found and what state it was in.
async fn first_in_queue(
    client: &Client,
    queue: &str,
    statuses: &[WorkflowStatus],
) -> anyhow::Result<Option<WorkflowInfo>> {
    let (page, _) = client
        .list(ListOptions {
            statuses: statuses.to_vec(),
            queue: Some(queue.into()),
            page_size: 1,
            ..Default::default()
        })
        .await?;
    Ok(page.into_iter().next())
}

/// One line naming a workflow a check did not expect: id, status, attempts, owner, failure.
fn describe(w: &WorkflowInfo) -> String {
    let failure = w
        .failure
        .as_ref()
        .map(|f| format!(", failure {}: {}", f.kind, f.message))
        .unwrap_or_default();
    format!(
        "{} is {} (recovery attempts {}, epoch {}, worker {:?}{failure})",
        w.workflow_id,
        w.status.as_str(),
        w.recovery_attempts,
        w.epoch,
        w.worker_id
    )
}

/// Runs two fresh workers on `queue` until `want` workflows have arrived, and returns the first
/// `want` arrivals. Fails unless they are `want` different workflows that each ended
/// SUCCESS with output 0; the workers stop only once they have, so the rate counts finished
/// work. What the workers held beyond them when stopped goes back to the queue (the server does
/// that after its recovery grace), and this returns only once it has: the next run starts from a
/// queue with nothing still held by a stopped worker.
async fn take(client: &Client, addr: &str, queue: &str, want: usize) -> anyhow::Result<Vec<Instant>> {
    ARRIVALS.lock().unwrap().clear();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for i in 0..2 {
        let worker = Worker::builder()
            .server(addr.to_string())
            .worker_id(format!("queued-{queue}-{i}-{}", uuid::Uuid::new_v4().simple()))
            .app_name("waymark-bench")
            .app_version("bench-1")
            .max_concurrent_workflows(1000)
            .queue(queue)
            .workflow("noop", noop)
            .build();
        let mut rx = stop_rx.clone();
        workers.push(tokio::spawn(worker.run_until(async move {
            let _ = rx.wait_for(|v| *v).await;
        })));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let arrived = ARRIVED.notified();
        tokio::pin!(arrived);
        // Registered before the count is read, so an arrival in between still wakes us.
        arrived.as_mut().enable();
        let n = ARRIVALS.lock().unwrap().len();
        if n >= want {
            break;
        }
        if tokio::time::timeout_at(deadline, arrived).await.is_err() {
            anyhow::bail!("only {} of {} arrived within 120 s", thousands(n), thousands(want));
        }
    }
    let mut window = ARRIVALS.lock().unwrap().clone();
    window.sort();
    window.truncate(want);
    let distinct: HashSet<&str> = window.iter().map(|(_, id)| id.as_str()).collect();
    anyhow::ensure!(
        distinct.len() == want,
        "{} of the first {} arrivals were a workflow dispatched again, not a new one",
        thousands(want - distinct.len()),
        thousands(want)
    );
    let finished: Vec<_> = futures::stream::iter(window.iter().map(|(_, id)| {
        let client = client.clone();
        let id = id.clone();
        async move { client.await_workflow(&id, Some(Duration::from_secs(60))).await }
    }))
    .buffer_unordered(64)
    .collect()
    .await;
    let finished = finished.into_iter().collect::<Result<Vec<_>, _>>()?;
    expect_output(want, &finished, &serde_json::json!(0))?;

    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    let t = Instant::now();
    while let Some(w) = first_in_queue(client, queue, &[WorkflowStatus::Pending]).await? {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(120),
            "queue {queue}: workflows of the stopped workers still PENDING after 120 s, {}",
            describe(&w)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(window.into_iter().map(|(t, _)| t).collect())
}

/// Arrivals per second over the first `n` arrivals.
fn rate(arrivals: &[Instant], n: usize) -> f64 {
    let n = n.min(arrivals.len());
    let span = arrivals[n - 1].duration_since(arrivals[0]).as_secs_f64();
    (n - 1) as f64 / span.max(1e-6)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Inserts `n` ENQUEUED `noop` workflows into `queue`, ids `<prefix><i>`.
async fn seed(backend: Backend, url: &str, queue: &str, prefix: &str, n: i64) -> anyhow::Result<()> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64;
    match backend {
        Backend::Postgres => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(url).await?;
            sqlx::query(
                "INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, created_at, updated_at) \
                 SELECT $1 || g, 'noop', 'ENQUEUED', $2, 'null', $3 + g, $3 + g FROM generate_series(1, $4) g",
            )
            .bind(prefix)
            .bind(queue)
            .bind(now)
            .bind(n)
            .execute(&mut c)
            .await?;
            sqlx::query("ANALYZE workflows").execute(&mut c).await?;
        }
        Backend::Sqlite => {
            use sqlx::Connection;
            let mut c = sqlx::SqliteConnection::connect(url).await?;
            sqlx::query(
                "WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?4) \
                 INSERT INTO workflows (workflow_id, workflow_name, status, queue_name, input, created_at, updated_at) \
                 SELECT ?1 || g, 'noop', 'ENQUEUED', ?2, 'null', ?3 + g, ?3 + g FROM s",
            )
            .bind(prefix)
            .bind(queue)
            .bind(now)
            .bind(n)
            .execute(&mut c)
            .await?;
        }
    }
    Ok(())
}

pub async fn run(backend: Backend, url: &str, addr: &str, limited: usize, deep: usize) -> anyhow::Result<Queued> {
    let client = Client::connect(addr).await?;
    for q in ["bench-limited", "bench-shallow", "bench-deep"] {
        client.create_queue(q, &limits()).await?;
    }
    // 1. Limited throughput: started through the API before any worker serves the queue.
    let mut tasks = Vec::new();
    for lane in 0..32 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for i in (lane..limited).step_by(32) {
                let options = StartOptions {
                    queue: Some("bench-limited".into()),
                    ..StartOptions::id(format!("lq-{i}"))
                };
                client.start_json("noop", serde_json::json!(null), options).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let arrivals = take(&client, addr, "bench-limited", limited)
        .await
        .context("limited queue")?;
    let limited_dispatch_per_s = rate(&arrivals, limited);
    eprintln!("  limited queue: {limited} dispatched at {limited_dispatch_per_s:.0}/s");
    // 2. Backlog depth.
    let mut shallow = Vec::new();
    for round in 0..ROUNDS {
        seed(backend, url, "bench-shallow", &format!("sh{round}-"), WINDOW as i64).await?;
        let arrivals = take(&client, addr, "bench-shallow", WINDOW)
            .await
            .with_context(|| format!("backlog of {WINDOW} (round {})", round + 1))?;
        shallow.push(rate(&arrivals, WINDOW));
    }
    let t = Instant::now();
    seed(backend, url, "bench-deep", "dp-", deep as i64).await?;
    eprintln!("  seeded {deep} in {:.1} s", t.elapsed().as_secs_f64());
    let mut deep_rates = Vec::new();
    for round in 0..ROUNDS {
        let arrivals = take(&client, addr, "bench-deep", WINDOW)
            .await
            .with_context(|| format!("backlog of {} (round {})", thousands(deep), round + 1))?;
        deep_rates.push(rate(&arrivals, WINDOW));
    }
    // Whatever ran must have succeeded: the limited and shallow queues hold nothing else, the
    // deep one nothing but SUCCESS and the backlog still waiting.
    for (queue, allowed) in [
        ("bench-limited", None),
        ("bench-shallow", None),
        ("bench-deep", Some(WorkflowStatus::Enqueued)),
    ] {
        let bad: Vec<_> = NOT_SUCCESS.into_iter().filter(|s| Some(*s) != allowed).collect();
        if let Some(w) = first_in_queue(&client, queue, &bad).await? {
            anyhow::bail!(
                "queue {queue}: holds workflows that did not end SUCCESS, {} (statuses looked for: {})",
                describe(&w),
                bad.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            );
        }
    }
    eprintln!("  first {WINDOW} dispatches/s, shallow {shallow:?}, deep {deep_rates:?}");
    Ok(Queued {
        limited_workflows: limited,
        limited_dispatch_per_s,
        shallow_per_s: median(shallow),
        deep,
        deep_per_s: median(deep_rates),
    })
}
