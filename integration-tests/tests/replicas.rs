//! Several server replicas on one PostgreSQL: a start, a send and an await through one replica
//! reach a workflow whose worker is attached to another — pushed by LISTEN/NOTIFY, or, with
//! NOTIFY switched off, found by polling; and a replica killed -9 whose timers another fires.

use std::time::Duration;

use waymark_integration_tests::{
    fast_recovery_args, wait_for, wait_for_registration, Backend, ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{StartOptions, WorkflowStatus};

async fn cross_replica_round_trip(extra: &[&str]) {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let mut args = fast_recovery_args();
    args.extend(extra.iter().map(|s| s.to_string()));
    let a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let _worker = WorkerProcess::start(&a.addr, &db.dir.join("effects.log"), 10, "on-a");
    let via_b = b.client().await;
    wait_for_registration(&via_b, "counted").await;
    // Started through B, run by the worker on A; its message is sent through B.
    via_b
        .start_json(
            "inbox",
            serde_json::json!({"timeout_ms": 60_000}),
            StartOptions::id("far"),
        )
        .await
        .unwrap();
    let waiting = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if via_b.steps("far").await.map(|s| !s.is_empty()).unwrap_or(false) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    });
    waiting
        .await
        .expect("the worker on A took the workflow started through B");
    via_b.send_message("far", "", &"across", None).await.unwrap();
    let w = via_b
        .await_workflow("far", Some(Duration::from_secs(30)))
        .await
        .expect("woken across replicas");
    assert_eq!(
        (w.status, w.output),
        (
            WorkflowStatus::Success,
            Some(serde_json::json!({"received": ["across"]}))
        )
    );
    assert!(!w.worker_id.is_empty());
}

/// Polling is set to an hour: only NOTIFY can carry the start, the send and the completion
/// across in time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_notify_carries_changes_between_replicas() {
    cross_replica_round_trip(&["--dispatch-poll-interval", "1h"]).await
}

/// NOTIFY off (as on a PostgreSQL-compatible database without it): polling finds the changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_polling_fallback_without_notify() {
    cross_replica_round_trip(&["--no-notify", "--dispatch-poll-interval", "200ms"]).await
}

/// Timers live in the database: a workflow parked in a durable sleep through replica A is woken
/// by replica B after A is killed -9, and finished by the worker attached to B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_surviving_replica_fires_the_timers_of_a_dead_one() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let args = fast_recovery_args();
    let mut a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let park = [("WAYMARK_PARK_AFTER_MS", "100")];
    let _on_a = WorkerProcess::start_with_env(&a.addr, &db.dir.join("effects.log"), 10, "on-a", &park);
    let via_a = a.client().await;
    wait_for_registration(&via_a, "counted").await;
    via_a
        .start_json("napper", serde_json::json!({"ms": 3_000}), StartOptions::id("nap"))
        .await
        .unwrap();
    wait_for("the sleeper to park through A", Duration::from_secs(60), || async {
        via_a
            .get("nap")
            .await
            .ok()
            .filter(|w| w.status == WorkflowStatus::Delayed)
    })
    .await;
    a.kill();
    let _on_b = WorkerProcess::start_with_env(&b.addr, &db.dir.join("effects.log"), 10, "on-b", &park);
    let via_b = b.client().await;
    let w = via_b
        .await_workflow("nap", Some(Duration::from_secs(60)))
        .await
        .expect("finished through B");
    assert_eq!(w.status, WorkflowStatus::Success);
    let steps = via_b.steps("nap").await.unwrap();
    let wake_at = steps[0].output.as_ref().unwrap()["wake_at_ms"].as_i64().unwrap();
    assert!(
        w.output.unwrap().as_i64().unwrap() >= wake_at,
        "woke no earlier than recorded"
    );
}

/// A remote step called by a workflow whose worker is on replica A runs on a worker attached only
/// to replica B, and its result wakes the caller on A. Polling is set to an hour: the call
/// reaches B's dispatcher, and the result reaches A, by NOTIFY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_remote_steps_cross_replicas() {
    let Some(db) = TestDatabase::new(Backend::Postgres).await else {
        return;
    };
    let mut args = fast_recovery_args();
    args.extend(["--dispatch-poll-interval".to_string(), "1h".to_string()]);
    let a = ServerProcess::start(&db, &args).await;
    let b = ServerProcess::start(&db, &args).await;
    let _callers = WorkerProcess::start(&a.addr, &db.dir.join("effects.log"), 10, "callers-on-a");
    let _steps = WorkerProcess::start_with_env(
        &b.addr,
        &db.dir.join("effects.log"),
        10,
        "steps-on-b",
        &[("WAYMARK_ROLE", "steps")],
    );
    let via_a = a.client().await;
    wait_for_registration(&via_a, "counted").await;
    via_a
        .start_json(
            "caller",
            serde_json::json!({"step": "double", "input": {"n": 8, "key": "x"}}),
            StartOptions::id("x"),
        )
        .await
        .unwrap();
    let w = via_a.await_workflow("x", Some(Duration::from_secs(30))).await.unwrap();
    assert_eq!(
        (w.status, w.output),
        (WorkflowStatus::Success, Some(serde_json::json!(16)))
    );
}
