//! What operators see, against real server and worker processes on both stores: Prometheus
//! metrics and the health endpoints, the workers connected, what a waiting workflow waits on,
//! queue statistics, list filters and counts, trace contexts taken from calls, and the access
//! log.

use std::time::Duration;

use opentelemetry::{
    trace::{FutureExt, SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState},
    Context,
};
use serde_json::json;
use waymark_integration_tests::{free_port, on_both_stores, setup, wait_for, Backend, ServerProcess, WorkerProcess};
use waymark_sdk::{ListOptions, StartOptions, WaitingOn, WorkflowStatus};

const PATIENCE: Duration = Duration::from_secs(60);

/// `GET path` on the metrics listener: (status code, body).
async fn http_get(port: u16, path: &str) -> (u16, String) {
    waymark_integration_tests::http_get(port, path).await.unwrap()
}

/// The value of the series `series` (name and labels, as printed) in a scrape.
fn value(scrape: &str, series: &str) -> Option<f64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok()))
}

async fn metrics_count_what_happened_and_health_answers(backend: Backend) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let Some(s) = setup(backend, &["--metrics-listen", &listen]).await else {
        return;
    };
    let c = &s.client;
    for i in 0..5 {
        c.start("echo", &json!({"n": i}), StartOptions::id(format!("m-{i}")))
            .await
            .unwrap();
    }
    for i in 0..5 {
        let w = c.await_workflow(&format!("m-{i}"), Some(PATIENCE)).await.unwrap();
        assert_eq!(w.status, WorkflowStatus::Success);
    }
    let (code, scrape) = http_get(port, "/metrics").await;
    assert_eq!(code, 200, "{scrape}");
    let echo = r#"namespace="default",workflow_name="echo",queue="default""#;
    assert_eq!(
        value(&scrape, &format!("waymark_workflows_started_total{{{echo}}}")),
        Some(5.0),
        "{scrape}"
    );
    assert_eq!(
        value(
            &scrape,
            r#"waymark_workflows_finished_total{namespace="default",workflow_name="echo",queue="default",status="SUCCESS"}"#
        ),
        Some(5.0),
        "{scrape}"
    );
    assert_eq!(
        value(&scrape, &format!("waymark_start_to_dispatch_seconds_count{{{echo}}}")),
        Some(5.0)
    );
    assert_eq!(
        value(&scrape, &format!("waymark_dispatch_to_finish_seconds_count{{{echo}}}")),
        Some(5.0)
    );
    let steps = value(&scrape, r#"waymark_steps_recorded_total{namespace="default"}"#).unwrap_or(0.0);
    assert!(steps >= 5.0, "every echo records a step: {steps}");
    assert_eq!(
        value(&scrape, r#"waymark_workers_connected{namespace="default"}"#),
        Some(1.0)
    );
    assert_eq!(
        value(&scrape, r#"waymark_store_reachable{namespace="default"}"#),
        Some(1.0)
    );
    // Five starts here, and the setup's own.
    let starts = r#"waymark_rpc_requests_total{method="waymark.v1.WorkflowService/StartWorkflow",code="Ok"}"#;
    assert!(value(&scrape, starts).is_some_and(|n| n >= 5.0), "{scrape}");
    // The worker stream's requests, by command: each echo completed (its step held back and
    // carried by the completion), answered Ok, and timed.
    let completions = r#"waymark_worker_commands_total{command="CompleteWorkflow",code="Ok"}"#;
    assert!(value(&scrape, completions).is_some_and(|n| n >= 5.0), "{scrape}");
    let timed = r#"waymark_worker_command_duration_seconds_count{command="CompleteWorkflow",code="Ok"}"#;
    assert_eq!(value(&scrape, timed), value(&scrape, completions), "{scrape}");
    assert!(scrape.trim_end().ends_with("# EOF"));

    // Queue depth: workflows on a queue nobody serves stay ENQUEUED (read at most every 5 s).
    c.create_queue("unserved", &Default::default()).await.unwrap();
    for i in 0..3 {
        let o = StartOptions {
            queue: Some("unserved".into()),
            ..StartOptions::id(format!("u-{i}"))
        };
        c.start("echo", &json!(null), o).await.unwrap();
    }
    wait_for("the queue depth to show the unserved queue", PATIENCE, || async {
        let (_, scrape) = http_get(port, "/metrics").await;
        let depth = r#"waymark_queue_depth{namespace="default",queue="unserved",status="ENQUEUED"}"#;
        (value(&scrape, depth) == Some(3.0)).then_some(())
    })
    .await;
    // The same counts through the API.
    let q = c.get_queue("unserved").await.unwrap();
    assert_eq!((q.stats.enqueued, q.stats.pending, q.stats.delayed), (3, 0, 0));
    assert!(q.stats.oldest_enqueued_age_ms.is_some_and(|ms| ms >= 0), "{q:?}");
    let listed = c.list_queues().await.unwrap();
    let default = listed.iter().find(|q| q.name == "default").unwrap();
    assert_eq!(default.stats.enqueued, 0, "{default:?}");

    assert_eq!(http_get(port, "/healthz").await.0, 200);
    assert_eq!(http_get(port, "/readyz").await, (200, "ready\n".to_string()));
    let health = |addr: String| {
        let out = std::process::Command::new(waymark_integration_tests::waymark_bin())
            .args(["health", "--ready", "--metrics-listen", &addr, "--timeout", "10s"])
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).to_string())
    };
    assert_eq!(health(format!("0.0.0.0:{port}")), (Some(0), "ready\n".to_string()));
    let nobody = waymark_integration_tests::free_port();
    let (code, said) = health(format!("127.0.0.1:{nobody}"));
    assert_eq!(code, Some(1), "{said}");
    assert!(said.contains("no answer"), "{said}");
    // Connections that say nothing hold the listener's places (32) for a few seconds at most:
    // a scrape behind forty of them is still answered.
    let mut silent = Vec::new();
    for _ in 0..40 {
        silent.push(tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    let answered = tokio::time::timeout(PATIENCE, http_get(port, "/healthz")).await;
    assert_eq!(
        answered.map(|r| r.0).ok(),
        Some(200),
        "a scrape behind silent connections"
    );
    drop(silent);
    assert_eq!(http_get(port, "/elsewhere").await.0, 404);
}

async fn workers_are_listed_with_what_they_declared(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let effects = s.db.dir.join("effects.log");
    let special = WorkerProcess::start_with_env(
        &s.server.addr,
        &effects,
        7,
        "special",
        &[("WAYMARK_QUEUES", "special"), ("WAYMARK_APP_VERSION", "v-special")],
    );
    special.wait_connected().await;
    let all = wait_for("both workers to be listed", PATIENCE, || async {
        let all = s.client.list_workers(None).await.unwrap();
        (all.len() == 2).then_some(all)
    })
    .await;
    for w in &all {
        assert!(w.sdk.starts_with("rust/"), "{w:?}");
        assert!(w.workflow_names.iter().any(|n| n == "counted"), "{w:?}");
        assert_eq!(w.namespace, "default");
        assert!(
            w.connected_at_ms > 0 && w.last_heartbeat_ms >= w.connected_at_ms,
            "{w:?}"
        );
    }
    let only = s.client.list_workers(Some("special")).await.unwrap();
    assert_eq!(only.len(), 1, "{only:?}");
    assert_eq!(
        (only[0].app_version.as_str(), only[0].queues.as_slice()),
        ("v-special", &["special".to_string()][..])
    );
    assert_eq!(only[0].workflow_credits, 7, "its capacity, nothing dispatched");

    if backend == Backend::Postgres {
        // Another replica lists the workers connected through this one, with their declared
        // names and the load of their last heartbeat.
        let other = ServerProcess::start(&s.db, &[]).await;
        let seen = other.client().await.list_workers(Some("special")).await.unwrap();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert_eq!(seen[0].worker_id, only[0].worker_id);
        assert_eq!(seen[0].workflow_names, only[0].workflow_names);
    }
}

async fn a_waiting_workflow_says_what_it_waits_on(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    // Waiting on its worker for a message (the replica holds the wait).
    c.start(
        "inbox",
        &json!({"topic": "orders", "timeout_ms": 600_000, "count": 1}),
        StartOptions::id("w-recv"),
    )
    .await
    .unwrap();
    let w = wait_for("w-recv to wait", PATIENCE, || async {
        let w = c.get("w-recv").await.unwrap();
        w.waiting_on.is_some().then_some(w)
    })
    .await;
    match w.waiting_on.unwrap() {
        WaitingOn::Message { topic, until_ms } => {
            assert_eq!(topic, "orders");
            assert!(until_ms > w.created_at_ms, "its timeout");
        }
        other => panic!("{other:?}"),
    }
    // A remote step nobody serves yet.
    c.start(
        "caller",
        &json!({"step": "double", "input": {"n": 2}}),
        StartOptions::id("w-call"),
    )
    .await
    .unwrap();
    // (The wait is registered a moment before the call's row is written.)
    let waiting = wait_for("w-call to wait", PATIENCE, || async {
        let w = c.get("w-call").await.unwrap().waiting_on;
        w.filter(|w| matches!(w, WaitingOn::RemoteStep { step_name, .. } if !step_name.is_empty()))
    })
    .await;
    assert!(
        matches!(&waiting, WaitingOn::RemoteStep { step_name, step_id: 0, attempt: 0, .. } if step_name == "double"),
        "{waiting:?}"
    );
    // A delayed start waits for its time, from its row.
    let later = StartOptions {
        delay: Some(Duration::from_secs(3600)),
        ..StartOptions::id("w-later")
    };
    c.start("echo", &json!(null), later).await.unwrap();
    let w = c.get("w-later").await.unwrap();
    assert!(
        matches!(w.waiting_on, Some(WaitingOn::Timer { until_ms }) if until_ms == w.wake_at_ms),
        "{w:?}"
    );
    // Parked (DELAYED): said from the row, on whatever replica answers.
    let effects = s.db.dir.join("effects.log");
    let parker = WorkerProcess::start_with_env(
        &s.server.addr,
        &effects,
        5,
        "parker",
        &[("WAYMARK_QUEUES", "parking"), ("WAYMARK_PARK_AFTER_MS", "100")],
    );
    parker.wait_connected().await;
    let o = StartOptions {
        queue: Some("parking".into()),
        ..StartOptions::id("w-parked")
    };
    c.start("inbox", &json!({"topic": "late", "timeout_ms": 600_000, "count": 1}), o)
        .await
        .unwrap();
    let w = wait_for("w-parked to park", PATIENCE, || async {
        let w = c.get("w-parked").await.unwrap();
        (w.status == WorkflowStatus::Delayed).then_some(w)
    })
    .await;
    assert!(
        matches!(&w.waiting_on, Some(WaitingOn::Message { topic, .. }) if topic == "late"),
        "{w:?}"
    );
    // Finished workflows wait on nothing.
    c.send_message("w-recv", "orders", &json!("one"), None).await.unwrap();
    let done = c.await_workflow("w-recv", Some(PATIENCE)).await.unwrap();
    assert_eq!((done.status, done.waiting_on), (WorkflowStatus::Success, None));
}

async fn lists_filter_by_worker_version_and_parent_and_count(backend: Backend) {
    let Some(s) = setup(backend, &[]).await else { return };
    let c = &s.client;
    c.start(
        "family",
        &json!({"children": [["echo", 1], ["echo", 2]]}),
        StartOptions::id("parent"),
    )
    .await
    .unwrap();
    c.await_workflow("parent", Some(PATIENCE)).await.unwrap();
    let children = c
        .list_page(ListOptions {
            parent_workflow_id: Some("parent".into()),
            include_total: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(children.total, Some(2));
    assert_eq!(children.workflows.len(), 2);
    assert!(children.workflows.iter().all(|w| w.parent_workflow_id == "parent"));
    let parent = c.get("parent").await.unwrap();
    let all = c
        .list_page(ListOptions {
            page_size: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    let ran_there = all.workflows.iter().filter(|w| w.worker_id == parent.worker_id).count() as u64;
    assert!(ran_there >= 3, "the parent and its two children ran on the one worker");
    let by_worker = c
        .list_page(ListOptions {
            worker_id: Some(parent.worker_id.clone()),
            app_version: Some("test-1".into()),
            include_total: true,
            page_size: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_worker.total, Some(ran_there));
    assert_eq!(by_worker.workflows.len(), 1);
    let none = c
        .list_page(ListOptions {
            app_version: Some("no-such-version".into()),
            include_total: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!((none.total, none.workflows.len()), (Some(0), 0));
    // The count is not repeated on later pages.
    let next = c
        .list_page(ListOptions {
            include_total: true,
            page_size: 1,
            page_token: by_worker.next_page_token.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(next.total, None);
}

fn remote_parent(trace: &str, span: &str) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_hex(trace).unwrap(),
        SpanId::from_hex(span).unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

async fn a_callers_trace_context_is_kept_and_its_calls_are_logged(backend: Backend) {
    let Some(s) = setup(backend, &["--access-log", "all"]).await else {
        return;
    };
    let c = &s.client;
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    c.start("echo", &json!(1), StartOptions::id("traced"))
        .with_context(remote_parent(trace, "00f067aa0ba902b7"))
        .await
        .unwrap();
    let w = c.get("traced").await.unwrap();
    // Not exporting spans itself, the server keeps the caller's context as it came.
    assert_eq!(w.traceparent, format!("00-{trace}-00f067aa0ba902b7-01"));
    c.start("echo", &json!(2), StartOptions::id("untraced")).await.unwrap();
    assert_eq!(c.get("untraced").await.unwrap().traceparent, "");

    // A malformed traceparent is dropped, never refused.
    let channel = tonic::transport::Channel::from_shared(s.server.addr.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut raw = waymark_sdk::proto::workflow_service_client::WorkflowServiceClient::new(channel);
    let mut req = tonic::Request::new(waymark_sdk::proto::StartWorkflowRequest {
        workflow_name: "echo".into(),
        workflow_id: "badly-traced".into(),
        input: Some(waymark_sdk::proto::Payload {
            content: Some(waymark_sdk::proto::payload::Content::Json(prost_types::Value {
                kind: Some(prost_types::value::Kind::NumberValue(3.0)),
            })),
            ..Default::default()
        }),
        ..Default::default()
    });
    req.metadata_mut()
        .insert("traceparent", "00-not-a-trace-01".parse().unwrap());
    raw.start_workflow(req)
        .await
        .expect("a bad traceparent does not fail the call");
    assert_eq!(c.get("badly-traced").await.unwrap().traceparent, "");

    // The access log line of the traced start carries its trace id and workflow id.
    let log = wait_for("the access log line", PATIENCE, || async {
        let log = std::fs::read_to_string(&s.server.log).unwrap_or_default();
        log.lines()
            .find(|l| l.contains("call answered") && l.contains("StartWorkflow") && l.contains(trace))
            .map(str::to_string)
    })
    .await;
    assert!(log.contains(r#"waymark.workflow.id="traced""#), "{log}");
    assert!(log.contains("status=Ok"), "{log}");
}

/// A database that lacks a migration this build needs (restored from an older backup, or
/// migrated by an older build) makes the replica not ready and its gRPC services NOT_SERVING,
/// until the migration is there again.
async fn a_database_missing_a_migration_is_not_ready(backend: Backend) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    // The schema is checked every tenth ping: every second here, not every ten.
    let Some(s) = setup(backend, &["--metrics-listen", &listen, "--health-interval", "100ms"]).await else {
        return;
    };
    assert_eq!(http_get(port, "/readyz").await.0, 200);
    let forget = "DELETE FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)";
    let restore = "INSERT INTO _sqlx_migrations SELECT * FROM kept";
    let keep = "CREATE TABLE kept AS SELECT * FROM _sqlx_migrations WHERE version = (SELECT MAX(version) FROM _sqlx_migrations)";
    let run = |sql: &'static str| {
        let url = s.db.url.clone();
        async move {
            if url.starts_with("sqlite:") {
                let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.unwrap();
            } else {
                let pool = sqlx::PgPool::connect(&url).await.unwrap();
                sqlx::query(sql).execute(&pool).await.unwrap();
            }
        }
    };
    run(keep).await;
    run(forget).await;
    let why = wait_for("the replica to be not ready", PATIENCE, || async {
        let (code, body) = http_get(port, "/readyz").await;
        (code == 503).then_some(body)
    })
    .await;
    assert!(why.contains("lacks 1 migration"), "{why}");
    let mut health = tonic_health::pb::health_client::HealthClient::new(
        tonic::transport::Channel::from_shared(s.server.addr.clone())
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    for service in ["", "waymark.v1.WorkflowService", "waymark.v1.WorkerService"] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::NotServing as i32,
            "{service:?}"
        );
    }
    run(restore).await;
    wait_for("the replica to be ready again", PATIENCE, || async {
        (http_get(port, "/readyz").await.0 == 200).then_some(())
    })
    .await;
}

/// By default only a call answered with an error leaves an access line; `--access-log off`
/// (or its older spelling `false`) leaves none.
async fn the_access_log_has_the_errors_by_default_and_can_be_turned_off(backend: Backend) {
    let modes: [(&[&str], bool); 3] = [
        (&[], true),
        (&["--access-log", "off"], false),
        (&["--access-log", "false"], false),
    ];
    for (extra, errors_logged) in modes {
        let Some(s) = setup(backend, extra).await else {
            return;
        };
        let e = s.client.get("nobody-started-this").await.unwrap_err();
        assert_eq!(e.reason(), Some("WORKFLOW_NOT_FOUND"));
        s.client
            .start("echo", &json!(1), StartOptions::id("quiet"))
            .await
            .unwrap();
        s.client.await_workflow("quiet", Some(PATIENCE)).await.unwrap();
        // Lines are written in the order calls are answered, a call's access line before its
        // audit line: once the start's audit line is there, every line before it is too.
        wait_for("the start's audit line", PATIENCE, || async {
            let log = std::fs::read_to_string(&s.server.log).unwrap_or_default();
            log.lines()
                .any(|l| l.contains("call audited") && l.contains("StartWorkflow") && l.contains("quiet"))
                .then_some(())
        })
        .await;
        let log = std::fs::read_to_string(&s.server.log).unwrap();
        let answered: Vec<_> = log.lines().filter(|l| l.contains("call answered")).collect();
        assert!(
            answered.iter().all(|l| !l.contains("status=Ok")),
            "{extra:?}: a call answered OK left a line: {answered:?}"
        );
        if errors_logged {
            let line = answered
                .iter()
                .find(|l| l.contains("GetWorkflow"))
                .unwrap_or_else(|| panic!("no access line for the call answered NOT_FOUND: {log}"));
            assert!(line.contains("status=NotFound"), "{line}");
        } else {
            assert!(answered.is_empty(), "{extra:?}: {answered:?}");
        }
    }
}

on_both_stores!(
    a_database_missing_a_migration_is_not_ready,
    the_access_log_has_the_errors_by_default_and_can_be_turned_off,
    metrics_count_what_happened_and_health_answers,
    workers_are_listed_with_what_they_declared,
    a_waiting_workflow_says_what_it_waits_on,
    lists_filter_by_worker_version_and_parent_and_count,
    a_callers_trace_context_is_kept_and_its_calls_are_logged,
);
