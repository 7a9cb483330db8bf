//! The end and the start of a workflow's life, through a real server on SQLite and PostgreSQL:
//! deleting finished workflows (one, or a tree) with everything recorded for them, refusals
//! for what has not finished, the CLI; and enqueuing a workflow before any worker registers its
//! name, which runs once one does.

use std::time::Duration;

use serde_json::json;
use waymark_integration_tests::{
    cli, fast_recovery_args, free_port, http_get, setup, side_effects, wait_for, wait_for_registration, Backend,
    ServerProcess, TestDatabase, WorkerProcess,
};
use waymark_sdk::{Error, ForkOptions, ListOptions, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn reason(e: &Error) -> &str {
    e.reason().unwrap_or("<no reason>")
}

/// The ids of the workflows `options` lists, sorted.
async fn listed(c: &waymark_sdk::Client, options: ListOptions) -> Vec<String> {
    let mut ids: Vec<String> = c
        .list(options)
        .await
        .unwrap()
        .0
        .into_iter()
        .map(|w| w.workflow_id)
        .collect();
    ids.sort();
    ids
}

/// The value of one series in a scrape of the metrics listener on `port`.
async fn metric(port: u16, series: &str) -> Option<f64> {
    let (_, scrape) = http_get(port, "/metrics").await.unwrap();
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
}

async fn finished_workflows_are_deleted_with_their_records(backend: Backend) {
    let port = free_port();
    let Some(s) = setup(backend, &["--metrics-listen", &format!("127.0.0.1:{port}")]).await else {
        return;
    };
    let c = &s.client;
    // A parent with two children, all finished.
    let family = json!({ "children": [["echo", 1], ["echo", 2]] });
    c.start_json("family", family, StartOptions::id("fam")).await.unwrap();
    let done = c.await_workflow("fam", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    let children = listed(
        c,
        ListOptions {
            parent_workflow_id: Some("fam".into()),
            ..Default::default()
        },
    )
    .await;
    assert_eq!(children.len(), 2, "{children:?}");

    // A child goes alone; then the parent with what is left of its tree.
    assert_eq!(c.delete(&children[0], false).await.unwrap(), [children[0].clone()]);
    let deleted = c.delete("fam", true).await.unwrap();
    assert_eq!(
        deleted,
        ["fam".to_string(), children[1].clone()],
        "the one asked for first"
    );
    for id in ["fam", &children[0], &children[1]] {
        assert_eq!(reason(&c.get(id).await.unwrap_err()), "WORKFLOW_NOT_FOUND", "{id}");
        assert_eq!(reason(&c.steps(id).await.unwrap_err()), "WORKFLOW_NOT_FOUND", "{id}");
    }
    let e = c.delete("fam", false).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::NotFound), "WORKFLOW_NOT_FOUND")
    );

    // Waiting for a message: not finished, refused; cancelled, deleted with its inbox.
    let inbox = json!({ "topic": "t", "timeout_ms": 600_000 });
    c.start_json("inbox", inbox.clone(), StartOptions::id("waiting"))
        .await
        .unwrap();
    c.send_message("waiting", "other", &json!("unread"), None)
        .await
        .unwrap();
    let e = c.delete("waiting", false).await.unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::FailedPrecondition), "WORKFLOW_NOT_FINISHED")
    );
    assert_eq!(
        c.messages("waiting").await.unwrap().len(),
        1,
        "a refused delete touches nothing"
    );
    c.cancel("waiting").await.unwrap();
    let (code, out, err) = cli(&s.server.addr, &["workflow", "delete", "waiting"]);
    assert_eq!((code, out.trim()), (0, "waiting deleted"), "{err}");
    // The same id starts afresh: nothing of the old one is left to read.
    c.start_json("inbox", inbox, StartOptions::id("waiting")).await.unwrap();
    assert!(
        c.messages("waiting").await.unwrap().is_empty(),
        "the old inbox went with it"
    );
    let (code, _, err) = cli(&s.server.addr, &["workflow", "delete", "waiting"]);
    assert!(code != 0 && err.contains("WORKFLOW_NOT_FINISHED"), "{code} {err}");
    let deleted = r#"waymark_workflows_deleted_total{namespace="default",reason="request"}"#;
    assert_eq!(
        metric(port, deleted).await,
        Some(4.0),
        "a child, the rest of the tree (2), waiting"
    );
}

async fn a_workflow_enqueued_before_its_worker_runs_once_one_registers_it(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let port = free_port();
    let mut args = fast_recovery_args();
    args.extend(["--metrics-listen".to_string(), format!("127.0.0.1:{port}")]);
    let server = ServerProcess::start(&db, &args).await;
    let c = server.client().await;
    // No worker yet: refused unless the start allows an unregistered name.
    let e = c
        .start_json("echo", json!(1), StartOptions::id("early-refused"))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NAME_UNKNOWN");
    let early = StartOptions {
        allow_unregistered: true,
        ..StartOptions::id("early")
    };
    let started = c.start_json("echo", json!({ "n": 7 }), early.clone()).await.unwrap();
    assert!(started.created && !started.name_registered, "{started:?}");
    assert_eq!(started.workflow.status, WorkflowStatus::Enqueued);
    let again = c.start_json("echo", json!({ "n": 7 }), early).await.unwrap();
    assert!(!again.created, "a retried start is the same start");
    let (code, out, err) = cli(
        &server.addr,
        &["workflow", "start", "typo-name", "--input", "1", "--allow-unregistered"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("no worker has registered"), "{err}");
    let typo = out.trim().to_string();

    // The worker arrives (a rolling deploy) and takes it.
    let _worker = WorkerProcess::start(&server.addr, &db.dir.join("effects.log"), 20, "worker");
    wait_for_registration(&c, "echo").await;
    let done = c.await_workflow("early", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (done.status, done.output),
        (WorkflowStatus::Success, Some(json!({ "n": 7 })))
    );
    let later = StartOptions {
        allow_unregistered: true,
        ..StartOptions::id("later")
    };
    assert!(c.start_json("echo", json!(2), later).await.unwrap().name_registered);
    // The misspelt name still waits, visibly.
    assert_eq!(c.get(&typo).await.unwrap().status, WorkflowStatus::Enqueued);
    let unregistered = r#"waymark_unregistered_starts_total{namespace="default",queue="default"}"#;
    assert_eq!(
        metric(port, unregistered).await,
        Some(2.0),
        "early and the typo, once each"
    );
}

async fn retention_deletes_finished_workflows_past_their_time_and_keeps_the_rest(backend: Backend) {
    let port = free_port();
    let metrics = format!("127.0.0.1:{port}");
    let flags = [
        "--metrics-listen",
        &metrics,
        "--retention",
        "1s",
        "--retention-rule",
        "status:ERROR=forever",
        "--retention-rate",
        "7",
    ];
    let Some(s) = setup(backend, &flags).await else { return };
    let c = &s.client;
    for i in 0..20 {
        c.start_json("echo", json!(i), StartOptions::id(format!("done-{i}")))
            .await
            .unwrap();
    }
    let failing = json!({ "fail_times": 5, "max_attempts": 1 });
    c.start_json("flaky", failing, StartOptions::id("failed"))
        .await
        .unwrap();
    let waiting = json!({ "topic": "t", "timeout_ms": 600_000 });
    c.start_json("inbox", waiting, StartOptions::id("waiting"))
        .await
        .unwrap();
    assert_eq!(
        c.await_workflow("failed", Some(PATIENCE)).await.unwrap().status,
        WorkflowStatus::Error
    );
    // Every finished success goes, at most 7 a second, with its records.
    wait_for("the collector to delete the successes", PATIENCE, || async {
        let echoes = ListOptions {
            workflow_name: Some("echo".into()),
            ..Default::default()
        };
        listed(c, echoes).await.is_empty().then_some(())
    })
    .await;
    assert_eq!(reason(&c.steps("done-3").await.unwrap_err()), "WORKFLOW_NOT_FOUND");
    // The rule keeps errors for ever; what has not finished is never touched.
    assert_eq!(c.get("failed").await.unwrap().status, WorkflowStatus::Error);
    let w = c.get("waiting").await.unwrap();
    assert!(
        matches!(w.status, WorkflowStatus::Pending | WorkflowStatus::Delayed),
        "{w:?}"
    );
    // Everything else the setup ran (its registration probe) finished and went too.
    assert_eq!(listed(c, ListOptions::default()).await, ["failed", "waiting"]);
    let deleted = r#"waymark_workflows_deleted_total{namespace="default",reason="retention"}"#;
    assert!(metric(port, deleted).await >= Some(20.0));
}

async fn a_failed_workflow_is_forked_onto_fixed_code_and_rerun_where_it_failed(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let effects = s.db.dir.join("effects.log");
    // A finished workflow of four steps, forked from its step 2: only steps 2 and 3 run again.
    c.start_json("counted", json!({ "steps": 4 }), StartOptions::id("four"))
        .await
        .unwrap();
    assert_eq!(
        c.await_workflow("four", Some(PATIENCE)).await.unwrap().status,
        WorkflowStatus::Success
    );
    let options = ForkOptions {
        from_step: Some(2),
        workflow_id: Some("four-again".into()),
        ..Default::default()
    };
    let fork = c.fork("four", options).await.unwrap();
    assert_eq!(
        (fork.forked_from_workflow_id.as_str(), fork.forked_from_step),
        ("four", 2)
    );
    let done = c.await_workflow("four-again", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    let mut ran: Vec<u32> = side_effects::read(&effects)
        .into_iter()
        .filter(|e| e.workflow_id == "four-again")
        .map(|e| e.step_id)
        .collect();
    ran.sort();
    assert_eq!(ran, [2, 3], "the copied steps replay, the rest run");
    assert_eq!(c.steps("four-again").await.unwrap().len(), 4);

    // A bug: the step fails, the workflow ends ERROR on version test-1.
    let buggy = json!({ "fail_times": 1, "max_attempts": 1 });
    c.start_json("flaky", buggy, StartOptions::id("bug")).await.unwrap();
    let failed = c.await_workflow("bug", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (failed.status, failed.app_version.as_str()),
        (WorkflowStatus::Error, "test-1")
    );
    // The fix ships as version test-2: the fork runs there and succeeds.
    let env = [("WAYMARK_APP_VERSION", "test-2"), ("WAYMARK_TEST_VARIANT", "fixed")];
    let _fixed = WorkerProcess::start_with_env(&s.server.addr, &effects, 10, "fixed", &env);
    let (code, out, err) = cli(
        &s.server.addr,
        &[
            "workflow",
            "fork",
            "bug",
            "--from-step",
            "0",
            "--app-version",
            "test-2",
            "--id",
            "bug-fixed",
        ],
    );
    assert_eq!((code, out.trim()), (0, "bug-fixed"), "{err}");
    let fixed = c.await_workflow("bug-fixed", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (fixed.status, fixed.app_version.as_str(), fixed.output),
        (WorkflowStatus::Success, "test-2", Some(json!(1)))
    );
    let (_, shown, _) = cli(&s.server.addr, &["workflow", "get", "bug-fixed"]);
    assert!(
        shown.contains("forked from") && shown.contains("bug at step 0"),
        "{shown}"
    );

    // Or the fix ships under the same version: the old worker goes, a fixed one comes, and
    // resuming the ERROR workflow reruns its failed step there.
    drop(s.worker);
    let env = [("WAYMARK_TEST_VARIANT", "fixed")];
    let _same_version = WorkerProcess::start_with_env(&s.server.addr, &effects, 10, "fixed-1", &env);
    let resumed = c.resume("bug").await.unwrap();
    assert_eq!((resumed.status, resumed.failure), (WorkflowStatus::Enqueued, None));
    let rerun = c.await_workflow("bug", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (rerun.status, rerun.output.clone()),
        (WorkflowStatus::Success, Some(json!(1))),
        "{rerun:?}"
    );
    let steps = c.steps("bug").await.unwrap();
    assert_eq!(steps.len(), 1);
    assert!(steps[0].failure.is_none(), "the failed record was replaced: {steps:?}");
}

waymark_integration_tests::on_both_stores!(
    a_failed_workflow_is_forked_onto_fixed_code_and_rerun_where_it_failed,
    retention_deletes_finished_workflows_past_their_time_and_keeps_the_rest,
    finished_workflows_are_deleted_with_their_records,
    a_workflow_enqueued_before_its_worker_runs_once_one_registers_it,
);
