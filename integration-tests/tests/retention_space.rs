//! With retention on, SQLite's file stops growing under steady load: the pages the collector
//! frees are reused by new workflows. Without retention the same load grows the file round
//! after round, which is what shows this test can fail. (SQLite only: on PostgreSQL the same
//! reuse is VACUUM's, which autovacuum runs on its own schedule.)

use std::time::Duration;

use serde_json::json;
use waymark_integration_tests::{wait_for, Backend, ServerProcess, TestDatabase, WorkerProcess};
use waymark_sdk::{Client, ListOptions, StartOptions, WorkflowStatus};

const ROUNDS: usize = 9;
const PER_ROUND: usize = 150;

/// One round of load: `PER_ROUND` workflows with a 4 KB input each, until none is left
/// running (with retention they may be gone as soon as they finish, so none is awaited by id).
async fn round(c: &Client, r: usize) {
    let pad = "x".repeat(4096);
    for i in 0..PER_ROUND {
        let id = format!("r{r}-{i}");
        c.start_json("echo", json!({ "pad": pad }), StartOptions::id(id))
            .await
            .unwrap();
    }
    let live = [
        WorkflowStatus::Enqueued,
        WorkflowStatus::Pending,
        WorkflowStatus::Delayed,
    ];
    wait_for("the round finished", Duration::from_secs(120), || async {
        (count(c, &live).await == 0).then_some(())
    })
    .await;
    assert_eq!(count(c, &[WorkflowStatus::Error]).await, 0, "none failed");
}

async fn count(c: &Client, statuses: &[WorkflowStatus]) -> u64 {
    let options = ListOptions {
        statuses: statuses.to_vec(),
        include_total: true,
        page_size: 1,
        ..Default::default()
    };
    c.list_page(options).await.unwrap().total.unwrap_or(0)
}

/// The database file's size in bytes (its write-ahead log comes and goes with checkpoints;
/// what it holds ends up in the file).
fn size(db: &TestDatabase) -> u64 {
    std::fs::metadata(db.dir.join("waymark.db"))
        .map(|m| m.len())
        .unwrap_or(0)
}

/// The database's size after the warm-up rounds and after the last one.
async fn sizes_under_load(retention: bool) -> (u64, u64) {
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    let flags: Vec<String> = if retention {
        vec![
            "--retention".into(),
            "0s".into(),
            "--retention-rate".into(),
            "100000".into(),
        ]
    } else {
        Vec::new()
    };
    let server = ServerProcess::start(&db, &flags).await;
    let c = server.client().await;
    let _worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 50, "worker");
    waymark_integration_tests::wait_for_registration(&c, "echo").await;
    let mut warm = 0;
    for r in 0..ROUNDS {
        round(&c, r).await;
        if retention {
            // The collector takes each round away before the next comes.
            wait_for("the round collected", Duration::from_secs(120), || async {
                (count(&c, &[WorkflowStatus::Success]).await == 0).then_some(())
            })
            .await;
        }
        if r == 2 {
            warm = size(&db);
        }
    }
    (warm, size(&db))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_stops_growing_under_steady_load_with_retention_on() {
    let (warm, last) = sizes_under_load(true).await;
    // Six more rounds of ~600 KB of inputs each fit in the pages the first ones freed (the
    // slack is for the pages a checkpoint happens to leave in the log at either moment).
    assert!(
        last <= warm + warm / 4,
        "with retention the file grew from {warm} to {last} bytes over {} rounds",
        ROUNDS - 3
    );
    let (warm_kept, last_kept) = sizes_under_load(false).await;
    assert!(
        last_kept > warm_kept + (ROUNDS as u64 - 3) * (PER_ROUND as u64 * 4096) / 2,
        "without retention the same load grows it ({warm_kept} -> {last_kept} bytes)"
    );
    eprintln!("retention on: {warm} -> {last} bytes; off: {warm_kept} -> {last_kept} bytes");
}
