//! The workloads run on the in-process Rust workers: throughput (W workflows of K steps at
//! once), sequential start-to-result latency, and send->recv wakeups.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use waymark_sdk::{Client, ConnectOptions, ListOptions, StartOptions, WorkflowStatus};

use crate::{
    verify::{expect_output, read_all, Select, UNFINISHED},
    Args,
};

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Retries a zero-step `bench` start until the workers' registration is visible to the server.
pub async fn wait_for_workers(client: &Client) -> anyhow::Result<()> {
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

/// Whether any `bench` workflow created since `since_ms` is not terminal yet. The time bound
/// keeps the poll to this run's workflows: beside a big table of older ones (the
/// `--collecting` workload), finding that none is left would otherwise read past all of them,
/// and that read would be counted in the wall time.
async fn any_unfinished(client: &Client, since_ms: i64) -> anyhow::Result<bool> {
    let (page, _) = client
        .list(ListOptions {
            statuses: UNFINISHED.to_vec(),
            workflow_name: Some("bench".into()),
            created_after_ms: Some(since_ms),
            page_size: 1,
            ..Default::default()
        })
        .await?;
    Ok(!page.is_empty())
}

/// Starts W `bench` workflows of K steps at once and waits until none is left unfinished;
/// returns (seconds until every start was acknowledged, seconds until all were done). Fails
/// unless every one ended SUCCESS with output K.
pub async fn throughput(args: &Args, connect: &ConnectOptions) -> anyhow::Result<(f64, f64)> {
    throughput_as(args, connect, "tp-").await
}

/// [`throughput`] with workflow ids `{prefix}{i}`, for a second run on the same server.
pub async fn throughput_as(args: &Args, connect: &ConnectOptions, prefix: &'static str) -> anyhow::Result<(f64, f64)> {
    let mut clients = Vec::new();
    for _ in 0..args.clients.clamp(1, 8) {
        clients.push(Client::connect_with(connect).await?);
    }
    let next = Arc::new(AtomicUsize::new(0));
    // A second early: the server stamps creation with its own clock (the same machine's).
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_millis() as i64
        - 1_000;
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
                        StartOptions::id(format!("{prefix}{i}")),
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
    while any_unfinished(poller, since_ms).await? {
        anyhow::ensure!(t0.elapsed() < deadline, "workflows still unfinished after {deadline:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let wall = t0.elapsed();
    let select = Select {
        workflow_name: Some("bench"),
        queue: None,
        statuses: vec![],
        prefix,
    };
    let found = read_all(poller, &select).await?;
    expect_output(args.workflows, &found, &serde_json::json!(args.steps))?;
    Ok((starts.as_secs_f64(), wall.as_secs_f64()))
}

pub async fn latency(runs: usize, connect: &ConnectOptions) -> anyhow::Result<Vec<f64>> {
    let client = Client::connect_with(connect).await?;
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
            w.status == WorkflowStatus::Success && w.output == Some(serde_json::json!(0)),
            "run lat-{i} ended {} with output {:?} (expected SUCCESS, 0); failure {:?}",
            w.status.as_str(),
            w.output,
            w.failure
        );
        out.push(ms);
    }
    out.sort_by(|a, b| a.total_cmp(b));
    Ok(out)
}

/// Polls the workflow's recorded steps until the recv deadline (its first step) is there, i.e.
/// until it is blocked in `recv`. Not measured.
pub async fn wait_until_waiting(client: &Client, id: &str, poll: Duration) -> anyhow::Result<()> {
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

pub fn unix_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Wakeups run before the measured ones, and not counted. The figure is a long-running server's:
/// PostgreSQL plans a prepared statement afresh for each of its first five executions on a
/// connection before it settles on a cached generic plan, and the pool (32 connections by
/// default) hands its connections out in turn, so one sequential request touches every connection
/// about once per 32 calls. 200 runs take each connection past its first five executions of the
/// wake path's statements; fewer would measure the pool's start-up instead (0.2 to 0.4 ms more per
/// send, measured). On SQLite they cost about two seconds and change nothing.
const WAKEUP_WARMUP: usize = 200;

/// N sequential wakeups: start a `waiter`, wait (unmeasured) until it is blocked in `recv`, then
/// send. Returns, sorted, in ms: send until `recv` returned in the workflow, and send until
/// `await_workflow` returned.
pub async fn wakeup(runs: usize, addr: &str) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let client = Client::connect(addr).await?;
    let mut out = Vec::with_capacity(runs);
    let mut done = Vec::with_capacity(runs);
    let (mut refused, mut reads, mut sends) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs + WAKEUP_WARMUP {
        let id = if i < WAKEUP_WARMUP {
            format!("wake-warm-{i}")
        } else {
            format!("wake-{}", i - WAKEUP_WARMUP)
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
                "run {id} ended {} with output {:?} (expected SUCCESS with [{sent}, <time received>]); failure {:?}",
                w.status.as_str(),
                w.output,
                w.failure
            ),
        };
        if i >= WAKEUP_WARMUP {
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
