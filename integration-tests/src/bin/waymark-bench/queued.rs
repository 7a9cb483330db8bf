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
    sync::Mutex,
    time::{Duration, Instant},
};

use waymark_integration_tests::Backend;
use waymark_sdk::{Client, QueueLimits, StartOptions, Worker, WorkflowContext, WorkflowError};

/// Arrival times of `noop` workflows at the workers of this process.
static ARRIVALS: Mutex<Vec<Instant>> = Mutex::new(Vec::new());

pub async fn noop(_ctx: WorkflowContext, _input: serde_json::Value) -> Result<u32, WorkflowError> {
    ARRIVALS.lock().unwrap().push(Instant::now());
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

/// Runs workers on `queue` until `want` arrivals were seen (or a minute passed); returns the
/// arrivals of this run.
async fn take(addr: &str, queue: &str, want: usize) -> anyhow::Result<Vec<Instant>> {
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
    let t0 = Instant::now();
    while ARRIVALS.lock().unwrap().len() < want {
        anyhow::ensure!(
            t0.elapsed() < Duration::from_secs(120),
            "queue {queue}: arrivals stalled"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    let mut got = ARRIVALS.lock().unwrap().clone();
    got.sort();
    Ok(got)
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
    let arrivals = take(addr, "bench-limited", limited).await?;
    let limited_dispatch_per_s = rate(&arrivals, limited);
    eprintln!("  limited queue: {limited} dispatched at {limited_dispatch_per_s:.0}/s");
    // 2. Backlog depth.
    let mut shallow = Vec::new();
    for round in 0..ROUNDS {
        seed(backend, url, "bench-shallow", &format!("sh{round}-"), WINDOW as i64).await?;
        shallow.push(rate(&take(addr, "bench-shallow", WINDOW).await?, WINDOW));
    }
    let t = Instant::now();
    seed(backend, url, "bench-deep", "dp-", deep as i64).await?;
    eprintln!("  seeded {deep} in {:.1} s", t.elapsed().as_secs_f64());
    let mut deep_rates = Vec::new();
    for _ in 0..ROUNDS {
        deep_rates.push(rate(&take(addr, "bench-deep", WINDOW).await?, WINDOW));
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
