//! Crashes with real processes: kill -9 a worker, freeze a worker past its lease (a zombie), and
//! kill -9 the server — on SQLite and on PostgreSQL. After each, every workflow must finish, and
//! the side-effect log must show that no recorded step ran again, and the server's log (a killed
//! server's up to the kill, and its restart's) no panic and no ERROR line.

use std::collections::HashMap;

use waymark_integration_tests::{
    fast_recovery_args, signal, wait_for,
    workload::{all_succeeded, check_exactly_once, recorded_steps, start_batch, wait_for_effects, PATIENCE},
    Backend, ServerProcess, TestDatabase, WorkerProcess,
};

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
    server.assert_log_clean(&[]);
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
    server.assert_log_clean(&[]);
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
    server.assert_log_clean(&[]);
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
