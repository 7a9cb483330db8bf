//! `waymark-bench`: a load generator, not a test. For each backend (SQLite, then PostgreSQL) it
//! starts a real `waymark server` process on a fresh database, runs in-process SDK workers, and
//! measures:
//!
//! 1. throughput: W workflows of K trivial steps started at once; wall time from the first start
//!    until none is left non-terminal;
//! 2. latency: N sequential one-step workflows, start-to-result, p50/p99;
//! 3. a raw baseline on the same database server (or file system): single-row durable inserts,
//!    one row per commit, with as many concurrent connections as the server's store pool
//!    (PostgreSQL 32, SQLite 1 writer), 3 runs on fresh databases before the server starts and 3
//!    after it stopped; the throughput ratio divides by the median of the six (see `raw.rs`);
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
//!    1,000 and with 1,000,000 workflows waiting (see `queued.rs`);
//! 9. the cost of TLS and API keys: workloads 1 and 2 again on a second server with both on,
//!    as ratios of the plaintext figures from the same run (see `secured.rs`);
//! 10. the cost of observability: workloads 1 and 2 again on a server exporting every span to
//!     an OTLP receiver and scraped every second (see `observed.rs`); the plain server (export
//!     off) gives the figures it is compared with;
//! 11. the cost of an open console: workloads 1 and 2 again while a console's list page is
//!     refreshed every second over gRPC-web (see `console.rs`);
//! 12. the unary API: StartWorkflow and GetWorkflow from 1 caller and from 50, calls/s, the
//!     starts as a ratio of the raw commit rate (see `unary.rs`).
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
//!
//! A figure is printed only when the workflows behind it are, read back from the store, what the
//! workload meant (all SUCCESS with the right output, or all parked); otherwise that backend
//! prints no table and the run exits non-zero naming the workload (see `verify.rs`). The report
//! starts with the machine and, per backend, the file system the database lives on.
//!
//! `waymark-bench soak` is another mode: a long run on PostgreSQL with workers killed under it
//! (`make soak`, see `soak.rs`).

use std::time::Duration;

mod collecting;
mod console;
mod idle;
mod machine;
mod observed;
mod parked;
mod polyglot;
mod profile;
mod queued;
mod raw;
mod report;
mod secured;
mod soak;
mod soak_stats;
mod unary;
mod variant;
mod verify;
mod workloads;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use serde::Deserialize;
use waymark_integration_tests::{Backend, ServerProcess, TestDatabase};
use waymark_sdk::ConnectOptions;
use waymark_sdk::{Worker, WorkflowContext, WorkflowError};

use crate::{
    idle::{idle_load, pg_xacts, OWN_XACTS_PER_READ, SETTLE},
    report::Report,
    workloads::{latency, percentile, throughput, unix_micros, wait_for_workers, wakeup},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Which {
    Sqlite,
    Postgres,
    Both,
}

#[derive(Parser, Debug)]
#[command(
    about = "Waymark load generator: throughput, latency and a raw-insert baseline per backend",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[command(flatten)]
    bench: Args,
}

#[derive(Subcommand, Debug)]
enum Mode {
    /// A long run on PostgreSQL at half the maximum rate with worker processes killed under it;
    /// fails if a workflow is lost, stuck or failed (see soak.rs).
    Soak(soak::SoakArgs),
    /// Where a one-step workflow's time and a throughput step's go on PostgreSQL: each gRPC
    /// call, worker command, store call and SQL statement per workflow (see profile.rs).
    Profile(profile::ProfileArgs),
}

#[derive(clap::Args, Debug)]
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
    /// Rows of each raw-baseline run on PostgreSQL (30,000 or more for a reference figure).
    #[arg(long, default_value_t = raw::REFERENCE_ROWS)]
    raw_rows_postgres: i64,
    /// Rows of each raw-baseline run on SQLite (30,000 or more for a reference figure).
    #[arg(long, default_value_t = raw::REFERENCE_ROWS)]
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
    /// StartWorkflow calls from 50 concurrent callers (a tenth as many from one caller first),
    /// then as many GetWorkflow calls; 0 skips the unary workload.
    #[arg(long, default_value_t = 10_000)]
    unary_starts: usize,
    /// Workflows dispatched through a queue with limits (0 skips the queue workloads).
    #[arg(long, default_value_t = 20_000)]
    queued: usize,
    /// Workflows waiting in the deep backlog.
    #[arg(long, default_value_t = 1_000_000)]
    backlog: usize,
    /// Run the throughput and latency workloads a second time on a server with TLS and API keys
    /// on, and print those figures beside the plaintext ones.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    secured: bool,
    /// Run the throughput and latency workloads a second time on a server exporting spans over
    /// OTLP (to a receiver in this process) and scraped for metrics every second.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    observed: bool,
    /// Run the throughput and latency workloads a second time on a server whose console's list
    /// page is open (refreshed every second over gRPC-web).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    console: bool,
    /// Old finished workflows the retention collector deletes while the throughput and latency
    /// workloads run again on a second server (0 skips it).
    #[arg(long, default_value_t = 1_000_000)]
    collecting: usize,
    /// A flag for the main server of each backend (repeat for more), to compare a setting:
    /// `--server-arg=--access-log=all`. The other servers (TLS, traces, console, retention)
    /// do not get it.
    #[arg(long, allow_hyphen_values = true)]
    server_arg: Vec<String>,
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

fn backend_name(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
    }
}

/// The in-process Rust workers every workload runs on, until `stop` turns true.
fn spawn_workers(
    args: &Args,
    connect: &ConnectOptions,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<Result<(), waymark_sdk::Error>>> {
    (0..args.workers.max(1))
        .map(|i| {
            let worker = Worker::builder()
                .connect_options(connect.clone())
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
            let mut rx = stop.clone();
            tokio::spawn(worker.run_until(async move {
                let _ = rx.wait_for(|v| *v).await;
            }))
        })
        .collect()
}

async fn run_backend(args: &Args, backend: Backend) -> anyhow::Result<Option<Report>> {
    let name = backend_name(backend);
    let Some(db) = TestDatabase::new(backend).await else {
        eprintln!("[{name}] skipped (no database)");
        return Ok(None);
    };
    let raw_rows = match backend {
        Backend::Sqlite => args.raw_rows_sqlite,
        Backend::Postgres => args.raw_rows_postgres,
    };
    eprintln!(
        "[{name}] raw baseline before the workloads: {} runs of {raw_rows} rows",
        raw::RUNS
    );
    let (raw_conns, raw_before) = raw::runs(backend, raw_rows)
        .await
        .context("raw baseline before the workloads")?;
    eprintln!("[{name}] raw inserts/s before: {raw_before:.0?}");
    let filesystem = machine::database_filesystem(backend, &db.url, &db.dir).await;
    eprintln!("[{name}] database {} on {filesystem}; starting server", db.url);
    let mut server = ServerProcess::start(&db, &args.server_arg).await;
    eprintln!("[{name}] server at {} (log: {})", server.addr, server.log.display());

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let workers = spawn_workers(args, &server.connect, &stop_rx);
    let client = server.client().await;
    wait_for_workers(&client).await.context("workers")?;
    eprintln!(
        "[{name}] workers registered; throughput workload {} x {}",
        args.workflows, args.steps
    );

    let (starts_s, wall_s) = throughput(args, &server.connect).await.context("throughput")?;
    let total_steps = args.workflows as f64 * args.steps as f64;
    eprintln!(
        "[{name}] throughput done in {wall_s:.2} s; latency workload {} runs",
        args.latency_runs
    );

    let mut polyglot = Vec::new();
    for language in args.languages.iter().filter(|l| !l.is_empty()) {
        let language = polyglot::language(language)?;
        eprintln!("[{name}] {language} worker: throughput workload");
        if let Some(p) = polyglot::run(language, &server.addr, args.workflows, args.steps)
            .await
            .with_context(|| format!("{language} worker"))?
        {
            eprintln!("[{name}] {language}: {:.1} steps/s", p.steps_per_s);
            polyglot.push(p);
        }
    }

    let lat = latency(args.latency_runs, &server.connect).await.context("latency")?;
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;

    eprintln!("[{name}] wakeup workload {} runs", args.wakeup_runs);
    let (wake, wake_done) = wakeup(args.wakeup_runs, &server.addr).await.context("wakeup")?;
    let wake_mean = wake.iter().sum::<f64>() / wake.len().max(1) as f64;
    // What the server keeps after the load, its workflows done: a figure to compare between
    // builds (grown caches, maps that kept what they should have let go).
    let rss_loaded_mb = parked::rss_mb(server.pid()).context("server RSS after the load")?;
    eprintln!("[{name}] server RSS after the throughput, latency and wakeup workloads: {rss_loaded_mb:.1} MiB");

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
    .await
    .context("idle")?;

    let parked = if args.parked > 0 {
        eprintln!("[{name}] memory workload: {} parked workflows", args.parked);
        let p = parked::run(args.parked, &server.addr, server.pid())
            .await
            .context("parked")?;
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
        Some(
            queued::run(backend, &db.url, &server.addr, args.queued, args.backlog)
                .await
                .context("queues")?,
        )
    } else {
        None
    };

    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    // With no worker attached: the starts are the start's cost alone, no claim follows them.
    let unary = if args.unary_starts > 0 {
        eprintln!(
            "[{name}] unary workload: {} starts from 50 callers, a tenth from one",
            args.unary_starts
        );
        let u = unary::run(&server.connect, args.unary_starts)
            .await
            .context("unary API")?;
        for r in &u.rates {
            eprintln!("[{name}] {} x {}: {:.0}/s", r.rpc, r.callers, r.per_s);
        }
        Some(u)
    } else {
        None
    };

    let mut variants = Vec::new();
    if args.secured {
        eprintln!("[{name}] the throughput and latency workloads again with TLS and API keys");
        variants.push(secured::run(args, backend).await.context("TLS and API keys")?);
    }
    if args.observed {
        eprintln!("[{name}] the throughput and latency workloads again, traces exported and metrics scraped");
        variants.push(observed::run(args, backend).await.context("traces and metrics")?);
    }
    if args.console {
        eprintln!("[{name}] the throughput and latency workloads again, a console's list page open");
        variants.push(console::run(args, backend).await.context("console open")?);
    }
    if args.collecting > 0 {
        eprintln!(
            "[{name}] the throughput and latency workloads again, the retention collector deleting {} old workflows",
            args.collecting
        );
        variants.extend(collecting::run(args, backend).await.context("retention collector")?);
    }
    for v in &variants {
        eprintln!(
            "[{name}] {}: {:.1} steps/s, p50 {:.2} ms {}",
            v.label, v.steps_per_s, v.p50_ms, v.note
        );
    }
    // The raw baseline runs again with the server stopped, so neither disturbs the other.
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
    eprintln!(
        "[{name}] server stopped; raw baseline after the workloads: {} runs of {raw_rows} rows",
        raw::RUNS
    );
    let (_, raw_after) = raw::runs(backend, raw_rows)
        .await
        .context("raw baseline after the workloads")?;
    eprintln!("[{name}] raw inserts/s after: {raw_after:.0?}");

    Ok(Some(Report {
        backend: name,
        filesystem,
        workflows: args.workflows,
        steps: args.steps,
        starts_s,
        wall_s,
        steps_per_s: total_steps / wall_s,
        workflows_per_s: args.workflows as f64 / wall_s,
        p50_ms: percentile(&lat, 50.0),
        p99_ms: percentile(&lat, 99.0),
        mean_ms: mean,
        latency_runs: lat.len(),
        raw: raw::Baseline {
            rows: raw_rows,
            conns: raw_conns,
            before: raw_before,
            after: raw_after,
        },
        wakeup_runs: wake.len(),
        wakeup_p50_ms: percentile(&wake, 50.0),
        wakeup_p99_ms: percentile(&wake, 99.0),
        wakeup_mean_ms: wake_mean,
        wakeup_done_p50_ms: percentile(&wake_done, 50.0),
        rss_loaded_mb,
        idle_waiters: args.idle_waiters,
        idle_window_s: idle.window_s,
        idle_db_tx_per_s: idle.pg.map(|(tps, _, _)| tps),
        idle_db_tx_raw: idle.pg.map(|(_, raw, own)| (raw, own)),
        parked,
        queued,
        unary,
        polyglot,
        variants,
    }))
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.mode {
        Some(Mode::Soak(soak)) => return soak::run(soak).await,
        Some(Mode::Profile(p)) => return profile::run(p).await,
        None => {}
    }
    let args = cli.bench;
    let machine = machine::describe();
    eprintln!("machine: {machine}");
    println!("machine: {machine}");
    let backends: &[Backend] = match args.backend {
        Which::Sqlite => &[Backend::Sqlite],
        Which::Postgres => &[Backend::Postgres],
        Which::Both => &[Backend::Sqlite, Backend::Postgres],
    };
    let mut reports = Vec::new();
    // A backend whose workload failed prints no figures; the other backend still runs, so one
    // failure does not hide the rest, and the run exits non-zero at the end.
    let mut failed = Vec::new();
    for &b in backends {
        match run_backend(&args, b).await {
            Ok(Some(r)) => {
                r.print_table();
                reports.push(r);
            }
            Ok(None) => {}
            Err(e) => {
                eprintln!("[{}] FAILED: {e:#}", backend_name(b));
                failed.push(format!("[{}] {e:#}", backend_name(b)));
            }
        }
    }
    println!();
    for r in &reports {
        println!("{}", r.summary());
    }
    anyhow::ensure!(failed.is_empty(), "no figures for: {}", failed.join(" | "));
    Ok(())
}
