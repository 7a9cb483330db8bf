//! Worker used by the end-to-end tests. Registers:
//! - `counted`: input `{"steps": K, "step_ms": M}`; runs K steps, each of which waits M ms and then
//!   appends its side effect to the file `WAYMARK_SIDE_EFFECTS`; returns K.
//! - `echo`: returns its input after one step.
//! - `inbox`: input `{"topic": T, "timeout_ms": N, "count": C}`; receives C messages (null on
//!   timeout) and returns `{"received": [...]}`.
//! - `napper`: input `{"ms": N}`; sleeps durably, then records and returns the time it woke.
//! - `courier`: input `{"to": ID, "topic": T, "message": M}`; sends M from inside a workflow.
//! - `announcer`: input `{"key": K, "values": [..], "gate_ms": G, "linger_ms": N}`; waits up to G
//!   ms for a message on topic "go", sets event K to each value, then waits up to N ms for one on
//!   topic "done".
//! - `watcher`: input `{"target": ID, "key": K, "timeout_ms": N}`; reads ID's event K, waiting.
//! - `streamer`: input `{"key": K, "values": [..], "gate_ms": G, "close": true}`; writes each
//!   value to stream K (after a message on topic "go" when gated), then closes it.
//! - `family`: input `{"children": [[NAME, INPUT], ...]}`; starts each child, awaits each, returns
//!   their outputs (`{"error": KIND}` for a child that did not succeed).
//! - `cart`: input `{"items": N, "step_ms": M}`; takes `add` updates (`{"name": S, "qty": Q}`) until it holds N
//!   lines, each answered with `{"lines": L, "total": T}` (Q < 1 is rejected); returns the lines.
//! - `flaky`: input `{"fail_times": F, "max_attempts": A}`; one step that fails F times, retried
//!   up to A attempts.
//!
//! - `caller`: input `{"step": NAME, "input": V, "max_attempts": A, "timeout_ms": T}`; calls
//!   remote step NAME and returns its result (`{"error": MESSAGE}` when it failed for good).
//! - `racer`: input `{"calls": [[NAME, INPUT], ...], "children": [[NAME, INPUT], ...], "all": B}`;
//!   starts every call and child, waits for the first (or all) and returns
//!   `{"winner": INDEX}`; the index counts calls first, then children.
//!
//! - `hold`: input `{"ms": M}`; holds its slot M ms (no step), then appends
//!   `<workflow_id> <pid> <start_ms> <end_ms>` to the file `WAYMARK_INTERVALS` and returns M.
//!
//! With `WAYMARK_ROLE=steps` it registers remote steps instead (`all`: both):
//! - `double`: input `{"n": N, "ms": M, "key": K}`; logs a side effect (key K, step N, epoch 0)
//!   as it starts, waits M ms, logs another (epoch 1) and returns 2N.
//! - `fail_then`: input `{"key": K, "fail_times": F}`; fails while the side-effect log holds fewer
//!   than F lines for key K (each attempt logs one), then returns the attempt number.
//!
//! Queues from `WAYMARK_QUEUES` (comma-separated; default: the default queue). Capacity from
//! `WAYMARK_CAPACITY` (default 100); server from `WAYMARK_SERVER`; app version from
//! `WAYMARK_APP_VERSION` (default `test-1`); waits longer than `WAYMARK_PARK_AFTER_MS` park
//! (default 60 s; 0 never parks); `WAYMARK_TEST_VARIANT=renamed` renames the `counted`
//! steps, so a replay of a workflow begun by the normal variant is non-deterministic;
//! `WAYMARK_TEST_VARIANT=fixed` is `flaky` with its bug fixed (its step never fails).

use std::{path::PathBuf, time::Duration};

use serde::Deserialize;
use waymark_integration_tests::side_effects::{self, Effect};
use waymark_sdk::{Awaitable, RetryPolicy, StepOptions, Worker, WorkflowContext, WorkflowError};

#[derive(Deserialize)]
struct Counted {
    steps: u32,
    #[serde(default)]
    step_ms: u64,
}

async fn counted(ctx: WorkflowContext, input: Counted) -> Result<u32, WorkflowError> {
    let log = PathBuf::from(std::env::var("WAYMARK_SIDE_EFFECTS").unwrap_or_else(|_| "/dev/null".into()));
    let prefix = if std::env::var("WAYMARK_TEST_VARIANT").as_deref() == Ok("renamed") {
        "renamed-step"
    } else {
        "step"
    };
    for i in 0..input.steps {
        let (log, ms) = (log.clone(), input.step_ms);
        let (workflow_id, epoch) = (ctx.workflow_id().to_string(), ctx.epoch());
        let got: u32 = ctx
            .step(&format!("{prefix}-{i}"), move || {
                let (log, workflow_id) = (log.clone(), workflow_id.clone());
                async move {
                    if ms > 0 {
                        tokio::time::sleep(Duration::from_millis(ms)).await;
                    }
                    side_effects::append(
                        &log,
                        &Effect {
                            workflow_id,
                            step_id: i,
                            epoch,
                            pid: std::process::id(),
                        },
                    )
                    .map_err(|e| e.to_string())?;
                    Ok::<_, String>(i)
                }
            })
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

async fn echo(ctx: WorkflowContext, input: serde_json::Value) -> Result<serde_json::Value, WorkflowError> {
    let v = input.clone();
    ctx.step("echo", move || {
        let v = v.clone();
        async move { Ok::<_, String>(v) }
    })
    .await
}

#[derive(Deserialize)]
struct Cart {
    items: usize,
    /// How long each update's step takes (a crash test kills the worker inside it).
    #[serde(default)]
    step_ms: u64,
}

#[derive(Deserialize)]
struct Item {
    name: String,
    qty: i64,
}

/// Takes `add` updates until it holds `items` lines: each runs a step (appending its side
/// effect, keyed `cart/<workflow>`, when `WAYMARK_SIDE_EFFECTS` is set) and is answered with
/// the cart so far; a quantity below one is rejected. Returns the lines.
async fn cart(ctx: WorkflowContext, input: Cart) -> Result<serde_json::Value, WorkflowError> {
    let log = std::env::var("WAYMARK_SIDE_EFFECTS").ok().map(PathBuf::from);
    let mut lines: Vec<(String, i64)> = Vec::new();
    while lines.len() < input.items {
        let Some(u) = ctx.recv_update::<Item>("add", Duration::from_secs(600)).await? else {
            break;
        };
        if u.args.qty < 1 {
            ctx.reject_update(&u.id, "quantity must be at least 1").await?;
            continue;
        }
        let (log, workflow_id, n, epoch) = (
            log.clone(),
            ctx.workflow_id().to_string(),
            lines.len() as u32,
            ctx.epoch(),
        );
        let before: i64 = lines.iter().map(|(_, q)| q).sum();
        let (qty, ms) = (u.args.qty, input.step_ms);
        let total: i64 = ctx
            .step("add-item", move || {
                let (log, workflow_id) = (log.clone(), workflow_id.clone());
                async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    if let Some(log) = &log {
                        let effect = Effect {
                            workflow_id: format!("cart/{workflow_id}"),
                            step_id: n,
                            epoch,
                            pid: std::process::id(),
                        };
                        side_effects::append(log, &effect).map_err(|e| e.to_string())?;
                    }
                    Ok::<_, String>(before + qty)
                }
            })
            .await?;
        lines.push((u.args.name, qty));
        ctx.answer_update(&u.id, &serde_json::json!({"lines": lines.len(), "total": total}))
            .await?;
    }
    Ok(serde_json::json!({ "lines": lines }))
}

#[derive(Deserialize)]
struct Flaky {
    fail_times: u32,
    max_attempts: u32,
}

/// One step that fails its first `fail_times` attempts, retried up to `max_attempts`.
async fn flaky(ctx: WorkflowContext, input: Flaky) -> Result<u32, WorkflowError> {
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let policy = RetryPolicy::attempts(input.max_attempts).with_backoff(
        Duration::from_millis(10),
        2.0,
        Duration::from_millis(50),
    );
    ctx.step_with_retry("flaky", policy, move || {
        let attempts = attempts.clone();
        let fail_times = input.fail_times;
        async move {
            let n = attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let fixed = std::env::var("WAYMARK_TEST_VARIANT").as_deref() == Ok("fixed");
            if n <= fail_times && !fixed {
                Err(format!("attempt {n} fails"))
            } else {
                Ok(n)
            }
        }
    })
    .await
}

#[derive(Deserialize)]
struct Inbox {
    #[serde(default)]
    topic: String,
    timeout_ms: u64,
    /// Receive this many messages (default 1).
    #[serde(default)]
    count: Option<u32>,
}

/// Receives `count` messages on `topic`, each waiting up to `timeout_ms`; returns what it got
/// (`null` for a timeout), and the recorded deadline of the first receive.
async fn inbox(ctx: WorkflowContext, input: Inbox) -> Result<serde_json::Value, WorkflowError> {
    let mut got = Vec::new();
    for _ in 0..input.count.unwrap_or(1) {
        let m: Option<serde_json::Value> = ctx.recv(&input.topic, Duration::from_millis(input.timeout_ms)).await?;
        got.push(m.unwrap_or(serde_json::Value::Null));
    }
    Ok(serde_json::json!({ "received": got }))
}

/// Reads the time and draws a UUID, then waits for a message on "go": a run that is recovered
/// while it waits replays both. Returns them with the epoch of the run that finished.
async fn drawn(ctx: WorkflowContext, _input: serde_json::Value) -> Result<serde_json::Value, WorkflowError> {
    let now = ctx.now().await?;
    let id = ctx.uuid().await?;
    let _: Option<serde_json::Value> = ctx.recv("go", Duration::from_secs(600)).await?;
    let now_ms = now
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis() as u64;
    Ok(serde_json::json!({ "now_ms": now_ms, "uuid": id.to_string(), "epoch": ctx.epoch() }))
}

#[derive(Deserialize)]
struct Nap {
    ms: u64,
}

/// Sleeps durably, then returns the time it woke (Unix ms).
async fn napper(ctx: WorkflowContext, input: Nap) -> Result<i64, WorkflowError> {
    ctx.sleep(Duration::from_millis(input.ms)).await?;
    ctx.step("woke", || async {
        Ok::<_, String>(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as i64,
        )
    })
    .await
}

#[derive(Deserialize)]
struct Courier {
    to: String,
    #[serde(default)]
    topic: String,
    message: serde_json::Value,
}

/// Sends one message from inside a workflow.
async fn courier(ctx: WorkflowContext, input: Courier) -> Result<String, WorkflowError> {
    ctx.send(&input.to, &input.topic, &input.message).await
}

#[derive(Deserialize)]
struct Announce {
    key: String,
    values: Vec<serde_json::Value>,
    /// First wait this long for a message on topic "go".
    #[serde(default)]
    gate_ms: u64,
    /// Then wait this long for a message on topic "done" before finishing.
    #[serde(default)]
    linger_ms: u64,
}

/// Sets event `key` to each value in turn, then lingers (so readers see it while it runs).
async fn announcer(ctx: WorkflowContext, input: Announce) -> Result<u32, WorkflowError> {
    if input.gate_ms > 0 {
        let _: Option<serde_json::Value> = ctx.recv("go", Duration::from_millis(input.gate_ms)).await?;
    }
    for v in &input.values {
        ctx.set_event(&input.key, v).await?;
    }
    let _: Option<serde_json::Value> = ctx.recv("done", Duration::from_millis(input.linger_ms)).await?;
    Ok(input.values.len() as u32)
}

#[derive(Deserialize)]
struct Watch {
    target: String,
    key: String,
    timeout_ms: u64,
}

/// Reads another workflow's event, waiting for it.
async fn watcher(ctx: WorkflowContext, input: Watch) -> Result<serde_json::Value, WorkflowError> {
    let v: Option<serde_json::Value> = ctx
        .get_event(&input.target, &input.key, Duration::from_millis(input.timeout_ms))
        .await?;
    Ok(serde_json::json!({ "value": v }))
}

#[derive(Deserialize)]
struct Streamer {
    key: String,
    values: Vec<serde_json::Value>,
    /// Wait for a message on topic "go" (up to this long) before each value.
    #[serde(default)]
    gate_ms: u64,
    #[serde(default = "yes")]
    close: bool,
}

fn yes() -> bool {
    true
}

/// Writes each value to stream `key` (each after a "go" message when gated), then closes it.
async fn streamer(ctx: WorkflowContext, input: Streamer) -> Result<u64, WorkflowError> {
    let mut last = 0;
    for v in &input.values {
        if input.gate_ms > 0 {
            let _: Option<serde_json::Value> = ctx.recv("go", Duration::from_millis(input.gate_ms)).await?;
        }
        last = ctx.write_stream(&input.key, v).await?;
    }
    if input.close {
        ctx.close_stream(&input.key).await?;
    }
    Ok(last)
}

#[derive(Deserialize, serde::Serialize)]
struct Looper {
    n: u32,
    until: u32,
    /// Also wait for a message on topic "go" in each run before its tick.
    #[serde(default)]
    wait: bool,
}

/// One run per `n`: a step "tick" (which returns `n`), then continues as new with `n + 1` until
/// `until`, which it returns. Each run's history is one step (two with `wait`).
async fn looper(ctx: WorkflowContext, input: Looper) -> Result<u32, WorkflowError> {
    if input.wait {
        ctx.recv::<serde_json::Value>("go", std::time::Duration::from_secs(600))
            .await?;
    }
    let n = input.n;
    let tick = ctx.step("tick", move || async move { Ok::<_, String>(n) }).await?;
    if tick >= input.until {
        return Ok(tick);
    }
    ctx.continue_as_new(&Looper { n: n + 1, ..input })
}

#[derive(Deserialize)]
struct Family {
    /// Name and input of each child to start.
    children: Vec<(String, serde_json::Value)>,
    /// Tags each child gets over the ones it inherits.
    #[serde(default)]
    child_tags: std::collections::BTreeMap<String, String>,
}

/// Starts every child, then awaits each in turn; returns their outputs (or their errors).
async fn family(ctx: WorkflowContext, input: Family) -> Result<Vec<serde_json::Value>, WorkflowError> {
    let mut ids = Vec::new();
    for (name, child_input) in &input.children {
        let options = waymark_sdk::ChildOptions {
            tags: input.child_tags.clone(),
            ..Default::default()
        };
        ids.push(ctx.start_child_with(name, child_input, options).await?);
    }
    let mut out = Vec::new();
    for id in &ids {
        match ctx.await_child::<serde_json::Value>(id).await {
            Ok(v) => out.push(v),
            Err(WorkflowError::Failed { kind, .. }) => out.push(serde_json::json!({ "error": kind })),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

fn effects_log() -> PathBuf {
    PathBuf::from(std::env::var("WAYMARK_SIDE_EFFECTS").unwrap_or_else(|_| "/dev/null".into()))
}

fn log_effect(key: &str, step_id: u32, epoch: u64) -> Result<(), String> {
    let e = Effect {
        workflow_id: key.to_string(),
        step_id,
        epoch,
        pid: std::process::id(),
    };
    side_effects::append(&effects_log(), &e).map_err(|e| e.to_string())
}

#[derive(Deserialize)]
struct Double {
    n: i64,
    #[serde(default)]
    ms: u64,
    #[serde(default)]
    key: String,
}

async fn double(input: Double) -> Result<i64, String> {
    log_effect(&input.key, input.n as u32, 0)?;
    tokio::time::sleep(Duration::from_millis(input.ms)).await;
    log_effect(&input.key, input.n as u32, 1)?;
    Ok(input.n * 2)
}

#[derive(Deserialize)]
struct FailThen {
    key: String,
    fail_times: usize,
}

async fn fail_then(input: FailThen) -> Result<usize, String> {
    log_effect(&input.key, 0, 0)?;
    let attempt = side_effects::read(&effects_log())
        .iter()
        .filter(|e| e.workflow_id == input.key)
        .count();
    if attempt <= input.fail_times {
        return Err(format!("planned failure {attempt}"));
    }
    Ok(attempt)
}

#[derive(Deserialize)]
struct Caller {
    step: String,
    input: serde_json::Value,
    max_attempts: Option<u32>,
    timeout_ms: Option<u64>,
}

async fn caller(ctx: WorkflowContext, input: Caller) -> Result<serde_json::Value, WorkflowError> {
    let mut options = StepOptions::default();
    if let Some(a) = input.max_attempts {
        options = options.retry(RetryPolicy::attempts(a).with_backoff(
            Duration::from_millis(50),
            2.0,
            Duration::from_secs(1),
        ));
    }
    if let Some(t) = input.timeout_ms {
        options = options.timeout(Duration::from_millis(t));
    }
    match ctx.call_step(&input.step, &input.input, options).await {
        Ok(v) => Ok(v),
        Err(WorkflowError::Step { message, .. }) => Ok(serde_json::json!({ "error": message })),
        Err(e) => Err(e),
    }
}

#[derive(Deserialize)]
struct Racer {
    #[serde(default)]
    calls: Vec<(String, serde_json::Value)>,
    #[serde(default)]
    children: Vec<(String, serde_json::Value)>,
    #[serde(default)]
    all: bool,
}

async fn racer(ctx: WorkflowContext, input: Racer) -> Result<serde_json::Value, WorkflowError> {
    let mut targets: Vec<Awaitable> = Vec::new();
    for (name, v) in &input.calls {
        targets.push(ctx.start_step(name, v, StepOptions::default()).await?.into());
    }
    for (name, v) in &input.children {
        targets.push(Awaitable::Workflow(ctx.start_child(name, v, None).await?));
    }
    if input.all {
        ctx.wait_all(&targets).await?;
        let mut results = Vec::new();
        for t in &targets {
            results.push(match t {
                Awaitable::Step(h) => ctx.step_result::<serde_json::Value>(h).await?,
                Awaitable::Workflow(id) => ctx.await_child::<serde_json::Value>(id).await?,
            });
        }
        return Ok(serde_json::json!({ "results": results }));
    }
    let winner = ctx.wait_first(&targets).await?;
    Ok(serde_json::json!({ "winner": winner }))
}

#[derive(Deserialize)]
struct Hold {
    ms: u64,
}

fn unix_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis()
}

/// Appends the interval it held a worker slot: inside the time the server had it PENDING, so
/// overlaps seen here never exceed what the server admitted.
async fn hold(ctx: WorkflowContext, input: Hold) -> Result<u64, WorkflowError> {
    let start = unix_ms();
    tokio::time::sleep(Duration::from_millis(input.ms)).await;
    let end = unix_ms();
    if let Ok(path) = std::env::var("WAYMARK_INTERVALS") {
        use std::io::Write;
        let line = format!("{} {} {start} {end}\n", ctx.workflow_id(), std::process::id());
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("intervals file");
        f.write_all(line.as_bytes()).expect("write interval");
    }
    Ok(input.ms)
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let capacity = std::env::var("WAYMARK_CAPACITY")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(100);
    let role = std::env::var("WAYMARK_ROLE").unwrap_or_else(|_| "workflows".into());
    let mut builder = Worker::builder()
        .app_version(std::env::var("WAYMARK_APP_VERSION").unwrap_or_else(|_| "test-1".into()))
        .max_concurrent_workflows(capacity)
        .park_after(
            match std::env::var("WAYMARK_PARK_AFTER_MS")
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
            {
                Some(0) => None,
                Some(ms) => Some(Duration::from_millis(ms)),
                None => Some(Duration::from_secs(60)),
            },
        );
    if role == "steps" || role == "all" {
        builder = builder.step("double", double).step("fail_then", fail_then);
    }
    if role == "golden" {
        builder = waymark_integration_tests::golden::register(builder);
    }
    if role == "workflows" || role == "all" {
        builder = builder
            .workflow("counted", counted)
            .workflow("echo", echo)
            .workflow("flaky", flaky)
            .workflow("inbox", inbox)
            .workflow("napper", napper)
            .workflow("courier", courier)
            .workflow("announcer", announcer)
            .workflow("watcher", watcher)
            .workflow("streamer", streamer)
            .workflow("family", family)
            .workflow("looper", looper)
            .workflow("caller", caller)
            .workflow("racer", racer)
            .workflow("hold", hold)
            .workflow("drawn", drawn)
            .workflow("cart", cart);
    }
    if let Ok(queues) = std::env::var("WAYMARK_QUEUES") {
        for q in queues.split(',').filter(|q| !q.is_empty()) {
            builder = builder.queue(q);
        }
    }
    let worker = builder.build();
    eprintln!("test worker {} pid {}", worker.worker_id(), std::process::id());
    if let Err(e) = worker.run().await {
        eprintln!("worker failed: {e}");
        std::process::exit(1);
    }
}
