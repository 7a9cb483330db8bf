//! `waymark-bench profile`: where the time of a one-step workflow and of a throughput step goes,
//! on PostgreSQL. Not a pass mark: a table to read before tuning anything.
//!
//! Each phase runs on one server, after unmeasured warm-up runs (so PostgreSQL has settled on
//! its cached plans in every pooled connection, see `workloads::WAKEUP_WARMUP`), between two
//! readings of three counters:
//! - the server's own histograms (`/metrics`): each gRPC call, each worker-stream command and
//!   each store call, as a count and a sum; divided by the workflows (or steps) of the phase,
//!   they say how many of each one workflow costs and how long they took;
//! - PostgreSQL's `pg_stat_statements`: every statement the server sent, with its calls and its
//!   execution time on the database (planning not included), and `BEGIN`/`COMMIT` among them;
//! - `pg_stat_database`'s committed transactions, read after the backends have flushed them
//!   (`idle::SETTLE`): the sequential commits one workflow waits on.
//!
//! `pg_stat_statements` has to be loaded when PostgreSQL starts; `make profile` starts the
//! throwaway PostgreSQL with it. Without it, the statement table is left out and says why.
//!
//! ```text
//! make profile
//! WAYMARK_TEST_PG_SETTINGS="-c shared_preload_libraries=pg_stat_statements" \
//!   integration-tests/with-postgres.sh target/release/waymark-bench profile --runs 1000
//! ```

use std::{collections::BTreeMap, time::Instant};

use anyhow::Context;
use clap::Parser;
use waymark_integration_tests::{free_port, Backend, ServerProcess, TestDatabase};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

use crate::{
    idle::{pg_xacts, OWN_XACTS_PER_READ, SETTLE},
    spawn_workers,
    workloads::{percentile, throughput, throughput_as},
    Cli,
};

#[derive(clap::Args, Debug)]
pub struct ProfileArgs {
    /// Sequential one-step workflows profiled.
    #[arg(long, default_value_t = 500)]
    runs: usize,
    /// One-step workflows run first and not profiled (past PostgreSQL's custom plans).
    #[arg(long, default_value_t = 300)]
    warmup: usize,
    /// Workflows of the profiled throughput phase, all started at once.
    #[arg(long, default_value_t = 1000)]
    workflows: usize,
    /// Steps of each of those workflows.
    #[arg(long, default_value_t = 10)]
    steps: u32,
    /// A flag for the server, to see what it changes (`--server-arg=--no-notify`); repeatable.
    #[arg(long, allow_hyphen_values = true)]
    server_arg: Vec<String>,
}

/// A histogram series' count and sum, keyed by its family and labels.
type Histograms = BTreeMap<(String, String), (f64, f64)>;

/// What the counters said at one moment.
struct Reading {
    histograms: Histograms,
    /// Statement text → (calls, total execution ms).
    statements: BTreeMap<String, (f64, f64)>,
}

/// Reads `_count` and `_sum` lines of every `waymark_…` histogram from the metrics text.
fn parse_histograms(text: &str) -> Histograms {
    let mut out = Histograms::new();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else { continue };
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (series, ""),
        };
        let (family, is_sum) = if let Some(f) = name.strip_suffix("_sum") {
            (f, true)
        } else if let Some(f) = name.strip_suffix("_count") {
            (f, false)
        } else {
            continue;
        };
        let Some(family) = family.strip_prefix("waymark_") else {
            continue;
        };
        let entry = out.entry((family.to_string(), labels.to_string())).or_default();
        if is_sum {
            entry.1 = value;
        } else {
            entry.0 = value;
        }
    }
    out
}

/// The part of a label set that names the thing (`method="StartWorkflow"`), without the code.
fn label_name(labels: &str) -> String {
    labels
        .split(',')
        .filter(|l| !l.starts_with("code=") && !l.starts_with("namespace="))
        .map(|l| l.split_once('=').map(|(_, v)| v.trim_matches('"')).unwrap_or(l))
        .collect::<Vec<_>>()
        .join(" ")
}

async fn read(metrics_port: u16, db_url: &str, statements: bool) -> anyhow::Result<Reading> {
    let (status, body) = waymark_integration_tests::http_get(metrics_port, "/metrics").await?;
    anyhow::ensure!(status == 200, "the metrics scrape was refused ({status})");
    let mut stmts = BTreeMap::new();
    if statements {
        use sqlx::{Connection, Row};
        let mut conn = sqlx::PgConnection::connect(db_url).await?;
        let rows = sqlx::query(
            "SELECT query, calls::float8, total_exec_time FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_all(&mut conn)
        .await?;
        for r in rows {
            let q: String = r.try_get(0)?;
            // The profile's own reads are not the server's work.
            if q.contains("pg_stat_") || q.contains("pg_database") {
                continue;
            }
            let e = stmts.entry(q).or_insert((0.0, 0.0));
            e.0 += r.try_get::<f64, _>(1)?;
            e.1 += r.try_get::<f64, _>(2)?;
        }
        conn.close().await?;
    }
    Ok(Reading {
        histograms: parse_histograms(&body),
        statements: stmts,
    })
}

/// Whether `pg_stat_statements` can be read in this database (created here if loaded).
async fn statements_available(db_url: &str) -> bool {
    use sqlx::Connection;
    let Ok(mut conn) = sqlx::PgConnection::connect(db_url).await else {
        return false;
    };
    let ok = sqlx::query("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        .execute(&mut conn)
        .await
        .is_ok()
        && sqlx::query("SELECT count(*) FROM pg_stat_statements")
            .execute(&mut conn)
            .await
            .is_ok();
    let _ = conn.close().await;
    ok
}

/// One phase's report: `per` is what a row is divided by (workflows or steps), `whole_ms` the
/// client's measure of one of them that the shares are of.
struct Phase<'a> {
    title: String,
    per: f64,
    per_name: &'a str,
    whole_ms: f64,
    xacts: Option<f64>,
}

fn print_phase(p: &Phase, before: &Reading, after: &Reading, with_statements: bool) {
    println!();
    println!("== {} ==", p.title);
    println!(
        "{:<58} {:>9} {:>9} {:>10} {:>7}",
        "hop / statement",
        format!("n/{}", p.per_name),
        "mean ms",
        format!("ms/{}", p.per_name),
        "share"
    );
    println!("{}", "-".repeat(97));
    let row = |name: &str, calls: f64, total_ms: f64| {
        if calls <= 0.0 {
            return;
        }
        let per_ms = total_ms / p.per;
        println!(
            "{:<58} {:>9.2} {:>9.3} {:>10.3} {:>6.0}%",
            truncate(name, 58),
            calls / p.per,
            total_ms / calls,
            per_ms,
            100.0 * per_ms / p.whole_ms
        );
    };
    println!(
        "{:<58} {:>9} {:>9} {:>10.3} {:>6}%",
        format!("client: start -> result, per {}", p.per_name),
        "",
        "",
        p.whole_ms,
        100
    );
    for (family, heading) in [
        // Not `start_to_dispatch` and `dispatch_to_finish`: they subtract the store's
        // millisecond timestamps, too coarse for a path of about a millisecond.
        ("rpc_duration_seconds", "gRPC call"),
        ("worker_command_duration_seconds", "worker command"),
        ("store_call_duration_seconds", "store call"),
    ] {
        let mut rows: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for ((f, labels), (count, sum)) in &after.histograms {
            if f != family {
                continue;
            }
            let (c0, s0) = before
                .histograms
                .get(&(f.clone(), labels.clone()))
                .copied()
                .unwrap_or_default();
            let e = rows.entry(label_name(labels)).or_default();
            e.0 += count - c0;
            e.1 += (sum - s0) * 1000.0;
        }
        let mut rows: Vec<_> = rows.into_iter().filter(|(_, (c, _))| *c > 0.0).collect();
        rows.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        for (name, (calls, ms)) in rows {
            let label = if name.is_empty() {
                heading.to_string()
            } else {
                format!("{heading}: {name}")
            };
            row(&label, calls, ms);
        }
    }
    if let Some(x) = p.xacts {
        println!("{:<58} {:>9.2}", "database: transactions committed", x / p.per);
    }
    if !with_statements {
        println!("database statements: pg_stat_statements is not loaded (run `make profile`)");
        return;
    }
    let mut rows: Vec<(String, f64, f64)> = after
        .statements
        .iter()
        .map(|(q, (calls, ms))| {
            let (c0, m0) = before.statements.get(q).copied().unwrap_or_default();
            (q.split_whitespace().collect::<Vec<_>>().join(" "), calls - c0, ms - m0)
        })
        .filter(|(_, c, _)| *c > 0.0)
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    let (mut calls_all, mut ms_all) = (0.0, 0.0);
    for (q, calls, ms) in &rows {
        calls_all += calls;
        ms_all += ms;
        row(&format!("sql: {q}"), *calls, *ms);
    }
    row("sql: all statements", calls_all, ms_all);
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

async fn one_step(client: &Client, id: String) -> anyhow::Result<()> {
    let s = client
        .start_json("one", serde_json::json!(null), StartOptions::id(id.clone()))
        .await?;
    let w = client
        .await_workflow(&s.workflow.workflow_id, Some(std::time::Duration::from_secs(60)))
        .await?;
    anyhow::ensure!(
        w.status == WorkflowStatus::Success,
        "{id} ended {} (expected SUCCESS); failure {:?}",
        w.status.as_str(),
        w.failure
    );
    Ok(())
}

/// The counters read around one phase. Both readings wait `SETTLE` first, so that the
/// backends' transaction counts have reached `pg_stat_database`.
struct Window {
    x0: i64,
    t0: Instant,
    before: Reading,
}

impl Window {
    async fn open(port: u16, url: &str, statements: bool) -> anyhow::Result<Window> {
        if statements {
            reset_statements(url).await?;
        }
        tokio::time::sleep(SETTLE).await;
        let x0 = pg_xacts(url).await?;
        let before = read(port, url, statements).await?;
        Ok(Window {
            x0,
            t0: Instant::now(),
            before,
        })
    }

    /// Transactions the phase committed, with the server's background transactions taken out
    /// (its own loops commit a few a second whatever happens: their rate is measured in a
    /// quiet window right after), and the readings.
    async fn close(self, port: u16, url: &str, statements: bool) -> anyhow::Result<(f64, Reading, Reading)> {
        tokio::time::sleep(SETTLE).await;
        let x1 = pg_xacts(url).await?;
        let elapsed = self.t0.elapsed().as_secs_f64();
        let after = read(port, url, statements).await?;
        let quiet = Instant::now();
        tokio::time::sleep(SETTLE).await;
        let x2 = pg_xacts(url).await?;
        // Our own transactions: one per counter read, one per statements read.
        let own = OWN_XACTS_PER_READ + i64::from(statements);
        let background = (x2 - x1 - own) as f64 / quiet.elapsed().as_secs_f64();
        let xacts = (x1 - self.x0 - own) as f64 - background * elapsed;
        eprintln!(
            "[profile] background transactions: {background:.1}/s, {:.0} taken out",
            background * elapsed
        );
        Ok((xacts, self.before, after))
    }
}

async fn reset_statements(db_url: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(db_url).await?;
    sqlx::query("SELECT pg_stat_statements_reset()")
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

pub async fn run(p: ProfileArgs) -> anyhow::Result<()> {
    let db = TestDatabase::new(Backend::Postgres)
        .await
        .context("the profile needs PostgreSQL: run it under integration-tests/with-postgres.sh")?;
    let with_statements = statements_available(&db.url).await;
    let port = free_port();
    let mut flags = vec!["--metrics-listen".to_string(), format!("127.0.0.1:{port}")];
    flags.extend(p.server_arg.iter().cloned());
    let server = ServerProcess::start(&db, &flags).await;
    eprintln!("[profile] server at {} (log: {})", server.addr, server.log.display());
    let cli = Cli::try_parse_from([
        "waymark-bench".to_string(),
        "--workflows".into(),
        p.workflows.to_string(),
        "--steps".into(),
        p.steps.to_string(),
    ])?;
    let args = cli.bench;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let workers = spawn_workers(&args, &server.connect, &stop_rx);
    let client = server.client().await;
    crate::workloads::wait_for_workers(&client).await.context("workers")?;

    // Phase 1: sequential one-step workflows.
    eprintln!(
        "[profile] {} one-step workflows unmeasured, then {} profiled",
        p.warmup, p.runs
    );
    for i in 0..p.warmup {
        one_step(&client, format!("prof-warm-{i}")).await?;
    }
    let url: &str = &db.url;
    let window = Window::open(port, url, with_statements)
        .await
        .context("one-step: before")?;
    let mut lat = Vec::with_capacity(p.runs);
    for i in 0..p.runs {
        let t = Instant::now();
        one_step(&client, format!("prof-{i}")).await?;
        lat.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let (xacts, before, after) = window
        .close(port, url, with_statements)
        .await
        .context("one-step: after")?;
    lat.sort_by(|a, b| a.total_cmp(b));
    let mean = lat.iter().sum::<f64>() / lat.len().max(1) as f64;
    println!(
        "one-step workflow: {} sequential runs, start -> result p50 {:.2} ms, mean {:.2} ms",
        lat.len(),
        percentile(&lat, 50.0),
        mean
    );
    print_phase(
        &Phase {
            title: format!("one-step workflow, {} sequential runs (PostgreSQL)", p.runs),
            per: p.runs as f64,
            per_name: "wf",
            whole_ms: mean,
            xacts: Some(xacts),
        },
        &before,
        &after,
        with_statements,
    );

    if p.workflows == 0 {
        return stop(stop_tx, workers, server).await;
    }

    // Phase 2: the throughput workload, per step; one warm-up run first.
    eprintln!(
        "[profile] throughput {} x {}: one unmeasured run, then one profiled",
        p.workflows, p.steps
    );
    throughput(&args, &server.connect).await.context("throughput warm-up")?;
    let window = Window::open(port, url, with_statements)
        .await
        .context("throughput: before")?;
    let t = Instant::now();
    throughput_as(&args, &server.connect, "prof-tp-")
        .await
        .context("throughput")?;
    let wall_ms = t.elapsed().as_secs_f64() * 1000.0;
    let (xacts, before, after) = window
        .close(port, url, with_statements)
        .await
        .context("throughput: after")?;
    let total_steps = (p.workflows as f64) * f64::from(p.steps);
    println!();
    println!(
        "throughput: {} x {} in {:.0} ms, {:.0} steps/s; shares below are of the wall time per step",
        p.workflows,
        p.steps,
        wall_ms,
        total_steps / (wall_ms / 1000.0)
    );
    print_phase(
        &Phase {
            title: format!("throughput {} x {}, per step (PostgreSQL)", p.workflows, p.steps),
            per: total_steps,
            per_name: "step",
            whole_ms: wall_ms / total_steps,
            xacts: Some(xacts),
        },
        &before,
        &after,
        with_statements,
    );
    stop(stop_tx, workers, server).await
}

async fn stop(
    stop_tx: tokio::sync::watch::Sender<bool>,
    workers: Vec<tokio::task::JoinHandle<Result<(), waymark_sdk::Error>>>,
    mut server: ServerProcess,
) -> anyhow::Result<()> {
    let _ = stop_tx.send(true);
    for w in workers {
        let _ = w.await;
    }
    server.terminate();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_read_by_family_and_labels() {
        let text = "\
# TYPE waymark_rpc_duration_seconds histogram
waymark_rpc_duration_seconds_sum{method=\"StartWorkflow\",code=\"Ok\"} 0.25
waymark_rpc_duration_seconds_count{method=\"StartWorkflow\",code=\"Ok\"} 500
waymark_rpc_duration_seconds_bucket{method=\"StartWorkflow\",code=\"Ok\",le=\"0.0005\"} 400
waymark_store_call_duration_seconds_sum{call=\"get_workflow\"} 0.1
waymark_store_call_duration_seconds_count{call=\"get_workflow\"} 501
other_sum 3
# EOF
";
        let h = parse_histograms(text);
        assert_eq!(h.len(), 2, "{h:?}");
        let rpc = h[&(
            "rpc_duration_seconds".to_string(),
            "method=\"StartWorkflow\",code=\"Ok\"".to_string(),
        )];
        assert_eq!(rpc, (500.0, 0.25));
        let store = h[&(
            "store_call_duration_seconds".to_string(),
            "call=\"get_workflow\"".to_string(),
        )];
        assert_eq!(store, (501.0, 0.1));
        assert_eq!(label_name("method=\"StartWorkflow\",code=\"Ok\""), "StartWorkflow");
        assert_eq!(
            label_name("namespace=\"default\",workflow_name=\"one\",queue=\"default\""),
            "one default"
        );
    }
}
