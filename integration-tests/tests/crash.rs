//! Crashes with real processes: kill -9 a worker, freeze a worker past its lease (a zombie), and
//! kill -9 the server — on SQLite and on PostgreSQL. After each, every workflow must finish, and
//! the side-effect log must show that no recorded step ran again.

use std::{collections::HashMap, time::Duration};

use waymark_integration_tests::{
    fast_recovery_args, side_effects, signal, wait_for, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Client, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(180);

async fn start_batch(client: &Client, prefix: &str, n: usize, steps: u32, step_ms: u64) -> Vec<String> {
    waymark_integration_tests::wait_for_registration(client, "counted").await;
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}-{i}");
        client
            .start_json(
                "counted",
                serde_json::json!({"steps": steps, "step_ms": step_ms}),
                StartOptions::id(&id),
            )
            .await
            .expect("start");
        ids.push(id);
    }
    ids
}

async fn recorded_steps(client: &Client, ids: &[String]) -> usize {
    let mut n = 0;
    for id in ids {
        n += client.steps(id).await.map(|s| s.len()).unwrap_or(0);
    }
    n
}

/// Waits until the workflows' steps have run `n` times in all (read from the side-effect log,
/// which costs no server round trips, so the run is caught mid-way).
async fn wait_for_effects(log: &std::path::Path, n: usize) {
    wait_for(&format!("{n} step side effects"), PATIENCE, || {
        let count = side_effects::read(log).len();
        async move { (count >= n).then_some(()) }
    })
    .await
}

async fn all_succeeded(client: &Client, ids: &[String], steps: u32) {
    for id in ids {
        let w = client.await_workflow(id, Some(PATIENCE)).await.expect("await");
        assert_eq!(w.status, WorkflowStatus::Success, "{id}: {w:?}");
        assert_eq!(w.output, Some(serde_json::json!(steps)), "{id}");
    }
}

/// Every recorded step ran exactly once under the epoch that recorded it, and never after it was
/// recorded. Extra runs are allowed only under older epochs (a worker that died between doing the
/// step and recording it), at most one per workflow (the step in flight when it died), unless the
/// test lets more through (`max_lost_per_workflow`).
async fn check_exactly_once(
    client: &Client,
    ids: &[String],
    steps: u32,
    log: &std::path::Path,
    max_lost_per_workflow: usize,
) {
    let effects = side_effects::read(log);
    let by_step = side_effects::by_step(&effects);
    let mut lost: HashMap<String, usize> = HashMap::new();
    for id in ids {
        let recorded = client.steps(id).await.expect("steps");
        assert_eq!(recorded.len(), steps as usize, "{id} has every step recorded");
        for s in &recorded {
            let runs = by_step.get(&(id.clone(), s.step_id)).cloned().unwrap_or_default();
            let under_recording_epoch = runs.iter().filter(|e| e.epoch == s.epoch).count();
            assert_eq!(
                under_recording_epoch, 1,
                "{id} step {} ran {under_recording_epoch} times under its recording epoch {}: {runs:?}",
                s.step_id, s.epoch
            );
            assert!(
                runs.iter().all(|e| e.epoch <= s.epoch),
                "{id} step {} ran again after it was recorded: {runs:?}",
                s.step_id
            );
            *lost.entry(id.clone()).or_default() += runs.len() - 1;
        }
    }
    for (id, n) in lost {
        assert!(
            n <= max_lost_per_workflow,
            "{id}: {n} unrecorded step runs (expected at most {max_lost_per_workflow})"
        );
    }
}

// conformance: durable_steps
// conformance: replay_after_kill
async fn worker_killed_mid_run(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let mut first = WorkerProcess::start(&server.addr, &log, 50, "first");
    let ids = start_batch(&client, "kill-worker", 50, 10, 100).await;
    wait_for_effects(&log, 150).await;
    first.kill();
    let before = recorded_steps(&client, &ids).await;
    assert!(
        before < 500,
        "the worker was killed mid-run ({before} of 500 steps recorded)"
    );
    let _second = WorkerProcess::start(&server.addr, &log, 50, "second");
    all_succeeded(&client, &ids, 10).await;
    check_exactly_once(&client, &ids, 10, &log, 1).await;
    let recovered = client.get(&ids[0]).await.unwrap();
    assert!(
        recovered.recovery_attempts >= 1,
        "workflows were recovered: {recovered:?}"
    );
}

async fn zombie_worker_is_fenced(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let zombie = WorkerProcess::start(&server.addr, &log, 20, "zombie");
    let ids = start_batch(&client, "zombie", 10, 12, 100).await;
    wait_for_effects(&log, 20).await;
    signal(zombie.pid(), "STOP");
    let frozen_at: HashMap<String, usize> = {
        let mut m = HashMap::new();
        for id in &ids {
            m.insert(id.clone(), client.steps(id).await.unwrap().len());
        }
        m
    };
    let _successor = WorkerProcess::start(&server.addr, &log, 20, "successor");
    all_succeeded(&client, &ids, 12).await;
    let snapshot: HashMap<String, Vec<(u32, u64)>> = {
        let mut m = HashMap::new();
        for id in &ids {
            m.insert(
                id.clone(),
                client
                    .steps(id)
                    .await
                    .unwrap()
                    .iter()
                    .map(|s| (s.step_id, s.epoch))
                    .collect(),
            );
        }
        m
    };
    // Wake the zombie and wait until it has tried to write for the workflows it held.
    signal(zombie.pid(), "CONT");
    wait_for("the zombie's stale writes to be refused", PATIENCE, || {
        let text = zombie.log_text();
        async move { (text.contains("taken over by another dispatch") || text.contains("workflow cancelled")).then_some(()) }
    })
    .await;
    for id in &ids {
        let steps: Vec<(u32, u64)> = client
            .steps(id)
            .await
            .unwrap()
            .iter()
            .map(|s| (s.step_id, s.epoch))
            .collect();
        assert_eq!(
            &steps, &snapshot[id],
            "{id}: nothing recorded after the successor took over"
        );
        // The zombie's checkpoints are a prefix: every step after them came from a later dispatch.
        let zombie_epoch = steps.first().map(|s| s.1).unwrap();
        let last_zombie = steps.iter().filter(|s| s.1 == zombie_epoch).map(|s| s.0).max();
        let first_successor = steps.iter().filter(|s| s.1 > zombie_epoch).map(|s| s.0).min();
        if let (Some(z), Some(f)) = (last_zombie, first_successor) {
            assert!(
                z < f,
                "{id}: zombie step {z} recorded after successor step {f}: {steps:?}"
            );
        }
        assert!(steps.iter().all(|s| s.1 >= zombie_epoch));
    }
    assert!(
        frozen_at.values().any(|n| *n < 12),
        "the zombie was frozen mid-run: {frozen_at:?}"
    );
    check_exactly_once(&client, &ids, 12, &log, 2).await;
}

async fn server_killed_mid_run(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let mut server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let _worker = WorkerProcess::start(&server.addr, &log, 50, "worker");
    let ids = start_batch(&client, "kill-server", 50, 10, 100).await;
    wait_for_effects(&log, 100).await;
    server.kill();
    server.restart().await;
    let client = server.client().await;
    // The workflows are all still there, and the worker reconnects on its own.
    all_succeeded(&client, &ids, 10).await;
    check_exactly_once(&client, &ids, 10, &log, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_worker_killed_mid_run() {
    worker_killed_mid_run(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_worker_killed_mid_run() {
    worker_killed_mid_run(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_zombie_worker_is_fenced() {
    zombie_worker_is_fenced(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_zombie_worker_is_fenced() {
    zombie_worker_is_fenced(Backend::Postgres).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_server_killed_mid_run() {
    server_killed_mid_run(Backend::Sqlite).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_server_killed_mid_run() {
    server_killed_mid_run(Backend::Postgres).await
}
