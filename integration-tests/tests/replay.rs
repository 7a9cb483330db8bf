//! Replay rules with real worker processes, on SQLite and PostgreSQL: a replay that calls other
//! steps than the history records fails the workflow visibly, and a workflow pinned to one app
//! version is only ever recovered onto workers of that version.

use std::time::Duration;

use waymark_integration_tests::{
    fast_recovery_args, side_effects, wait_for, wait_for_registration, Backend, ServerProcess, TestDatabase,
    WorkerProcess,
};
use waymark_sdk::{StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

async fn wait_for_effects(log: &std::path::Path, n: usize) {
    wait_for(&format!("{n} side effects"), PATIENCE, || {
        let count = side_effects::read(log).len();
        async move { (count >= n).then_some(()) }
    })
    .await
}

async fn changed_code_fails_the_replay(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let mut original = WorkerProcess::start(&server.addr, &log, 5, "original");
    wait_for_registration(&client, "counted").await;
    client
        .start_json(
            "counted",
            serde_json::json!({"steps": 50, "step_ms": 50}),
            StartOptions::id("nd"),
        )
        .await
        .unwrap();
    wait_for_effects(&log, 3).await;
    original.kill();
    let _changed =
        WorkerProcess::start_with_env(&server.addr, &log, 5, "changed", &[("WAYMARK_TEST_VARIANT", "renamed")]);
    let w = client.await_workflow("nd", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Error, "{w:?}");
    let failure = w.failure.expect("failure");
    assert_eq!(failure.kind, "NonDeterminism");
    assert!(failure.message.contains("renamed-step-0"), "{}", failure.message);
    // Nothing from the changed code was recorded.
    assert!(client
        .steps("nd")
        .await
        .unwrap()
        .iter()
        .all(|s| s.name.starts_with("step-")));
}

/// The time and a UUID a workflow drew are recorded: the run that replays them after its worker
/// was killed gets the same values, which are also what the history shows.
async fn drawn_values_replay_the_same(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let mut first = WorkerProcess::start(&server.addr, &log, 5, "first");
    wait_for_registration(&client, "drawn").await;
    client
        .start_json("drawn", serde_json::json!({}), StartOptions::id("drawn"))
        .await
        .unwrap();
    // Both drawn and the receive's deadline recorded: the run is waiting.
    wait_for("the run to wait", PATIENCE, || {
        let client = client.clone();
        async move { (client.steps("drawn").await.ok()?.len() >= 3).then_some(()) }
    })
    .await;
    first.kill();
    // Held by the dead worker, or parked while it waits: either way the run that ends it is
    // another, which replays what was drawn.
    let _second = WorkerProcess::start(&server.addr, &log, 5, "second");
    client.send_message("drawn", "go", &1, None).await.unwrap();
    let w = client.await_workflow("drawn", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success, "{w:?}");
    let out: serde_json::Value = w.output_as().unwrap();
    assert!(out["epoch"].as_u64().unwrap() >= 2, "a later run finished it: {out}");
    let steps = client.steps("drawn").await.unwrap();
    assert_eq!(steps[0].name, "waymark.now");
    assert_eq!(steps[0].output, Some(serde_json::json!({ "now_ms": out["now_ms"] })));
    assert_eq!(steps[1].name, "waymark.uuid");
    assert_eq!(steps[1].output, Some(serde_json::json!({ "uuid": out["uuid"] })));
}

async fn recovery_stays_on_the_app_version(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let client = server.client().await;
    let log = db.dir.join("effects.log");
    let mut v1 = WorkerProcess::start_with_env(&server.addr, &log, 5, "v1", &[("WAYMARK_APP_VERSION", "v1")]);
    wait_for_registration(&client, "counted").await;
    client
        .start_json(
            "counted",
            serde_json::json!({"steps": 20, "step_ms": 50}),
            StartOptions::id("pinned"),
        )
        .await
        .unwrap();
    wait_for_effects(&log, 2).await;
    v1.kill();
    assert_eq!(client.get("pinned").await.unwrap().app_version, "v1");
    let _v2 = WorkerProcess::start_with_env(&server.addr, &log, 5, "v2", &[("WAYMARK_APP_VERSION", "v2")]);
    wait_for("the pinned workflow to be recovered", PATIENCE, || {
        let c = client.clone();
        async move {
            c.get("pinned")
                .await
                .ok()
                .filter(|w| w.status == WorkflowStatus::Enqueued && w.recovery_attempts == 1)
        }
    })
    .await;
    // A newer, unpinned workflow runs on v2; the older pinned one would have been claimed first
    // had v2 been allowed to take it.
    client
        .start_json("counted", serde_json::json!({"steps": 1}), StartOptions::id("fresh"))
        .await
        .unwrap();
    let fresh = client.await_workflow("fresh", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (fresh.status, fresh.app_version.as_str()),
        (WorkflowStatus::Success, "v2")
    );
    assert_eq!(client.get("pinned").await.unwrap().status, WorkflowStatus::Enqueued);
    let _v1_again = WorkerProcess::start_with_env(&server.addr, &log, 5, "v1-again", &[("WAYMARK_APP_VERSION", "v1")]);
    let done = client.await_workflow("pinned", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.output),
        (WorkflowStatus::Success, Some(serde_json::json!(20)))
    );
}

waymark_integration_tests::on_both_stores!(
    changed_code_fails_the_replay,
    recovery_stays_on_the_app_version,
    drawn_values_replay_the_same
);
