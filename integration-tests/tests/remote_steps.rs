//! Remote steps with real processes, on SQLite and PostgreSQL: a workflow on one worker calls a
//! step that only another worker registered; retries, timeouts, waiting for the first or all of
//! several; and crashes — the caller's worker killed while the step runs (the step must not run
//! again), and the step's worker killed mid-attempt (the step is retried elsewhere).

use std::time::Duration;

use waymark_integration_tests::{setup, side_effects, wait_for, Backend, Setup, WorkerProcess};
use waymark_sdk::{StartOptions, WorkflowInfo, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

/// A worker that runs only remote steps (no workflows).
fn step_worker(s: &Setup, name: &str) -> WorkerProcess {
    WorkerProcess::start_with_env(
        &s.server.addr,
        &s.db.dir.join("effects.log"),
        20,
        name,
        &[("WAYMARK_ROLE", "steps")],
    )
}

async fn run(s: &Setup, workflow: &str, id: &str, input: serde_json::Value) -> WorkflowInfo {
    s.client
        .start_json(workflow, input, StartOptions::id(id))
        .await
        .expect("start");
    let w = s.client.await_workflow(id, Some(PATIENCE)).await.expect("await");
    assert_eq!(w.status, WorkflowStatus::Success, "{id}: {w:?}");
    w
}

/// Side effects logged under `key`: (started, finished) attempts.
fn attempts(s: &Setup, key: &str) -> (usize, usize) {
    let effects = side_effects::read(&s.db.dir.join("effects.log"));
    let mine = effects.iter().filter(|e| e.workflow_id == key);
    let started = mine.clone().filter(|e| e.epoch == 0).count();
    (started, mine.filter(|e| e.epoch == 1).count())
}

async fn a_step_runs_on_the_worker_that_registered_it(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let _steps = step_worker(&s, "steps");
    let w = run(
        &s,
        "caller",
        "c1",
        serde_json::json!({"step": "double", "input": {"n": 21, "key": "c1"}}),
    )
    .await;
    assert_eq!(w.output, Some(serde_json::json!(42)));
    let steps = s.client.steps("c1").await.unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!((steps[0].name.as_str(), steps[0].attempts), ("double", 1));
    assert_eq!(attempts(&s, "c1"), (1, 1), "ran once, on the step worker");
}

async fn failed_attempts_are_retried_then_the_failure_is_recorded(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let _steps = step_worker(&s, "steps");
    // Fails twice, succeeds on the third of three attempts.
    let w = run(
        &s,
        "caller",
        "r1",
        serde_json::json!({"step": "fail_then", "input": {"key": "r1", "fail_times": 2}, "max_attempts": 3}),
    )
    .await;
    assert_eq!(w.output, Some(serde_json::json!(3)));
    assert_eq!(s.client.steps("r1").await.unwrap()[0].attempts, 3);
    // Out of attempts: the last failure is the step's result.
    let w = run(
        &s,
        "caller",
        "r2",
        serde_json::json!({"step": "fail_then", "input": {"key": "r2", "fail_times": 5}, "max_attempts": 2}),
    )
    .await;
    assert_eq!(w.output, Some(serde_json::json!({"error": "planned failure 2"})));
    let step = &s.client.steps("r2").await.unwrap()[0];
    assert_eq!(step.attempts, 2);
    assert!(step.failure.is_some());
}

async fn an_attempt_past_its_timeout_fails(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let _steps = step_worker(&s, "steps");
    let w = run(
        &s,
        "caller",
        "t1",
        serde_json::json!({"step": "double", "input": {"n": 1, "ms": 600_000, "key": "t1"},
            "max_attempts": 1, "timeout_ms": 300}),
    )
    .await;
    let message = w.output.unwrap()["error"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("did not finish within 300 ms"), "{message}");
    assert_eq!(attempts(&s, "t1"), (1, 0));
}

async fn wait_for_the_first_or_all(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let _steps = step_worker(&s, "steps");
    // A slow step and a quick child: the child wins, and the recorded winner stands.
    let w = run(
        &s,
        "racer",
        "first",
        serde_json::json!({"calls": [["double", {"n": 1, "ms": 600_000, "key": "slow"}]],
            "children": [["echo", {"hi": 1}]]}),
    )
    .await;
    assert_eq!(w.output, Some(serde_json::json!({"winner": 1})));
    let steps = s.client.steps("first").await.unwrap();
    assert!(steps.iter().any(|st| st.name == "waymark.select"), "{steps:?}");
    // All of two steps and a child.
    let w = run(
        &s,
        "racer",
        "all",
        serde_json::json!({"calls": [["double", {"n": 2, "ms": 200, "key": "a"}], ["double", {"n": 3, "key": "b"}]],
            "children": [["echo", "x"]], "all": true}),
    )
    .await;
    assert_eq!(w.output, Some(serde_json::json!({"results": [4, 6, "x"]})));
}

async fn the_callers_worker_dies_while_the_step_runs(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    let _steps = step_worker(&s, "steps");
    s.client
        .start_json(
            "caller",
            serde_json::json!({"step": "double", "input": {"n": 5, "ms": 2_000, "key": "k"}}),
            StartOptions::id("k"),
        )
        .await
        .unwrap();
    wait_for("the step to start", PATIENCE, || async {
        (attempts(&s, "k").0 == 1).then_some(())
    })
    .await;
    s.worker.kill();
    let _replacement = WorkerProcess::start(&s.server.addr, &s.db.dir.join("effects.log"), 20, "replacement");
    let w = s.client.await_workflow("k", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (w.status, &w.output),
        (WorkflowStatus::Success, &Some(serde_json::json!(10)))
    );
    assert!(w.recovery_attempts >= 1, "the caller was recovered: {w:?}");
    assert_eq!(
        attempts(&s, "k"),
        (1, 1),
        "the step ran once; the recovered caller found its result"
    );
}

async fn the_steps_worker_dies_mid_attempt(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let mut first = step_worker(&s, "steps-1");
    s.client
        .start_json(
            "caller",
            serde_json::json!({"step": "double", "input": {"n": 7, "ms": 1_000, "key": "m"}}),
            StartOptions::id("m"),
        )
        .await
        .unwrap();
    wait_for("the step to start", PATIENCE, || async {
        (attempts(&s, "m").0 == 1).then_some(())
    })
    .await;
    first.kill();
    let _second = step_worker(&s, "steps-2");
    let w = s.client.await_workflow("m", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (w.status, w.output),
        (WorkflowStatus::Success, Some(serde_json::json!(14)))
    );
    assert_eq!(
        attempts(&s, "m"),
        (2, 1),
        "the lost attempt was run again, and finished once"
    );
    assert_eq!(s.client.steps("m").await.unwrap()[0].attempts, 2);
}

waymark_integration_tests::on_both_stores!(
    a_step_runs_on_the_worker_that_registered_it,
    failed_attempts_are_retried_then_the_failure_is_recorded,
    an_attempt_past_its_timeout_fails,
    wait_for_the_first_or_all,
    the_callers_worker_dies_while_the_step_runs,
    the_steps_worker_dies_mid_attempt,
);
