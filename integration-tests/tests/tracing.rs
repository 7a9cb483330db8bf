//! One trace across processes and languages: a client (this test, with OpenTelemetry's SDK)
//! starts the polyglot example's Python workflow `combine`, which calls a TypeScript and a Go
//! remote step; the server and every worker export their spans over OTLP to a receiver in this
//! test. The spans must share the client's trace id and hang from each other as
//! `contract/tracing.md` says — also after the Python worker is killed -9 mid-workflow and
//! another replays it.

use std::process::Command;

use opentelemetry::{
    trace::{FutureExt, TraceContextExt, Tracer, TracerProvider as _},
    Context,
};
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::{
    trace::{SdkTracer, SdkTracerProvider},
    Resource,
};
use serde_json::json;
use waymark_integration_tests::{
    otlp::{OtlpReceiver, ReceivedSpan},
    polyglot::{
        build_programs, example_dir, logs, missing_dependency, python, start_when_registered, Program, PATIENCE,
    },
    skip_or_fail, wait_for, Backend, ServerProcess, TestDatabase,
};
use waymark_sdk::{Client, WaitingOn, WorkflowStatus};

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const CONSUMER: i32 = 5;

const COMPLETE: &str = "waymark.v1.WorkerService/CompleteWorkflow";
const STEP_RESULT: &str = "waymark.v1.WorkerService/StepResult";

/// The server's spans for a worker's messages about workflow `id`: children of the start's
/// span (the context the dispatch carried), each with the store calls it made below it.
fn check_worker_messages(spans: &[ReceivedSpan], trace: &str, id: &str, start: &ReceivedSpan) {
    let complete = one(spans, trace, COMPLETE);
    assert_eq!((complete.service.as_str(), complete.kind), ("waymark", SERVER));
    assert_eq!(
        complete.parent_span_id, start.span_id,
        "the completion joins the workflow's trace"
    );
    assert_eq!(complete.attr("waymark.workflow.id"), Some(id));
    assert!(
        spans
            .iter()
            .any(|s| s.name.starts_with("store.") && s.parent_span_id == complete.span_id),
        "the completion's store calls are exported below it"
    );
    let calls = find(spans, trace, "waymark.v1.WorkerService/CallStep");
    assert!(!calls.is_empty(), "the remote step calls have server spans");
    assert!(calls.iter().all(|c| c.parent_span_id == start.span_id));
}

fn find<'a>(spans: &'a [ReceivedSpan], trace: &str, name: &str) -> Vec<&'a ReceivedSpan> {
    spans.iter().filter(|s| s.trace_id == trace && s.name == name).collect()
}

fn has_start(spans: &[ReceivedSpan], trace: &str, id: &str) -> bool {
    find(spans, trace, "waymark.v1.WorkflowService/StartWorkflow")
        .iter()
        .any(|s| s.attr("waymark.workflow.id") == Some(id))
}

/// The server's span of the start that made workflow `id` (a start refused while no worker had
/// registered the name yet is a span of its own, without the workflow's attributes).
fn start_of<'a>(spans: &'a [ReceivedSpan], trace: &str, id: &str) -> &'a ReceivedSpan {
    let starts: Vec<&ReceivedSpan> = find(spans, trace, "waymark.v1.WorkflowService/StartWorkflow")
        .into_iter()
        .filter(|s| s.attr("waymark.workflow.id") == Some(id))
        .collect();
    match starts.as_slice() {
        [s] => s,
        other => panic!("expected one start of {id} in trace {trace}: {other:#?}"),
    }
}

fn one<'a>(spans: &'a [ReceivedSpan], trace: &str, name: &str) -> &'a ReceivedSpan {
    match find(spans, trace, name).as_slice() {
        [s] => s,
        other => panic!(
            "expected one {name:?} span in trace {trace}, found {}: {other:#?}",
            other.len()
        ),
    }
}

/// Runs `combine` under a client span named `root`; returns the client span's trace id.
async fn combine_under(tracer: &SdkTracer, c: &Client, root: &str, id: &str) -> String {
    let span = tracer.start(root.to_string());
    let cx = Context::current_with_span(span);
    let trace = cx.span().span_context().trace_id().to_string();
    start_when_registered(c, "combine", id, json!("waymark"))
        .with_context(cx.clone())
        .await;
    cx.span().end();
    trace
}

fn worker(name: &'static str, mut cmd: Command, endpoint: &str, server: &ServerProcess, db: &TestDatabase) -> Program {
    cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint);
    Program::start(name, cmd, &server.addr, &db.dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_runs_from_a_client_through_the_server_to_workers_in_three_languages() {
    if let Some(missing) = missing_dependency() {
        skip_or_fail(&format!("the tracing test needs {missing}"));
        return;
    }
    build_programs();
    let dir = example_dir();
    let receiver = OtlpReceiver::start().await;
    let endpoint = receiver.endpoint();
    let db = TestDatabase::new(Backend::Sqlite).await.unwrap();
    // A short lease, so the killed worker's workflow is recovered within seconds.
    let flags = [
        "--otlp-endpoint",
        &endpoint,
        "--worker-lease",
        "2s",
        "--recovery-grace",
        "0s",
    ];
    let server = ServerProcess::start(&db, &flags.map(String::from)).await;
    let c = server.client().await;

    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(&endpoint)
        .build()
        .unwrap();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name("test-client").build())
        .build();
    let tracer = provider.tracer("test");

    let python_worker = || {
        let mut cmd = Command::new(python());
        cmd.arg(dir.join("python/worker.py"));
        cmd
    };
    let ts_worker = || {
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("ts/dist/worker.js"));
        cmd
    };
    let go = worker(
        "go-worker",
        Command::new(dir.join("bin/go-worker")),
        &endpoint,
        &server,
        &db,
    );
    let mut py = worker("python-worker", python_worker(), &endpoint, &server, &db);
    let mut ts = worker("ts-worker", ts_worker(), &endpoint, &server, &db);

    // 1. Every process up: the whole chain.
    let trace = combine_under(&tracer, &c, "checkout", "traced-1").await;
    let w = c.await_workflow("traced-1", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success, "{}", logs(&[&go, &py, &ts]));
    provider.force_flush().unwrap();
    let spans = receiver
        .wait_for("the first workflow", PATIENCE, |s| {
            !find(s, &trace, "checkout").is_empty()
                && has_start(s, &trace, "traced-1")
                && !find(s, &trace, "step shout").is_empty()
                && !find(s, &trace, "step reverse").is_empty()
                && !find(s, &trace, "workflow combine").is_empty()
                && !find(s, &trace, COMPLETE).is_empty()
                && find(s, &trace, STEP_RESULT).len() == 2
        })
        .await;
    // The trace as text (shown with --nocapture).
    for s in spans
        .iter()
        .filter(|s| s.trace_id == trace && !s.name.starts_with("store."))
    {
        println!(
            "{} [{}] span {} parent {} replay={:?}",
            s.name,
            s.service,
            s.span_id,
            s.parent_span_id,
            s.attr("waymark.replay")
        );
    }
    let client = one(&spans, &trace, "checkout");
    let start = start_of(&spans, &trace, "traced-1");
    assert_eq!((start.service.as_str(), start.kind), ("waymark", SERVER));
    assert_eq!(
        start.parent_span_id, client.span_id,
        "the server's span is the client's child"
    );
    assert_eq!(start.attr("waymark.workflow.name"), Some("combine"));
    let run = one(&spans, &trace, "workflow combine");
    assert_eq!(run.kind, CONSUMER);
    assert_eq!(
        run.parent_span_id, start.span_id,
        "the run hangs from the server's start span"
    );
    assert_eq!(run.attr("waymark.replay"), Some("false"));
    assert_eq!(run.attr("waymark.workflow.id"), Some("traced-1"));
    for (step, language) in [("shout", "TypeScript"), ("reverse", "Go")] {
        let call = one(&spans, &trace, &format!("call {step}"));
        assert_eq!(
            (call.kind, call.parent_span_id.as_str()),
            (CLIENT, run.span_id.as_str())
        );
        let served = one(&spans, &trace, &format!("step {step}"));
        assert_eq!(served.kind, CONSUMER);
        assert_eq!(
            served.parent_span_id, call.span_id,
            "the {language} step hangs from the Python call"
        );
        assert_ne!(served.service, run.service, "served by another process");
        // The server's span for the step's result hangs from the call, as the step did.
        assert!(
            find(&spans, &trace, STEP_RESULT)
                .iter()
                .any(|r| r.parent_span_id == call.span_id && r.kind == SERVER),
            "the {language} step's result joins the call's trace"
        );
    }
    check_worker_messages(&spans, &trace, "traced-1", start);

    // 2. The Python worker is killed -9 while its workflow waits for the TypeScript step (whose
    // worker is stopped); another Python worker replays it, and the TypeScript worker comes back.
    drop(ts);
    let trace = combine_under(&tracer, &c, "checkout-2", "traced-2").await;
    wait_for("traced-2 to wait for its TypeScript step", PATIENCE, || async {
        let w = c.get("traced-2").await.unwrap();
        matches!(&w.waiting_on, Some(WaitingOn::RemoteStep { step_name, .. }) if step_name == "shout").then_some(())
    })
    .await;
    py.child.kill().unwrap();
    py.child.wait().unwrap();
    let py2 = worker("python-worker-2", python_worker(), &endpoint, &server, &db);
    ts = worker("ts-worker-2", ts_worker(), &endpoint, &server, &db);
    let w = c.await_workflow("traced-2", Some(PATIENCE)).await.unwrap();
    assert_eq!(w.status, WorkflowStatus::Success, "{}", logs(&[&go, &py2, &ts]));
    assert!(w.recovery_attempts >= 1, "{w:?}");
    provider.force_flush().unwrap();
    let spans = receiver
        .wait_for("the recovered workflow", PATIENCE, |s| {
            find(s, &trace, "workflow combine")
                .iter()
                .any(|r| r.attr("waymark.replay") == Some("true"))
                && has_start(s, &trace, "traced-2")
                && !find(s, &trace, "checkout-2").is_empty()
                && !find(s, &trace, "step shout").is_empty()
                && !find(s, &trace, COMPLETE).is_empty()
        })
        .await;
    let start = start_of(&spans, &trace, "traced-2");
    check_worker_messages(&spans, &trace, "traced-2", start);
    assert_eq!(start.parent_span_id, one(&spans, &trace, "checkout-2").span_id);
    let replayed = find(&spans, &trace, "workflow combine")
        .into_iter()
        .find(|r| r.attr("waymark.replay") == Some("true"))
        .unwrap();
    assert_eq!(
        replayed.parent_span_id, start.span_id,
        "the replay joins the same trace under the same start"
    );
    assert_ne!(replayed.attr("waymark.recovery_attempts"), Some("0"));
    // The call it serves was made by the killed run (the first call of a position is the one
    // kept), whose spans died with it before they could be exported: its parent is in the trace
    // but was never received.
    let served = one(&spans, &trace, "step shout");
    assert_eq!(served.kind, CONSUMER);
    assert!(!served.parent_span_id.is_empty(), "{served:?}");
    drop((go, py2, ts));
    let _ = provider.shutdown();
}
