//! The chaos run: hundreds of workflows of many steps across Rust and Python worker processes
//! and two server replicas on one PostgreSQL, while — in one run — a worker is killed -9, a
//! worker is frozen past its lease and woken while its successor runs, PostgreSQL restarts fast
//! and then immediately, and a replica is killed -9 and restarted. Afterwards every workflow
//! succeeded with the right output, every recorded step's side effect happened exactly once under
//! the epoch that recorded it, extra runs are only of steps in flight at a fault (counted and
//! bounded), the frozen worker's writes were refused once it woke, and neither replica logged a
//! panic or an error other than store calls failed by the database's restarts.
//!
//! (On SQLite, the server killed -9 mid-write and reopened is `crash.rs`.)

use std::collections::HashSet;

use waymark_integration_tests::{
    fast_recovery_args,
    log_check::DATABASE_GONE,
    postgres_cluster::PostgresCluster,
    side_effects, signal, wait_for,
    workload::{all_succeeded, check_exactly_once, enqueue_batch, wait_for_effects, PATIENCE},
    ServerProcess, WorkerProcess,
};

const WORKFLOWS: usize = 300;
const STEPS: u32 = 10;
const CAPACITY: u32 = 20;

/// Effects so far, and the `n` more to wait for (never past the whole workload's).
async fn progress(log: &std::path::Path, n: usize) {
    let now = side_effects::read(log).len();
    wait_for_effects(log, (now + n).min(WORKFLOWS * STEPS as usize - 100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_on_postgres_with_rust_and_python_workers_and_two_replicas() {
    let Some(pg) = PostgresCluster::start() else { return };
    let db = pg.database();
    let args = fast_recovery_args();
    let mut a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let client = b.client().await;
    let log = db.dir.join("effects.log");
    // All queued before the first worker connects: started while workers ran, the batch could
    // be nearly done before the first fault (the starts are the slower side), leaving the zombie
    // nothing in hand to be refused for.
    let ids = enqueue_batch(&client, "chaos", WORKFLOWS, STEPS, 50).await;

    let mut doomed = WorkerProcess::start(&a.addr, &log, CAPACITY, "rust-doomed");
    let _steady = WorkerProcess::start(&b.addr, &log, CAPACITY, "rust-steady");
    let zombie = WorkerProcess::start(&b.addr, &log, CAPACITY, "rust-zombie");
    let Some(_python) = WorkerProcess::start_python(&a.addr, &log, CAPACITY, "python") else {
        return;
    };

    // 1. A worker killed -9 mid-run.
    wait_for_effects(&log, 300).await;
    doomed.kill();
    let _successor = WorkerProcess::start(&a.addr, &log, CAPACITY, "rust-successor");

    // 2. A worker frozen past its lease; woken below, while its successors still run.
    // Stopped once it has run steps of its own: a zombie holding only dispatches it had not
    // begun may be told to let them go when it wakes, writing nothing for the check below.
    progress(&log, 150).await;
    let zombie_pid = zombie.pid();
    wait_for("the zombie to run steps of its own", PATIENCE, || {
        let began = side_effects::read(&log).iter().any(|e| e.pid == zombie_pid);
        async move { began.then_some(()) }
    })
    .await;
    signal(zombie_pid, "STOP");

    // 3. PostgreSQL restarts, fast (clean disconnect).
    progress(&log, 200).await;
    pg.restart("fast");

    // 4. Replica A killed -9 and restarted on its port; its workers reconnect to it.
    progress(&log, 200).await;
    a.kill();
    a.restart().await;

    // 5. PostgreSQL restarts immediately (a crash, with WAL recovery).
    progress(&log, 200).await;
    pg.restart("immediate");

    // The zombie wakes only once the others have finished everything, what it held included
    // (recovered from it when its lease ended): whatever it still has is stale. It holds
    // something — workflows mid-step, or dispatched to it and not begun — since it was stopped
    // with most of the workload still queued.
    all_succeeded(&client, &ids, STEPS).await;
    signal(zombie_pid, "CONT");
    // A step write refused ("taken over by another dispatch") or, when the zombie had only
    // finished runs left to report, a completion refused (STALE_EPOCH).
    let refused = |text: &str| text.contains("taken over by another dispatch") || text.contains("STALE_EPOCH");
    let woke = std::time::Instant::now();
    while !refused(&zombie.log_text()) {
        if woke.elapsed() > PATIENCE {
            let text = zombie.log_text();
            let tail: Vec<&str> = text.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "timed out after {PATIENCE:?} waiting for the zombie's stale writes to be refused; its log ends:\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }

    all_succeeded(&client, &ids, STEPS).await;
    // Per workflow: one extra run for each fault that caught a step of it in flight.
    check_exactly_once(&client, &ids, STEPS, &log, 5).await;

    let effects = side_effects::read(&log);
    let runs_by_step = side_effects::by_step(&effects);
    let extra: usize = runs_by_step.values().map(|r| r.len() - 1).sum();
    let pids: HashSet<u32> = effects.iter().map(|e| e.pid).collect();
    let mut recovered = 0;
    for id in &ids {
        if client.get(id).await.unwrap().recovery_attempts > 0 {
            recovered += 1;
        }
    }
    eprintln!(
        "chaos: {} workflows × {STEPS} steps, {} step runs by {} processes, {extra} extra runs (steps in flight at a fault), {recovered} workflows recovered at least once",
        ids.len(),
        effects.len(),
        pids.len()
    );
    // Every extra run is a step that was in flight at one of the five faults: at most what the
    // workers had room for at each.
    assert!(
        extra <= 5 * 5 * CAPACITY as usize,
        "{extra} extra step runs is more than the faults had in flight"
    );
    assert!(pids.len() >= 4, "work was spread over the worker processes: {pids:?}");
    // The database restarts fail store calls that were under way; nothing else is an error.
    a.assert_log_clean(DATABASE_GONE);
    b.assert_log_clean(DATABASE_GONE);
}
