//! Start-and-send against a real server and worker, on SQLite and PostgreSQL: the workflow is
//! started once and each keyed message delivered once however often the call is repeated, the
//! message is in before the workflow first runs, and a refused call starts nothing. Then the
//! same from the CLI.

use std::time::Duration;

use serde_json::json;
use waymark_integration_tests::{on_both_stores, run_cli, setup, Backend};
use waymark_sdk::{StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

/// `inbox` receives `count` messages on "orders", waiting up to `timeout_ms` for each.
fn inbox(count: u32, timeout_ms: u64) -> serde_json::Value {
    json!({"topic": "orders", "timeout_ms": timeout_ms, "count": count})
}

async fn each_message_is_delivered_once_to_one_workflow(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let send = |n: u32, key: &'static str| async move {
        c.start_and_send(
            "inbox",
            &inbox(2, 60_000),
            StartOptions::id("customer-1"),
            "orders",
            &json!({"n": n}),
            Some(key),
        )
        .await
        .unwrap()
    };
    let first = send(1, "k1").await;
    assert!(first.started.created && !first.duplicate, "{first:?}");
    // A retried call: the same workflow, the same message, nothing new.
    let retried = send(1, "k1").await;
    assert!(!retried.started.created && retried.duplicate, "{retried:?}");
    assert_eq!(retried.message_id, first.message_id);
    // The next event for the customer goes to the workflow already running.
    let second = send(2, "k2").await;
    assert!(!second.started.created && !second.duplicate, "{second:?}");

    let done = c.await_workflow("customer-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success, "{done:?}");
    assert_eq!(done.output, Some(json!({"received": [{"n": 1}, {"n": 2}]})));
    assert_eq!(c.messages("customer-1").await.unwrap().len(), 2);

    // The message is in before the workflow first runs: a receive that waits a millisecond
    // finds it.
    let at_once = c
        .start_and_send(
            "inbox",
            &inbox(1, 1),
            StartOptions::id("customer-2"),
            "orders",
            &json!("hi"),
            None,
        )
        .await
        .unwrap();
    assert!(at_once.started.created);
    let done = c.await_workflow("customer-2", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.output, Some(json!({"received": ["hi"]})), "{done:?}");
}

async fn a_refused_call_starts_nothing(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    let reason = |e: waymark_sdk::Error| e.reason().unwrap_or("<no reason>").to_string();

    // A finished workflow under the id takes no more messages.
    c.start_and_send(
        "inbox",
        &inbox(1, 60_000),
        StartOptions::id("done-1"),
        "orders",
        &json!(1),
        None,
    )
    .await
    .unwrap();
    c.await_workflow("done-1", Some(PATIENCE)).await.unwrap();
    let e = c
        .start_and_send(
            "inbox",
            &inbox(1, 60_000),
            StartOptions::id("done-1"),
            "orders",
            &json!(2),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(reason(e), "WORKFLOW_NOT_RUNNING");
    assert_eq!(c.messages("done-1").await.unwrap().len(), 1);

    // Another workflow's name under the id.
    let e = c
        .start_and_send(
            "echo",
            &json!(null),
            StartOptions::id("done-1"),
            "orders",
            &json!(3),
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(reason(e), "WORKFLOW_ID_CONFLICT");

    // A debounced start would collapse onto another: refused, and nothing started.
    let debounced = StartOptions {
        delay: Some(Duration::from_secs(60)),
        debounce_key: Some("d".into()),
        ..StartOptions::id("debounced-1")
    };
    let e = c
        .start_and_send("inbox", &inbox(1, 1), debounced, "orders", &json!(4), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e}");
    assert_eq!(reason(c.get("debounced-1").await.unwrap_err()), "WORKFLOW_NOT_FOUND");
}

on_both_stores!(
    each_message_is_delivered_once_to_one_workflow,
    a_refused_call_starts_nothing
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_starts_and_sends() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    let input = inbox(1, 60_000).to_string();
    let args = [
        "workflow",
        "start-and-send",
        "inbox",
        "--id",
        "cli-1",
        "--input",
        &input,
        "--topic",
        "orders",
        "--message",
        r#"{"ok": true}"#,
        "--idempotency-key",
        "k1",
    ];
    let (code, out, err) = run_cli(&s.server.addr, &args);
    assert_eq!((code, out.trim()), (0, "cli-1"), "{err}");
    let (code, out, err) = run_cli(&s.server.addr, &args);
    assert_eq!((code, out.trim()), (0, "cli-1"), "{err}");
    assert!(
        err.contains("already started") && err.contains("already sent"),
        "a repeat says what it did not do again: {err}"
    );
    let done = s.client.await_workflow("cli-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.output, Some(json!({"received": [{"ok": true}]})));
    let (code, _, err) = run_cli(
        &s.server.addr,
        &["workflow", "start-and-send", "inbox", "--message", "not json"],
    );
    assert!(code != 0 && err.contains("--message is not valid JSON"), "{code} {err}");
}
