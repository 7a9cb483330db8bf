//! `waymark-bench`: a load generator, not a test. For each backend (SQLite, then PostgreSQL) it
//! starts a real `waymark server` process on a fresh database, runs in-process SDK workers, and
//! measures:
//!
//! 1. throughput: W workflows of K trivial steps started at once; wall time from the first start
//!    until none is left non-terminal;
//! 2. latency: N sequential one-step workflows, start-to-result, p50/p99;
//! 3. a raw baseline on the same database: single-row durable inserts, one row per commit, with
//!    as many concurrent connections as the server's store pool (PostgreSQL 32, SQLite 1 writer).
//!    It runs last, with the server stopped; the two workloads below run before it, after 2.
//! 4. send->recv wakeup: N sequential `waiter` workflows, each already blocked in `recv`; time
//!    from just before `send_message` until the workflow's `recv` returns (the workflow reads the
//!    clock; the workers run in this process), p50/p99; and until `await_workflow` returns;
//! 5. idle database load: M `waiter` workflows blocked in `recv` (10 min timeout, so they park)
//!    and nothing else happening; PostgreSQL transactions per second over a 10 s window, read
//!    from `pg_stat_database` (the bench's own reads subtracted). SQLite has no such counter;
//! 6. memory: P `sleeper` workflows parked (one-hour durable sleeps); the server's RSS;
//! 8. other languages: the throughput workload run by each SDK's bench worker process (see
//!    `polyglot.rs`), steps/s as a ratio of the Rust workers' in the same run;
//! 7. queues with limits: dispatches/s through a limited queue, and the dispatch rate with
//!    1,000 and with 1,000,000 workflows waiting (see `queued.rs`).
//!
//! ```text
//! make bench
//! integration-tests/with-postgres.sh target/release/waymark-bench --workflows 1000 --steps 10
//! # latency and wakeups only, on PostgreSQL (no other languages, no memory or queue workloads):
//! integration-tests/with-postgres.sh target/release/waymark-bench --backend postgres \
//!     --languages "" --parked 0 --queued 0
//! ```
//!
//! Next to the wakeup figures it prints two reference round trips measured in the same runs: a
//! GetWorkflow the server refuses without touching the database, and one that reads a row.

use std::{
    str::FromStr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

mod parked;
mod polyglot;
mod queued;

use clap::{Parser, ValueEnum};
use serde::Deserialize;
use waymark_integration_tests::{Backend, ServerProcess, TestDatabase};
use waymark_sdk::{Client, ListOptions, StartOptions, Worker, WorkflowContext, WorkflowError, WorkflowStatus};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    Sqlite,
    Postgres,
    Both,
}

#[derive(Parser, Debug)]
#[command(about = "Waymark load generator: throughput, latency and a raw-insert baseline per backend")]
struct Args {
    /// Workflows started at once in the throughput workload.
    #[arg(long, default_value_t = 1000)]
    workflows: usize,
    /// Steps per workflow in the throughput workload.
    #[arg(long, default_value_t = 10)]
    steps: u32,
    /// Which backend(s) to run.
    #[arg(long, value_enum, default_value_t = Which::Both)]
    backend: Which,
    /// Sequential one-step workflows in the latency workload.
    #[arg(long, default_value_t = 200)]
    latency_runs: usize,
    /// Concurrent client tasks starting workflows in the throughput workload.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// In-process workers (each with max_concurrent_workflows = --worker-capacity).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long, default_value_t = 1000)]
    worker_capacity: u32,
    /// Rows of the raw baseline on PostgreSQL.
    #[arg(long, default_value_t = 5000)]
    raw_rows_postgres: i64,
    /// Rows of the raw baseline on SQLite.
    #[arg(long, default_value_t = 2000)]
    raw_rows_sqlite: i64,
    /// Give up on the throughput workload after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Sequential send->recv wakeups measured.
    #[arg(long, default_value_t = 200)]
    wakeup_runs: usize,
    /// Workflows blocked in `recv` while the idle database load is measured.
    #[arg(long, default_value_t = 1000)]
    idle_waiters: usize,
    /// Length of the idle measurement window, seconds.
    #[arg(long, default_value_t = 10)]
    idle_window_secs: u64,
    /// Workflows parked while the server's memory is read (0 skips the workload).
    #[arg(long, default_value_t = 100_000)]
    parked: usize,
    /// Workflows dispatched through a queue with limits (0 skips the queue workloads).
    #[arg(long, default_value_t = 20_000)]
    queued: usize,
    /// Workflows waiting in the deep backlog.
    #[arg(long, default_value_t = 1_000_000)]
    backlog: usize,
    /// Other-language bench workers run through the throughput workload (empty: none).
    #[arg(long, value_delimiter = ',', default_value = "python,typescript,go")]
    languages: Vec<String>,
}

#[derive(Deserialize)]
struct BenchInput {
    steps: u32,
}

async fn bench(ctx: WorkflowContext, input: BenchInput) -> Result<u32, WorkflowError> {
    for i in 0..input.steps {
        let got: u32 = ctx
            .step(&format!("s{i}"), move || async move { Ok::<_, String>(i) })
            .await?;
        if got != i {
            return Err(WorkflowError::failed(
                "WrongReplay",
                format!("step {i} replayed as {got}"),
            ));
        }
    }
    Ok(input.steps)
}

async fn one(ctx: WorkflowContext, _input: serde_json::Value) -> Result<u32, WorkflowError> {
    ctx.step("only", || async { Ok::<_, String>(0u32) }).await
}

#[derive(Deserialize)]
struct WaiterInput {
    timeout_secs: u64,
}

/// Blocks in `recv` on topic "ping" and returns what came with the time it came, in Unix
/// microseconds (None on timeout). Its first recorded step is the recv deadline, so one recorded
/// step means "waiting".
async fn waiter(ctx: WorkflowContext, input: WaiterInput) -> Result<Option<(u64, u64)>, WorkflowError> {
    let m: Option<u64> = ctx.recv("ping", Duration::from_secs(input.timeout_secs)).await?;
    Ok(m.map(|sent| (sent, unix_micros())))
}

struct Report {
    backend: &'static str,
    workflows: usize,
    steps: u32,
    starts_s: f64,
    wall_s: f64,
    steps_per_s: f64,
    workflows_per_s: f64,
    succeeded: usize,
    p50_ms: f64,
    p99_ms: f64,
    mean_ms: f64,
    latency_runs: usize,
    raw_rows: i64,
    raw_conns: u32,
    raw_per_s: f64,
    wakeup_runs: usize,
    wakeup_p50_ms: f64,
    wakeup_p99_ms: f64,
    wakeup_mean_ms: f64,
    /// Send until the workflow is done and `await_workflow` has returned.
    wakeup_done_p50_ms: f64,
    idle_waiters: usize,
    idle_window_s: f64,
    /// None on SQLite (no transaction counter).
    idle_db_tx_per_s: Option<f64>,
    /// Raw counter delta and the bench's own transactions subtracted from it.
    idle_db_tx_raw: Option<(i64, i64)>,
    parked: Option<parked::Parked>,
    queued: Option<queued::Queued>,
    polyglot: Vec<polyglot::Polyglot>,
}

impl Report {
    fn ratio(&self) -> f64 {
        self.steps_per_s / self.raw_per_s
    }

    fn print_table(&self) {
        let pg = self.backend == "postgres";
        let target = |met: bool, what: &str| format!("target {what}: {}", if met { "met" } else { "NOT met" });
        let row = |metric: &str, value: String, note: &str| println!("{metric:<36} {value:>14}  {note}");
        println!();
        println!("== {} ==", self.backend);
        row("metric", "value".into(), "note");
        println!("{}", "-".repeat(36 + 1 + 14 + 2 + 30));
        row(
            "throughput: workflows x steps",
            format!("{} x {}", self.workflows, self.steps),
            "",
        );
        row("  all starts acknowledged (s)", format!("{:.3}", self.starts_s), "");
        row("  wall, first start -> all done (s)", format!("{:.3}", self.wall_s), "");
        row("  steps/s", format!("{:.1}", self.steps_per_s), "");
        row("  workflows/s", format!("{:.1}", self.workflows_per_s), "");
        row("  succeeded", format!("{}/{}", self.succeeded, self.workflows), "");
        row("latency: sequential 1-step runs", self.latency_runs.to_string(), "");
        row(
            "  p50 start -> result (ms)",
            format!("{:.2}", self.p50_ms),
            &target(self.p50_ms <= 3.0, "<= 3 ms"),
        );
        row("  p99 start -> result (ms)", format!("{:.2}", self.p99_ms), "");
        row("  mean (ms)", format!("{:.2}", self.mean_ms), "");
        row(
            "raw baseline: rows x connections",
            format!("{} x {}", self.raw_rows, self.raw_conns),
            "one row per commit",
        );
        row("  raw inserts/s", format!("{:.1}", self.raw_per_s), "");
        let ratio_note = if pg && self.workflows == 1000 && self.steps == 10 {
            target(self.ratio() >= 0.5, ">= 0.5 (PG, W=1000 K=10)")
        } else if pg {
            "target >= 0.5 is defined for W=1000 K=10".to_string()
        } else {
            "no target (SQLite)".to_string()
        };
        row(
            "ratio steps/s / raw inserts/s",
            format!("{:.3}", self.ratio()),
            &ratio_note,
        );
        row("wakeup: sequential send -> recv", self.wakeup_runs.to_string(), "");
        let wake_note = if pg {
            target(self.wakeup_p50_ms <= 2.0, "<= 2 ms (PG)")
        } else {
            "target <= 2 ms is defined for PG".to_string()
        };
        row(
            "  p50 send -> recv returns (ms)",
            format!("{:.2}", self.wakeup_p50_ms),
            &wake_note,
        );
        row(
            "  p99 send -> recv returns (ms)",
            format!("{:.2}", self.wakeup_p99_ms),
            "",
        );
        row("  mean (ms)", format!("{:.2}", self.wakeup_mean_ms), "");
        row(
            "  p50 send -> awaited done (ms)",
            format!("{:.2}", self.wakeup_done_p50_ms),
            "incl. completion and AwaitWorkflow",
        );
        row(
            "idle: waiters blocked in recv",
            self.idle_waiters.to_string(),
            &format!("window {:.1} s", self.idle_window_s),
        );
        match (self.idle_db_tx_per_s, self.idle_db_tx_raw) {
            (Some(tps), Some((raw, own))) => {
                row(
                    "  db transactions/s",
                    format!("{tps:.2}"),
                    &target(tps <= 10.0, "<= 10"),
                );
                row(
                    "  counter delta - own reads",
                    format!("{raw} - {own}"),
                    "pg_stat_database xact_commit+xact_rollback",
                );
            }
            _ => row("  db transactions/s", "n/a".into(), "SQLite has no transaction counter"),
        }
        if let Some(p) = &self.parked {
            row(
                "memory: parked workflows",
                p.workflows.to_string(),
                &format!("all parked after {:.1} s", p.seconds),
            );
            row("  server RSS before (MiB)", format!("{:.1}", p.rss_before_mb), "");
            row(
                "  server RSS, all parked (MiB)",
                format!("{:.1}", p.rss_parked_mb),
                &if p.workflows >= 100_000 {
                    target(p.rss_parked_mb <= 500.0, "<= 500 MB at 100k")
                } else {
                    "target <= 500 MB is defined for 100k".to_string()
                },
            );
        }
        for p in &self.polyglot {
            let ratio = p.steps_per_s / self.steps_per_s;
            row(
                &format!("{} worker: steps/s", p.language),
                format!("{:.1}", p.steps_per_s),
                &format!("{}/{} succeeded", p.succeeded, self.workflows),
            );
            let note = if p.language == "go" {
                "no target".to_string()
            } else {
                target(ratio >= 0.3, ">= 0.3x Rust")
            };
            row(
                &format!("  ratio to Rust ({})", p.language),
                format!("{ratio:.2}"),
                &note,
            );
        }
        if let Some(q) = &self.queued {
            row("queues with limits: workflows", q.limited_workflows.to_string(), "");
            row(
                "  dispatched/s",
                format!("{:.0}", q.limited_dispatch_per_s),
                &if pg {
                    target(q.limited_dispatch_per_s >= 5000.0, ">= 5000/s (PG)")
                } else {
                    String::new()
                },
            );
            row("  dispatch/s, 1,000 waiting", format!("{:.0}", q.shallow_per_s), "");
            row(
                &format!("  dispatch/s, {} waiting", q.deep),
                format!("{:.0}", q.deep_per_s),
                "",
            );
            let spread = q.depth_ratio().max(1.0 / q.depth_ratio());
            row(
                "  spread (larger / smaller)",
                format!("{spread:.2}"),
                &target(spread <= 1.5, "within 1.5x"),
            );
        }
    }

    fn summary(&self) -> String {
        format!(
            "backend={} steps_per_s={:.1} workflows_per_s={:.1} p50_ms={:.2} p99_ms={:.2} raw_inserts_per_s={:.1} ratio={:.3} \
             wakeup_p50_ms={:.2} wakeup_p99_ms={:.2} idle_db_tx_per_s={} parked_rss_mb={} \
             limited_dispatch_per_s={} backlog_shallow_per_s={} backlog_deep_per_s={}",
            self.backend,
            self.steps_per_s,
            self.workflows_per_s,
            self.p50_ms,
            self.p99_ms,
            self.raw_per_s,
            self.ratio(),
            self.wakeup_p50_ms,
            self.wakeup_p99_ms,
            self.idle_db_tx_per_s
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "n/a".into()),
            self.parked
                .as_ref()
                .map(|p| format!("{:.1}", p.rss_parked_mb))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.limited_dispatch_per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.shallow_per_s))
                .unwrap_or_else(|| "n/a".into()),
            self.queued
                .as_ref()
                .map(|q| format!("{:.0}", q.deep_per_s))
                .unwrap_or_else(|| "n/a".into()),
        )
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Retries a zero-step `bench` start until the workers' registration is visible to the server.
async fn wait_for_workers(client: &Client) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let probe = client
            .start_json(
                "bench",
                serde_json::json!({"steps": 0}),
                StartOptions::id("bench-registration-probe"),
            )
            .await;
        match probe {
            Ok(s) => {
                client
                    .await_workflow(&s.workflow.workflow_id, Some(Duration::from_secs(60)))
                    .await?;
                return Ok(());
            }
            Err(e) if e.reason() == Some("WORKFLOW_NAME_UNKNOWN") => {}
            Err(e) => anyhow::bail!("unexpected error while waiting for workers to register: {e}"),
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(60),
            "workers did not register within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const UNFINISHED: [WorkflowStatus; 3] = [
    WorkflowStatus::Enqueued,
    WorkflowStatus::Delayed,
    WorkflowStatus::Pending,
];

/// Whether any `workflow_name` workflow is in one of `statuses` (a page of one is enough).
async fn any_in(client: &Client, workflow_name: &str, statuses: &[WorkflowStatus]) -> anyhow::Result<bool> {
    let (page, _) = client
        .list(ListOptions {
            statuses: statuses.to_vec(),
            workflow_name: Some(workflow_name.into()),
            page_size: 1,
            ..Default::default()
        })
        .await?;
    Ok(!page.is_empty())
}

/// Whether any `bench` workflow is not terminal yet.
async fn any_unfinished(client: &Client) -> anyhow::Result<bool> {
    any_in(client, "bench", &UNFINISHED).await
}

async fn count_status(client: &Client, status: WorkflowStatus) -> anyhow::Result<usize> {
    let mut n = 0;
    let mut token = None;
    loop {
        let (page, next) = client
            .list(ListOptions {
                statuses: vec![status],
                workflow_name: Some("bench".into()),
                page_size: 500,
                page_token: token,
                ..Default::default()
            })
            .await?;
        n += page.iter().filter(|w| w.workflow_id.starts_with("tp-")).count();
        match next {
            Some(t) => token = Some(t),
            None => return Ok(n),
        }
    }
}

async fn throughput(args: &Args, addr: &str) -> anyhow::Result<(f64, f64, usize)> {
    let mut clients = Vec::new();
    for _ in 0..args.clients.clamp(1, 8) {
        clients.push(Client::connect(addr).await?);
    }
    let next = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..args.clients.max(1) {
        let client = clients[c % clients.len()].clone();
        let next = next.clone();
        let (w, k) = (args.workflows, args.steps);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= w {
                    return Ok::<_, anyhow::Error>(());
                }
                client
                    .start_json(
                        "bench",
                        serde_json::json!({"steps": k}),
                        StartOptions::id(format!("tp-{i}")),
                    )
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let starts = t0.elapsed();
    let poller = &clients[0];
    let deadline = Duration::from_secs(args.timeout_secs);
    while any_unfinished(poller).await? {
        anyhow::ensure!(
            t0.elapsed() < deadline,
            "throughput workload did not finish within {deadline:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wall = t0.elapsed();
    let succeeded = count_status(poller, WorkflowStatus::Success).await?;
    Ok((starts.as_secs_f64(), wall.as_secs_f64(), succeeded))
}

async fn latency(runs: usize, addr: &str) -> anyhow::Result<Vec<f64>> {
    let client = Client::connect(addr).await?;
    // Warm-up, not measured.
    for i in 0..5 {
        let s = client
            .start_json(
                "one",
                serde_json::json!(null),
                StartOptions::id(format!("lat-warm-{i}")),
            )
            .await?;
        client
            .await_workflow(&s.workflow.workflow_id, Some(Duration::from_secs(60)))
            .await?;
    }
    let mut out = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        let s = client
            .start_json("one", serde_json::json!(null), StartOptions::id(format!("lat-{i}")))
            .await?;
        let w = client
            .await_workflow(&s.workflow.workflow_id, Some(Duration::from_secs(60)))
            .await?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        anyhow::ensure!(
            w.status == WorkflowStatus::Success,
            "latency run {i} ended {:?}",
            w.status
        );
        out.push(ms);
    }
    out.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
}

/// Polls the workflow's recorded steps until the recv deadline (its first step) is there, i.e.
/// until it is blocked in `recv`. Not measured.
async fn wait_until_waiting(client: &Client, id: &str, poll: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        if !client.steps(id).await?.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(120),
            "{id} did not record its recv deadline within 120 s"
        );
        tokio::time::sleep(poll).await;
    }
}

fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// N sequential wakeups: start a `waiter`, wait (unmeasured) until it is blocked in `recv`, then
/// send. Returns, sorted, in ms: send until `recv` returned in the workflow, and send until
/// `await_workflow` returned.
async fn wakeup(runs: usize, addr: &str) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let client = Client::connect(addr).await?;
    let mut out = Vec::with_capacity(runs);
    let mut done = Vec::with_capacity(runs);
    let (mut refused, mut reads, mut sends) = (Vec::new(), Vec::new(), Vec::new());
    // 5 warm-up runs, not measured.
    for i in 0..runs + 5 {
        let id = if i < 5 {
            format!("wake-warm-{i}")
        } else {
            format!("wake-{}", i - 5)
        };
        client
            .start_json(
                "waiter",
                serde_json::json!({"timeout_secs": 60}),
                StartOptions::id(id.clone()),
            )
            .await?;
        wait_until_waiting(&client, &id, Duration::from_millis(2)).await?;
        // The deadline step is recorded just before the recv request reaches the server: a short
        // pause makes sure the message wakes a blocked wait rather than being found on arrival.
        tokio::time::sleep(Duration::from_millis(5)).await;
        // Reference round trips, to read the wakeup against: one the server refuses without
        // touching the database, and one read.
        let t = Instant::now();
        let _ = client.get("").await;
        let refused_ms = t.elapsed().as_secs_f64() * 1000.0;
        let t = Instant::now();
        client.get(&id).await?;
        let read_ms = t.elapsed().as_secs_f64() * 1000.0;
        let sent = unix_micros();
        let t = Instant::now();
        client.send_message(&id, "ping", &sent, None).await?;
        let send_ms = t.elapsed().as_secs_f64() * 1000.0;
        let w = client.await_workflow(&id, Some(Duration::from_secs(60))).await?;
        let done_ms = t.elapsed().as_secs_f64() * 1000.0;
        let got: Option<(u64, u64)> = w.output.clone().and_then(|o| serde_json::from_value(o).ok());
        let received = match got {
            Some((s, received)) if w.status == WorkflowStatus::Success && s == sent => received,
            _ => anyhow::bail!(
                "wakeup run {id} ended {:?} with output {:?} (sent {sent})",
                w.status,
                w.output
            ),
        };
        if i >= 5 {
            refused.push(refused_ms);
            reads.push(read_ms);
            sends.push(send_ms);
            out.push(received.saturating_sub(sent) as f64 / 1000.0);
            done.push(done_ms);
        }
    }
    out.sort_by(|a, b| a.total_cmp(b));
    done.sort_by(|a, b| a.total_cmp(b));
    for v in [&mut refused, &mut reads, &mut sends] {
        v.sort_by(|a, b| a.total_cmp(b));
    }
    eprintln!(
        "[wakeup] p50 round trips (ms): refused GetWorkflow {:.2}, GetWorkflow {:.2}, SendMessage {:.2}",
        percentile(&refused, 50.0),
        percentile(&reads, 50.0),
        percentile(&sends, 50.0)
    );
    Ok((out, done))
}

/// PostgreSQL's transaction counter for the database at `url`, read on a fresh connection with
/// one simple-protocol query: exactly one transaction of our own, which the snapshot itself does
/// not include and which is flushed to the counter when the connection closes.
async fn pg_xacts(url: &str) -> anyhow::Result<i64> {
    use sqlx::{Connection, Row};
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let row = sqlx::raw_sql(
        "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await?;
    let n: i64 = row.try_get(0)?;
    conn.close().await?;
    Ok(n)
}

/// PostgreSQL (15+) backends report their transaction counts lazily — an idle backend flushes
/// them up to 10 s later — so the window opens only after the parking burst's counts have
/// surely landed; otherwise they are counted as idle load.
const SETTLE: Duration = Duration::from_secs(15);

/// Transactions of our own that `pg_xacts` adds to the counter between two of its reads.
const OWN_XACTS_PER_READ: i64 = 1;

struct Idle {
    window_s: f64,
    /// PostgreSQL only: (transactions/s, raw counter delta, own transactions subtracted).
    pg: Option<(f64, i64, i64)>,
}

/// Starts `n` waiters (10 min recv timeout), waits until every one is blocked in `recv`, lets the
/// server settle, then measures the database's transactions over `window`. Afterwards wakes every
/// waiter with a message and waits until all have finished.
async fn idle_load(n: usize, window: Duration, backend: Backend, db_url: &str, addr: &str) -> anyhow::Result<Idle> {
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(Client::connect(addr).await?);
    }
    let for_each = |f: fn(Client, String) -> futures::future::BoxFuture<'static, anyhow::Result<()>>| {
        let next = Arc::new(AtomicUsize::new(0));
        let mut handles = Vec::new();
        for c in &clients {
            let (client, next) = (c.clone(), next.clone());
            handles.push(tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, anyhow::Error>(());
                    }
                    f(client.clone(), format!("idle-{i}")).await?;
                }
            }));
        }
        async move {
            for h in handles {
                h.await??;
            }
            Ok::<_, anyhow::Error>(())
        }
    };

    let t0 = Instant::now();
    for_each(|client, id| {
        Box::pin(async move {
            client
                .start_json("waiter", serde_json::json!({"timeout_secs": 600}), StartOptions::id(id))
                .await?;
            Ok(())
        })
    })
    .await?;
    for_each(|client, id| Box::pin(async move { wait_until_waiting(&client, &id, Duration::from_millis(50)).await }))
        .await?;
    // A 10-minute wait is past the workers' park threshold: each waiter parks. Measure only
    // once all have, so the window sees a settled system rather than the parking itself.
    while any_in(
        &clients[0],
        "waiter",
        &[WorkflowStatus::Enqueued, WorkflowStatus::Pending],
    )
    .await?
    {
        anyhow::ensure!(t0.elapsed() < Duration::from_secs(300), "idle waiters did not all park");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "[idle] {n} waiters parked after {:.2} s; settling {SETTLE:?}, then a {:?} window",
        t0.elapsed().as_secs_f64(),
        window
    );
    tokio::time::sleep(SETTLE).await;

    // Nothing of ours talks to the server during the window.
    let before = match backend {
        Backend::Postgres => Some(pg_xacts(db_url).await?),
        Backend::Sqlite => None,
    };
    let w0 = Instant::now();
    tokio::time::sleep(window).await;
    let after = match backend {
        Backend::Postgres => Some(pg_xacts(db_url).await?),
        Backend::Sqlite => None,
    };
    let window_s = w0.elapsed().as_secs_f64();
    let pg = match (before, after) {
        (Some(b), Some(a)) => {
            let raw = a - b;
            let own = OWN_XACTS_PER_READ;
            Some((((raw - own) as f64) / window_s, raw, own))
        }
        _ => None,
    };

    let t1 = Instant::now();
    for_each(|client, id| {
        Box::pin(async move {
            client.send_message(&id, "ping", &unix_micros(), None).await?;
            Ok(())
        })
    })
    .await?;
    let poller = &clients[0];
    while any_in(poller, "waiter", &UNFINISHED).await? {
        anyhow::ensure!(
            t1.elapsed() < Duration::from_secs(120),
            "idle waiters did not all finish within 120 s of their messages"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "[idle] all {n} waiters woken and finished {:.2} s after the first send",
        t1.elapsed().as_secs_f64()
    );
    Ok(Idle { window_s, pg })
}

const PAYLOAD: &str = "bench-raw-payload-0123456789abcdefghijklmnopqrstuvwxyz";

/// Single-row inserts, one per commit (autocommit), `conns` at once. Returns rows/s.
async fn raw_inserts(backend: Backend, url: &str, rows: i64) -> anyhow::Result<(u32, f64)> {
    let next = Arc::new(std::sync::atomic::AtomicI64::new(0));
    match backend {
        Backend::Postgres => {
            let conns = 32u32;
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(conns)
                .min_connections(conns)
                .connect(url)
                .await?;
            sqlx::query("CREATE TABLE bench_raw (id bigint PRIMARY KEY, payload text)")
                .execute(&pool)
                .await?;
            let t0 = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..conns {
                let (pool, next) = (pool.clone(), next.clone());
                tasks.push(tokio::spawn(async move {
                    let mut conn = pool.acquire().await?;
                    loop {
                        let id = next.fetch_add(1, Ordering::Relaxed);
                        if id >= rows {
                            return Ok::<_, anyhow::Error>(());
                        }
                        sqlx::query("INSERT INTO bench_raw (id, payload) VALUES ($1, $2)")
                            .bind(id)
                            .bind(PAYLOAD)
                            .execute(&mut *conn)
                            .await?;
                    }
                }));
            }
            for t in tasks {
                t.await??;
            }
            let secs = t0.elapsed().as_secs_f64();
            pool.close().await;
            Ok((conns, rows as f64 / secs))
        }
        Backend::Sqlite => {
            use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
            let path = url.trim_start_matches("sqlite://").trim_start_matches("sqlite:");
            let options = SqliteConnectOptions::from_str(&format!("sqlite://{path}"))?
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(30));
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(options)
                .await?;
            sqlx::query("CREATE TABLE bench_raw (id bigint PRIMARY KEY, payload text)")
                .execute(&pool)
                .await?;
            let t0 = Instant::now();
            for id in 0..rows {
                sqlx::query("INSERT INTO bench_raw (id, payload) VALUES (?1, ?2)")
                    .bind(id)
                    .bind(PAYLOAD)
                    .execute(&pool)
                    .await?;
            }
            let secs = t0.elapsed().as_secs_f64();
            pool.close().await;
            Ok((1, rows as f64 / secs))
        }
    }
}

async fn run_backend(args: &Args, backend: Backend) -> anyhow::Result<Option<Report>> {
    let name = match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    };
    let Some(db) = TestDatabase::new(backend).await else {
        eprintln!("[{name}] skipped (no database)");
        return Ok(None);
    };
    eprintln!("[{name}] database {} ; starting server", db.url);
    let mut server = ServerProcess::start(&db, &[]).await;
    eprintln!("[{name}] server at {} (log: {})", server.addr, server.log.display());

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for i in 0..args.workers.max(1) {
        let worker = Worker::builder()
            .server(server.addr.clone())
            .worker_id(format!("bench-worker-{i}"))
            .app_name("waymark-bench")
            .app_version("bench-1")
            .max_concurrent_workflows(args.worker_capacity)
            .workflow("bench", bench)
            .workflow("one", one)
            .workflow("waiter", waiter)
            .workflow("sleeper", parked::sleeper)
            .workflow("noop", queued::noop)
            .build();
        let mut rx = stop_rx.clone();
        workers.push(tokio::spawn(worker.run_until(async move {
            let _ = rx.wait_for(|v| *v).await;
        })));
    }
    let client = server.client().await;
    wait_for_workers(&client).await?;
    eprintln!(
        "[{name}] workers registered; throughput workload {} x {}",
        args.workflows, args.steps
    );

    let (starts_s, wall_s, succeeded) = throughput(args, &server.addr).await?;
    let total_steps = args.workflows as f64 * args.steps as f64;
    eprintln!(
        "[{name}] throughput done in {wall_s:.2} s; latency workload {} runs",
        args.latency_runs
    );

    let mut polyglot = Vec::new();
    for language in args.languages.iter().filter(|l| !l.is_empty()) {
        let language = polyglot::language(language)?;
        eprintln!("[{name}] {language} worker: throughput workload");
        if let Some(p) = polyglot::run(language, &server.addr, args.workflows, args.steps).await? {
            eprintln!("[{name}] {language}: {:.1} steps/s", p.steps_per_s);
            polyglot.push(p);
        }
    }

    let lat = latency(args.latency_runs, &server.addr).await?;
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;

    eprintln!("[{name}] wakeup workload {} runs", args.wakeup_runs);
    let (wake, wake_done) = wakeup(args.wakeup_runs, &server.addr).await?;
    let wake_mean = wake.iter().sum::<f64>() / wake.len().max(1) as f64;

    let capacity = args.workers.max(1) * args.worker_capacity as usize;
    anyhow::ensure!(
        capacity >= args.idle_waiters,
        "--idle-waiters {} needs workers x worker-capacity >= it (have {capacity})",
        args.idle_waiters
    );
    eprintln!("[{name}] idle workload: {} waiters", args.idle_waiters);
    let idle = idle_load(
        args.idle_waiters,
        Duration::from_secs(args.idle_window_secs),
        backend,
        &db.url,
        &server.addr,
    )
    .await?;

    let parked = if args.parked > 0 {
        eprintln!("[{name}] memory workload: {} parked workflows", args.parked);
        let p = parked::run(args.parked, &server.addr, server.pid()).await?;
        eprintln!(
            "[{name}] server RSS {:.1} MiB with {} parked (was {:.1})",
            p.rss_parked_mb, p.workflows, p.rss_before_mb
        );
        Some(p)
    } else {
        None
    };

    let queued = if args.queued > 0 {
        eprintln!(
            "[{name}] queue workloads: {} through a limited queue; backlog {}",
            args.queued, args.backlog
        );
        Some(queued::run(backend, &db.url, &server.addr, args.queued, args.backlog).await?)
    } else {
        None
    };

    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    // The raw baseline runs on the same database with the server stopped, so neither disturbs
    // the other.
    server.terminate();
    if backend == Backend::Postgres {
        // Check of the own-transaction correction: with the server stopped, two reads 1 s apart
        // should differ by exactly our own transactions.
        tokio::time::sleep(SETTLE).await;
        let a = pg_xacts(&db.url).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let b = pg_xacts(&db.url).await?;
        eprintln!(
            "[{name}] counter check, server stopped: delta {} over 1 s (own reads: {OWN_XACTS_PER_READ})",
            b - a
        );
    }
    let raw_rows = match backend {
        Backend::Sqlite => args.raw_rows_sqlite,
        Backend::Postgres => args.raw_rows_postgres,
    };
    eprintln!("[{name}] server stopped; raw baseline {raw_rows} rows");
    let (raw_conns, raw_per_s) = raw_inserts(backend, &db.url, raw_rows).await?;

    Ok(Some(Report {
        backend: name,
        workflows: args.workflows,
        steps: args.steps,
        starts_s,
        wall_s,
        steps_per_s: total_steps / wall_s,
        workflows_per_s: args.workflows as f64 / wall_s,
        succeeded,
        p50_ms: percentile(&lat, 50.0),
        p99_ms: percentile(&lat, 99.0),
        mean_ms: mean,
        latency_runs: lat.len(),
        raw_rows,
        raw_conns,
        raw_per_s,
        wakeup_runs: wake.len(),
        wakeup_p50_ms: percentile(&wake, 50.0),
        wakeup_p99_ms: percentile(&wake, 99.0),
        wakeup_mean_ms: wake_mean,
        wakeup_done_p50_ms: percentile(&wake_done, 50.0),
        idle_waiters: args.idle_waiters,
        idle_window_s: idle.window_s,
        idle_db_tx_per_s: idle.pg.map(|(tps, _, _)| tps),
        idle_db_tx_raw: idle.pg.map(|(_, raw, own)| (raw, own)),
        parked,
        queued,
        polyglot,
    }))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let backends: &[Backend] = match args.backend {
        Which::Sqlite => &[Backend::Sqlite],
        Which::Postgres => &[Backend::Postgres],
        Which::Both => &[Backend::Sqlite, Backend::Postgres],
    };
    let mut reports = Vec::new();
    for &b in backends {
        if let Some(r) = run_backend(&args, b).await? {
            r.print_table();
            reports.push(r);
        }
    }
    println!();
    for r in &reports {
        println!("{}", r.summary());
    }
    Ok(())
}
