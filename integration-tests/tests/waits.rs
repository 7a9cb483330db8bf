//! Durable waits with real processes, on SQLite and PostgreSQL: messages (pushed wakeups,
//! timeouts, idempotent sends, workflow-to-workflow sends) and durable sleep, including a worker
//! killed mid-wait.

use std::time::Duration;

use waymark_integration_tests::{setup, wait_for, Backend, WorkerProcess};
use waymark_sdk::{Client, Error, StartOptions, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(120);

/// Waits until the workflow has recorded `n` steps (e.g. its recv deadline: it is waiting).
async fn recorded(client: &Client, id: &str, n: usize) -> Vec<waymark_sdk::StepInfo> {
    wait_for(&format!("{id} to record {n} steps"), PATIENCE, || async {
        client.steps(id).await.ok().filter(|s| s.len() >= n)
    })
    .await
}

async fn a_send_wakes_the_waiting_recv(backend: Backend) {
    // Polling is set to an hour: only the pushed wakeup can deliver in time.
    let Some(s) = setup(backend, &["--dispatch-poll-interval", "1h"]).await else {
        return;
    };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"topic": "orders", "timeout_ms": 60_000}),
            StartOptions::id("in"),
        )
        .await
        .unwrap();
    recorded(&s.client, "in", 1).await;
    let (id, duplicate) = s
        .client
        .send_message("in", "orders", &serde_json::json!({"sku": 7}), None)
        .await
        .unwrap();
    assert!(!duplicate);
    let w = s
        .client
        .await_workflow("in", Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": [{"sku": 7}]})));
    let messages = s.client.messages("in").await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        (
            messages[0].message_id.as_str(),
            messages[0].consumed,
            messages[0].consumed_by_step
        ),
        (id.as_str(), true, 1)
    );
}

// conformance: recv_timeout
async fn recv_times_out_with_nothing(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"timeout_ms": 200}),
            StartOptions::id("quiet"),
        )
        .await
        .unwrap();
    let w = s.client.await_workflow("quiet", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": [null]})));
    // A message on another topic is not taken.
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"topic": "a", "timeout_ms": 300}),
            StartOptions::id("topical"),
        )
        .await
        .unwrap();
    s.client.send_message("topical", "b", &1, None).await.unwrap();
    let w = s.client.await_workflow("topical", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": [null]})));
}

async fn retried_sends_deliver_once(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"timeout_ms": 1500, "count": 2}),
            StartOptions::id("twice"),
        )
        .await
        .unwrap();
    let (first, d1) = s
        .client
        .send_message("twice", "", &"hello", Some("key-1"))
        .await
        .unwrap();
    let (second, d2) = s
        .client
        .send_message("twice", "", &"hello", Some("key-1"))
        .await
        .unwrap();
    assert_eq!((first == second, d1, d2), (true, false, true));
    let w = s.client.await_workflow("twice", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": ["hello", null]})));
    let e = s.client.send_message("nobody", "", &1, None).await.unwrap_err();
    assert!(
        matches!(&e, Error::Rpc { code: tonic::Code::NotFound, reason, .. } if reason == "WORKFLOW_NOT_FOUND"),
        "{e:?}"
    );
    let e = s
        .client
        .send_message("twice", &"t".repeat(300), &1, None)
        .await
        .unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Rpc {
                code: tonic::Code::InvalidArgument,
                ..
            }
        ),
        "{e:?}"
    );
}

async fn workflows_message_each_other(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"topic": "t", "timeout_ms": 60_000}),
            StartOptions::id("listener"),
        )
        .await
        .unwrap();
    s.client
        .start_json(
            "courier",
            serde_json::json!({"to": "listener", "topic": "t", "message": [1, 2]}),
            StartOptions::id("sender"),
        )
        .await
        .unwrap();
    let sent = s.client.await_workflow("sender", Some(PATIENCE)).await.unwrap();
    assert_eq!(sent.status, WorkflowStatus::Success);
    let got = s.client.await_workflow("listener", Some(PATIENCE)).await.unwrap();
    assert_eq!(got.output, Some(serde_json::json!({"received": [[1, 2]]})));
    assert_eq!(
        s.client.messages("listener").await.unwrap()[0].message_id,
        sent.output.unwrap().as_str().unwrap()
    );
}

async fn worker_killed_during_recv_keeps_deadline_and_message(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"timeout_ms": 60_000}),
            StartOptions::id("mid"),
        )
        .await
        .unwrap();
    let before = recorded(&s.client, "mid", 1).await;
    s.worker.kill();
    let _successor = WorkerProcess::start(&s.server.addr, &s.db.dir.join("effects.log"), 20, "successor");
    // Sent while the workflow is between workers: it must wait for the replay, not be lost.
    s.client.send_message("mid", "", &"late", None).await.unwrap();
    let w = s.client.await_workflow("mid", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": ["late"]})));
    assert!(w.recovery_attempts >= 1);
    let steps = s.client.steps("mid").await.unwrap();
    assert_eq!(steps[0], before[0], "the deadline was recorded once and kept");
    assert_eq!(
        s.client
            .messages("mid")
            .await
            .unwrap()
            .iter()
            .filter(|m| m.consumed)
            .count(),
        1
    );
}

async fn recovered_recv_times_out_at_its_original_deadline(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "inbox",
            serde_json::json!({"timeout_ms": 2_000}),
            StartOptions::id("deadline"),
        )
        .await
        .unwrap();
    let before = recorded(&s.client, "deadline", 1).await;
    s.worker.kill();
    let _successor = WorkerProcess::start(&s.server.addr, &s.db.dir.join("effects.log"), 20, "successor");
    let w = s.client.await_workflow("deadline", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"received": [null]})));
    let steps = s.client.steps("deadline").await.unwrap();
    assert_eq!(steps[0], before[0]);
    let deadline = steps[0].output.as_ref().unwrap()["deadline_ms"].as_i64().unwrap();
    assert!(
        steps[1].recorded_at_ms >= deadline,
        "the timeout is recorded at the original deadline, not before"
    );
    assert!(steps[1].epoch > steps[0].epoch, "recorded by the successor");
}

// conformance: sleep
async fn durable_sleep_survives_a_kill_and_sleeps_only_the_rest(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    const NAP_MS: i64 = 10_000;
    s.client
        .start_json("napper", serde_json::json!({"ms": NAP_MS}), StartOptions::id("nap"))
        .await
        .unwrap();
    let sleep = recorded(&s.client, "nap", 1).await.remove(0);
    let wake_at = sleep.output.as_ref().unwrap()["wake_at_ms"].as_i64().unwrap();
    // Kill it well into the nap: a replay that restarted the sleep would wake ~6 s late.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    wait_for("six seconds of the nap to pass", PATIENCE, || async {
        (now() >= wake_at - 4_000).then_some(())
    })
    .await;
    s.worker.kill();
    let _successor = WorkerProcess::start(&s.server.addr, &s.db.dir.join("effects.log"), 20, "successor");
    let w = s.client.await_workflow("nap", Some(PATIENCE)).await.unwrap();
    let woke = w.output.unwrap().as_i64().unwrap();
    assert!(woke >= wake_at, "never wakes early");
    assert!(
        woke < wake_at + 4_000,
        "slept only the remainder: woke {} ms after the recorded wake time",
        woke - wake_at
    );
    assert!(w.recovery_attempts >= 1);
    assert_eq!(
        s.client.steps("nap").await.unwrap()[0],
        sleep,
        "the wake time was recorded once"
    );
}

// conformance: events
async fn events_are_read_by_clients_and_workflows(backend: Backend) {
    // Polling is set to an hour: only pushed wakeups can deliver in time.
    let Some(s) = setup(backend, &["--dispatch-poll-interval", "1h"]).await else {
        return;
    };
    let announce =
        serde_json::json!({"key": "status", "values": ["waiting", "approved"], "gate_ms": 60_000, "linger_ms": 60_000});
    s.client
        .start_json("announcer", announce, StartOptions::id("ann"))
        .await
        .unwrap();
    assert_eq!(
        s.client.get_event("ann", "status", None).await.unwrap(),
        None,
        "not set yet"
    );
    // A client and a workflow wait for it; the set wakes both.
    let client_wait = {
        let c = s.client.clone();
        tokio::spawn(async move { c.get_event("ann", "status", Some(Duration::from_secs(30))).await })
    };
    let watch = serde_json::json!({"target": "ann", "key": "status", "timeout_ms": 60_000});
    s.client
        .start_json("watcher", watch, StartOptions::id("reader"))
        .await
        .unwrap();
    recorded(&s.client, "reader", 1).await;
    s.client.send_message("ann", "go", &true, None).await.unwrap();
    let seen = client_wait.await.unwrap().unwrap().expect("set within the wait");
    assert!(seen == "waiting" || seen == "approved", "{seen}");
    let read = s
        .client
        .await_workflow("reader", Some(Duration::from_secs(30)))
        .await
        .unwrap()
        .output
        .unwrap()["value"]
        .clone();
    assert!(read == "waiting" || read == "approved", "{read}");
    let value = wait_for("the last value", PATIENCE, || async {
        s.client
            .get_event("ann", "status", None)
            .await
            .ok()
            .flatten()
            .filter(|v| v == "approved")
    })
    .await;
    assert_eq!(value, "approved");
    let events = s.client.events("ann").await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].history.iter().map(|h| h.0.clone()).collect::<Vec<_>>(),
        ["waiting", "approved"]
    );
    // A key never set: not found after the wait. Bad input and unknown workflows are refused.
    assert_eq!(
        s.client
            .get_event("ann", "nothing", Some(Duration::from_millis(200)))
            .await
            .unwrap(),
        None
    );
    let e = s.client.get_event("ann", "", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Rpc {
                code: tonic::Code::InvalidArgument,
                ..
            }
        ),
        "{e:?}"
    );
    let e = s.client.get_event("nobody", "status", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::Rpc {
                code: tonic::Code::NotFound,
                ..
            }
        ),
        "{e:?}"
    );
    // A workflow reading an event of a workflow that does not exist fails, visibly.
    let lost = serde_json::json!({"target": "nobody", "key": "status", "timeout_ms": 60_000});
    s.client
        .start_json("watcher", lost, StartOptions::id("lost"))
        .await
        .unwrap();
    let w = s.client.await_workflow("lost", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (w.status, w.failure.unwrap().kind.as_str()),
        (WorkflowStatus::Error, "WORKFLOW_NOT_FOUND")
    );
    s.client.send_message("ann", "done", &true, None).await.unwrap();
    assert_eq!(
        s.client.await_workflow("ann", Some(PATIENCE)).await.unwrap().output,
        Some(serde_json::json!(2))
    );
}

async fn workflow_event_read_times_out_and_is_recorded(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    s.client
        .start_json(
            "announcer",
            serde_json::json!({"key": "k", "values": [], "gate_ms": 0, "linger_ms": 60_000}),
            StartOptions::id("quiet"),
        )
        .await
        .unwrap();
    s.client
        .start_json(
            "watcher",
            serde_json::json!({"target": "quiet", "key": "k", "timeout_ms": 300}),
            StartOptions::id("reader"),
        )
        .await
        .unwrap();
    let w = s.client.await_workflow("reader", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!({"value": null})));
    let names: Vec<String> = s
        .client
        .steps("reader")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["waymark.get_event.deadline", "waymark.get_event"]);
    s.client.send_message("quiet", "done", &true, None).await.unwrap();
}

// conformance: streams
async fn streams_are_followed_live(backend: Backend) {
    use futures::StreamExt;
    let Some(s) = setup(backend, &["--dispatch-poll-interval", "1h"]).await else {
        return;
    };
    let input = serde_json::json!({"key": "log", "values": ["a", {"b": 2}, 3], "gate_ms": 60_000});
    s.client
        .start_json("streamer", input, StartOptions::id("st"))
        .await
        .unwrap();
    // A reader following from the start, before anything is written.
    let reader = {
        let c = s.client.clone();
        tokio::spawn(async move {
            let items: Vec<_> = c.read_stream("st", "log", 0).await.unwrap().collect().await;
            items.into_iter().map(|i| i.unwrap()).collect::<Vec<_>>()
        })
    };
    for _ in 0..3 {
        let before = s.client.steps("st").await.unwrap().len();
        s.client.send_message("st", "go", &true, None).await.unwrap();
        recorded(&s.client, "st", before + 3).await;
    }
    let got = reader.await.unwrap();
    assert_eq!(
        got,
        [
            (0, serde_json::json!("a")),
            (1, serde_json::json!({"b": 2})),
            (2, serde_json::json!(3))
        ]
    );
    s.client.await_workflow("st", Some(PATIENCE)).await.unwrap();
    // From an offset, after the fact.
    let tail: Vec<_> = s.client.read_stream("st", "log", 2).await.unwrap().collect().await;
    assert_eq!(
        tail.into_iter().map(|i| i.unwrap().1).collect::<Vec<_>>(),
        [serde_json::json!(3)]
    );
    // A stream never closed ends when its workflow finishes.
    let open = serde_json::json!({"key": "k", "values": [1], "close": false});
    s.client
        .start_json("streamer", open, StartOptions::id("open"))
        .await
        .unwrap();
    let items: Vec<_> = s.client.read_stream("open", "k", 0).await.unwrap().collect().await;
    assert_eq!(
        items.into_iter().map(|i| i.unwrap().1).collect::<Vec<_>>(),
        [serde_json::json!(1)]
    );
    // Unknown workflows are not found.
    match s.client.read_stream("nobody", "k", 0).await {
        Err(Error::Rpc {
            code: tonic::Code::NotFound,
            ..
        }) => {}
        Err(other) => panic!("expected NOT_FOUND, got {other:?}"),
        Ok(_) => panic!("expected NOT_FOUND, got a stream"),
    }
}

// conformance: child_workflows
async fn parents_start_and_await_children(backend: Backend) {
    let Some(s) = setup(backend, &["--dispatch-poll-interval", "1h"]).await else {
        return;
    };
    let input = serde_json::json!({"children": [
        ["counted", {"steps": 3}],
        ["echo", {"hi": 1}],
        ["flaky", {"fail_times": 5, "max_attempts": 1}],
    ]});
    s.client
        .start_json("family", input, StartOptions::id("fam"))
        .await
        .unwrap();
    let w = s
        .client
        .await_workflow("fam", Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert_eq!(
        w.output,
        Some(serde_json::json!([3, {"hi": 1}, {"error": "ChildFailed"}]))
    );
    let child = s.client.get("fam/child-0").await.unwrap();
    assert_eq!(
        (child.parent_workflow_id.as_str(), child.status),
        ("fam", WorkflowStatus::Success)
    );
    let names: Vec<String> = s
        .client
        .steps("fam")
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "waymark.start_child").count(), 3);
    assert_eq!(names.iter().filter(|n| *n == "waymark.await_child").count(), 3);
}

async fn a_replaying_parent_rejoins_its_child(backend: Backend) {
    let Some(mut s) = setup(backend, &[]).await else { return };
    // The child waits for a message, so it is in flight when the parent's worker dies.
    let input = serde_json::json!({"children": [["inbox", {"timeout_ms": 60_000}]]});
    s.client
        .start_json("family", input, StartOptions::id("kin"))
        .await
        .unwrap();
    recorded(&s.client, "kin/child-0", 1).await;
    s.worker.kill();
    let _successor = WorkerProcess::start(&s.server.addr, &s.db.dir.join("effects.log"), 20, "successor");
    wait_for("the parent to be recovered", PATIENCE, || async {
        s.client
            .get("kin")
            .await
            .ok()
            .filter(|w| w.recovery_attempts >= 1 && w.status == WorkflowStatus::Pending)
    })
    .await;
    s.client.send_message("kin/child-0", "", &"hello", None).await.unwrap();
    let w = s.client.await_workflow("kin", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.output, Some(serde_json::json!([{"received": ["hello"]}])));
    let (children, _) = s
        .client
        .list(waymark_sdk::ListOptions {
            workflow_name: Some("inbox".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(children.len(), 1, "one child, re-joined: {children:?}");
}

async fn cancelling_a_parent_cascades(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let input = serde_json::json!({"children": [["family", {"children": [["inbox", {"timeout_ms": 60_000}]]}]]});
    s.client
        .start_json("family", input, StartOptions::id("top"))
        .await
        .unwrap();
    recorded(&s.client, "top/child-0/child-0", 1).await;
    let top = s.client.cancel_with("top", true).await.unwrap();
    assert_eq!(top.status, WorkflowStatus::Cancelled);
    for id in ["top/child-0", "top/child-0/child-0"] {
        assert_eq!(
            s.client.get(id).await.unwrap().status,
            WorkflowStatus::Cancelled,
            "{id}"
        );
    }
}

async fn a_workflow_past_its_timeout_is_cancelled_with_its_children(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let input = serde_json::json!({"children": [["inbox", {"timeout_ms": 60_000}]]});
    let options = StartOptions {
        workflow_id: Some("timed".into()),
        timeout: Some(Duration::from_millis(1500)),
        ..Default::default()
    };
    let started = s.client.start_json("family", input, options).await.unwrap();
    assert!(started.workflow.deadline_ms > 0);
    let w = s.client.await_workflow("timed", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Cancelled);
    let child = s.client.await_workflow("timed/child-0", Some(PATIENCE)).await.unwrap();
    assert_eq!(
        (child.status, child.deadline_ms),
        (WorkflowStatus::Cancelled, w.deadline_ms)
    );
    // Absurd timeouts are refused.
    let e = s
        .client
        .start_json(
            "echo",
            serde_json::json!(1),
            StartOptions {
                timeout: Some(Duration::from_secs(20 * 366 * 86400)),
                ..Default::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Rpc {
                code: tonic::Code::InvalidArgument,
                ..
            }
        ),
        "{e:?}"
    );
}

waymark_integration_tests::on_both_stores!(
    a_send_wakes_the_waiting_recv,
    recv_times_out_with_nothing,
    retried_sends_deliver_once,
    workflows_message_each_other,
    worker_killed_during_recv_keeps_deadline_and_message,
    recovered_recv_times_out_at_its_original_deadline,
    durable_sleep_survives_a_kill_and_sleeps_only_the_rest,
    events_are_read_by_clients_and_workflows,
    workflow_event_read_times_out_and_is_recorded,
    streams_are_followed_live,
    parents_start_and_await_children,
    a_replaying_parent_rejoins_its_child,
    cancelling_a_parent_cascades,
    a_workflow_past_its_timeout_is_cancelled_with_its_children,
);
