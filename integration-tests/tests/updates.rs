//! Workflow updates against a real server and worker, on SQLite and PostgreSQL: a client's
//! update is answered in the same call by the workflow's own code (a step run for it), an
//! update sent again is answered again without running anything twice, a rejection and an
//! argument of the wrong shape reach the caller as UPDATE_REJECTED, and a caller learns when
//! the workflow has not answered yet or never will. Then a worker killed -9 inside an update's
//! handler: the caller, still waiting, gets the answer from the worker that recovers it, and the
//! handler's recorded step ran once under the dispatch that recorded it.

use std::time::Duration;

use serde_json::{json, Value};
use waymark_integration_tests::{
    fast_recovery_args, on_both_stores, setup, side_effects, wait_for, Backend, ServerProcess, TestDatabase,
    WorkerProcess,
};
use waymark_sdk::{Client, Error, StartOptions, UpdateOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

fn reason(e: &Error) -> &str {
    e.reason().unwrap_or("<no reason>")
}

fn id(update_id: &str) -> UpdateOptions {
    UpdateOptions {
        update_id: Some(update_id.into()),
        ..Default::default()
    }
}

async fn add(c: &Client, cart: &str, item: Value, options: UpdateOptions) -> Result<Value, Error> {
    c.update_workflow(cart, "add", &item, options).await
}

async fn updates_are_answered_by_the_workflow_once_each(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    c.start_json("cart", json!({"items": 2}), StartOptions::id("cart-1"))
        .await
        .unwrap();

    let tea = add(c, "cart-1", json!({"name": "tea", "qty": 2}), id("u-tea"))
        .await
        .unwrap();
    assert_eq!(tea, json!({"lines": 1, "total": 2}));
    // Sent again (a caller's retry): the same answer, and nothing added twice.
    let again = add(c, "cart-1", json!({"name": "tea", "qty": 2}), id("u-tea"))
        .await
        .unwrap();
    assert_eq!(again, tea);

    // Refused by the workflow's own check, and by the shape of its arguments.
    let e = add(c, "cart-1", json!({"name": "air", "qty": 0}), id("u-air"))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::FailedPrecondition), "UPDATE_REJECTED")
    );
    assert!(e.to_string().contains("quantity must be at least 1"), "{e}");
    let e = add(c, "cart-1", json!({"name": 5}), id("u-bad")).await.unwrap_err();
    assert_eq!(reason(&e), "UPDATE_REJECTED");
    assert!(e.to_string().contains("do not fit"), "{e}");

    let coffee = add(
        c,
        "cart-1",
        json!({"name": "coffee", "qty": 3}),
        UpdateOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(coffee, json!({"lines": 2, "total": 5}));
    let done = c.await_workflow("cart-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.status, WorkflowStatus::Success);
    assert_eq!(done.output, Some(json!({"lines": [["tea", 2], ["coffee", 3]]})));
    // One step per accepted update: the rejected ones ran nothing.
    let steps = c.steps("cart-1").await.unwrap();
    assert_eq!(steps.iter().filter(|s| s.name == "add-item").count(), 2, "{steps:?}");

    // Once it has ended: an answered update is still answered; a new one is refused.
    assert_eq!(add(c, "cart-1", json!({}), id("u-tea")).await.unwrap(), tea);
    let e = add(c, "cart-1", json!({"name": "late", "qty": 1}), id("u-late"))
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NOT_RUNNING");
}

async fn a_caller_learns_when_no_answer_comes(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    c.start_json("cart", json!({"items": 1}), StartOptions::id("cart-2"))
        .await
        .unwrap();
    // Nobody takes "remove": not answered within the (short) timeout, and the id says which
    // update to wait on again.
    let short = UpdateOptions {
        update_id: Some("u-remove".into()),
        timeout: Some(Duration::from_millis(300)),
    };
    let e = c
        .update_workflow::<_, Value>("cart-2", "remove", &json!({"name": "tea"}), short)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), reason(&e)),
        (Some(tonic::Code::DeadlineExceeded), "UPDATE_PENDING")
    );

    // A caller waiting when the workflow ends without answering is told so (woken by the end,
    // or finding it ended, whichever comes first).
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move {
            let long = UpdateOptions {
                update_id: Some("u-remove".into()),
                timeout: Some(PATIENCE),
            };
            c.update_workflow::<_, Value>("cart-2", "remove", &json!({"name": "tea"}), long)
                .await
        })
    };
    c.cancel("cart-2").await.unwrap();
    let e = waiting.await.unwrap().unwrap_err();
    assert_eq!(reason(&e), "UPDATE_NOT_ANSWERED", "{e}");

    // Update topics carry only updates: a plain send there is refused.
    let e = c
        .send_message("cart-2", "waymark.update/add", &json!(1), None)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e}");

    let e = c
        .update_workflow::<_, Value>("nobody", "add", &json!({}), UpdateOptions::default())
        .await
        .unwrap_err();
    assert_eq!(reason(&e), "WORKFLOW_NOT_FOUND");
    let zero = UpdateOptions {
        timeout: Some(Duration::ZERO),
        ..Default::default()
    };
    let e = c
        .update_workflow::<_, Value>("cart-2", "add", &json!({}), zero)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(tonic::Code::InvalidArgument), "{e}");
}

async fn a_worker_killed_inside_the_handler_loses_nothing(backend: Backend) {
    let Some(db) = TestDatabase::new(backend).await else {
        return;
    };
    let server = ServerProcess::start(&db, &fast_recovery_args()).await;
    let c = server.client().await;
    let log = db.dir.join("effects.log");
    let mut first = WorkerProcess::start(&server.addr, &log, 5, "first");
    waymark_integration_tests::wait_for_registration(&c, "cart").await;
    c.start_json(
        "cart",
        json!({"items": 1, "step_ms": 2000}),
        StartOptions::id("cart-crash"),
    )
    .await
    .unwrap();
    let caller = {
        let c = c.clone();
        tokio::spawn(async move {
            let wait = UpdateOptions {
                update_id: Some("u-crash".into()),
                timeout: Some(PATIENCE),
            };
            c.update_workflow::<_, Value>("cart-crash", "add", &json!({"name": "tea", "qty": 2}), wait)
                .await
        })
    };
    // The update is taken (its receive recorded); the handler's step is running: kill -9.
    wait_for("the update to be taken", PATIENCE, || async {
        let steps = c.steps("cart-crash").await.ok()?;
        steps.iter().any(|s| s.name == "waymark.recv").then_some(())
    })
    .await;
    first.kill();
    let _second = WorkerProcess::start(&server.addr, &log, 5, "second");
    let answer = caller.await.unwrap().unwrap();
    assert_eq!(answer, json!({"lines": 1, "total": 2}));
    let done = c.await_workflow("cart-crash", Some(PATIENCE)).await.unwrap();
    assert_eq!(done.output, Some(json!({"lines": [["tea", 2]]})));
    assert!(done.recovery_attempts >= 1, "it was recovered: {done:?}");
    // The handler's step is recorded once, and ran once under the epoch that recorded it.
    let steps = c.steps("cart-crash").await.unwrap();
    let recorded: Vec<_> = steps.iter().filter(|s| s.name == "add-item").collect();
    assert_eq!(recorded.len(), 1, "{steps:?}");
    let runs: Vec<_> = side_effects::read(&log)
        .into_iter()
        .filter(|e| e.workflow_id == "cart/cart-crash")
        .collect();
    let under_record = runs.iter().filter(|e| e.epoch == recorded[0].epoch).count();
    assert_eq!(under_record, 1, "{runs:?}");
    server.assert_log_clean(&[]);
}

on_both_stores!(
    updates_are_answered_by_the_workflow_once_each,
    a_caller_learns_when_no_answer_comes,
    a_worker_killed_inside_the_handler_loses_nothing,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_sends_updates() {
    let Some(s) = setup(Backend::Sqlite, &[]).await else {
        return;
    };
    s.client
        .start_json("cart", json!({"items": 1}), StartOptions::id("cart-cli"))
        .await
        .unwrap();
    let cli = |args: &[&str]| {
        let (code, out, err) = waymark_integration_tests::run_cli(&s.server.addr, args);
        (code, out.trim().to_string(), err)
    };
    let (code, _, err) = cli(&["workflow", "update", "cart-cli", "add", "--args", "{"]);
    assert!(code != 0 && err.contains("--args is not valid JSON"), "{code} {err}");
}
