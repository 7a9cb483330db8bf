//! The spans a run opens (`contract/tracing.md`), exported to memory: under the dispatch's trace
//! context, with each live step, remote call and child start below the run's span and their
//! contexts on the wire; nothing for what is replayed.

use std::{
    sync::{atomic::AtomicBool, Arc, OnceLock},
    time::Duration,
};

use opentelemetry::trace::{SpanKind, Status};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use waymark_proto::v1::{self, reply, worker_message};

use super::WorkflowContext;
use crate::worker::{
    fake::{answer_all, dispatch, fake_conn, recorded},
    records::Records,
};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

/// Installs (once) a global provider exporting to memory: the SDK uses the global tracer.
fn exported() -> &'static InMemorySpanExporter {
    static EXPORTER: OnceLock<InMemorySpanExporter> = OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        opentelemetry::global::set_tracer_provider(provider);
        exporter
    })
}

fn spans_of(workflow_id: &str) -> Vec<SpanData> {
    exported()
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| {
            s.attributes
                .iter()
                .any(|kv| kv.key.as_str() == "waymark.workflow.id" && kv.value.as_str() == workflow_id)
        })
        .collect()
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
        panic!(
            "no span {name:?} among {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    })
}

fn context(d: &v1::DispatchWorkflow, conn: Arc<super::Conn>) -> (WorkflowContext, opentelemetry::Context) {
    let span = crate::tracing_ctx::workflow(d);
    let ctx = WorkflowContext::new(
        d,
        conn,
        Arc::new(AtomicBool::new(false)),
        Default::default(),
        Default::default(),
        Arc::new(Records::default()),
        None,
    )
    .traced(span.clone());
    (ctx, span)
}

fn traced(workflow_id: &str, steps: Vec<v1::Step>) -> v1::DispatchWorkflow {
    v1::DispatchWorkflow {
        workflow_id: workflow_id.into(),
        steps,
        trace_context: Some(v1::TraceContext {
            traceparent: format!("00-{TRACE}-{PARENT}-01"),
            tracestate: String::new(),
        }),
        ..dispatch()
    }
}

#[tokio::test]
async fn a_run_opens_its_spans_under_the_dispatch_and_sends_their_contexts() {
    exported();
    let (conn, requests) = fake_conn(Duration::from_secs(60));
    let d = traced("traced-run", vec![]);
    let (ctx, run_span) = context(&d, conn.clone());
    let (answering, sent) = answer_all(&conn, requests, |m| match &m.kind {
        Some(worker_message::Kind::CallStep(_)) => reply::Result::CallResult(v1::CallResult {
            outcome: v1::recv_result::Outcome::Waiting as i32,
            ..Default::default()
        }),
        Some(worker_message::Kind::StartChild(_)) => reply::Result::ChildStarted(v1::ChildStarted {
            child_workflow_id: "kid".into(),
        }),
        _ => recorded(),
    });
    let _: u32 = ctx.step("charge", || async { Ok::<_, String>(1) }).await.unwrap();
    let failed: Result<u32, _> = ctx.step("refund", || async { Err::<u32, _>("card declined") }).await;
    assert!(failed.is_err());
    ctx.start_step("remote", &1, Default::default()).await.unwrap();
    assert_eq!(ctx.start_child("child", &2, None).await.unwrap(), "kid");
    ctx.sleep(Duration::from_millis(5)).await.unwrap();
    crate::tracing_ctx::end(&run_span, None);
    answering.abort();

    let spans = spans_of("traced-run");
    let run = named(&spans, "workflow flow");
    assert_eq!(run.span_kind, SpanKind::Consumer);
    assert_eq!(run.span_context.trace_id().to_string(), TRACE);
    assert_eq!(run.parent_span_id.to_string(), PARENT, "under the dispatch's context");
    let attr = |s: &SpanData, k: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == k)
            .map(|kv| kv.value.to_string())
    };
    assert_eq!(attr(run, "waymark.replay").as_deref(), Some("false"));
    assert_eq!(attr(run, "waymark.epoch").as_deref(), Some("1"));
    let charge = named(&spans, "step charge");
    assert_eq!(
        (charge.span_kind.clone(), charge.parent_span_id),
        (SpanKind::Internal, run.span_context.span_id())
    );
    assert_eq!(attr(charge, "waymark.step.id").as_deref(), Some("0"));
    assert!(matches!(named(&spans, "step refund").status, Status::Error { .. }));
    let call = named(&spans, "call remote");
    assert_eq!(
        (call.span_kind.clone(), call.parent_span_id),
        (SpanKind::Client, run.span_context.span_id())
    );
    let child = named(&spans, "start child child");
    assert_eq!(
        (child.span_kind.clone(), child.parent_span_id),
        (SpanKind::Producer, run.span_context.span_id())
    );
    let slept = named(&spans, "wait sleep");
    assert_eq!(slept.parent_span_id, run.span_context.span_id());
    assert_eq!(attr(slept, "waymark.step.id").as_deref(), Some("4"));

    // The call and the child start carry their spans' contexts to the server.
    let wire = |id: opentelemetry::trace::SpanId| format!("00-{TRACE}-{id}-01");
    let sent = sent.lock().unwrap();
    let carried: Vec<String> = sent
        .iter()
        .filter_map(|m| match &m.kind {
            Some(worker_message::Kind::CallStep(c)) => c.trace_context.as_ref().map(|t| t.traceparent.clone()),
            Some(worker_message::Kind::StartChild(c)) => c.trace_context.as_ref().map(|t| t.traceparent.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        carried,
        [wire(call.span_context.span_id()), wire(child.span_context.span_id())]
    );
}

#[tokio::test]
async fn a_replayed_step_opens_no_span_and_the_run_says_it_replays() {
    exported();
    let (conn, _requests) = fake_conn(Duration::from_secs(60));
    let recorded_step = v1::Step {
        step_id: 0,
        name: "charge".into(),
        output: Some(waymark_proto::json::to_payload(&serde_json::json!(1))),
        ..Default::default()
    };
    let slept = v1::Step {
        step_id: 1,
        name: "waymark.sleep".into(),
        output: Some(waymark_proto::json::to_payload(&serde_json::json!({"wake_at_ms": 1}))),
        ..Default::default()
    };
    let d = traced("replayed-run", vec![recorded_step, slept]);
    let (ctx, run_span) = context(&d, conn);
    let v: u32 = ctx
        .step("charge", || async { Err::<u32, _>("must not run") })
        .await
        .unwrap();
    assert_eq!(v, 1);
    // A sleep whose wake time has passed: replayed, no wait.
    ctx.sleep(Duration::from_secs(3600)).await.unwrap();
    crate::tracing_ctx::end(&run_span, None);
    let spans = spans_of("replayed-run");
    assert_eq!(
        spans.len(),
        1,
        "only the run: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert_eq!(
        spans[0]
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "waymark.replay")
            .map(|kv| kv.value.to_string())
            .as_deref(),
        Some("true")
    );
}
