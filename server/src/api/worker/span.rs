//! The server's span for one message on a worker's stream, in the trace of the work it is for.
//!
//! A worker stream is one long call, so the RPC layer's span cannot stand for a step recorded
//! or a completion. Each message that writes for a workflow gets a SERVER span of its own,
//! `WorkerService/<Message>`, whose parent is the trace context the workflow's dispatch carried
//! (a `StepResult`: the calling span its attempt's dispatch carried). The store calls it makes
//! are its children, so they are exported too. Only while spans are exported, and only for
//! work whose trace the stream knows: otherwise no span is made and the message costs nothing
//! more.

use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use waymark_proto::v1::worker_message::Kind;

use crate::{engine::WorkerSession, telemetry};

/// The span to handle `kind` in, when spans are exported and the work's trace is known.
pub fn for_message(session: &WorkerSession, kind: &Kind) -> Option<Span> {
    if !telemetry::exporting() {
        return None;
    }
    let (name, about) = super::route::about(kind)?;
    let trace = match kind {
        Kind::StepResult(m) => session.served_steps.take(&m.workflow_id, m.step_id, m.attempt),
        _ => session.trace_of(about.workflow_id),
    }?;
    let span = tracing::info_span!(
        target: "waymark::rpc",
        "worker message",
        otel.name = name,
        otel.kind = "server",
        otel.status_code = tracing::field::Empty,
        rpc.system = "grpc",
        rpc.service = "waymark.v1.WorkerService",
        waymark.workflow.id = about.workflow_id,
        waymark.epoch = about.epoch,
        waymark.step.id = about.step_id,
        waymark.worker.id = session.registration.worker_id.as_str(),
    );
    let _ = span.set_parent(telemetry::context::as_parent(&trace));
    Some(span)
}
