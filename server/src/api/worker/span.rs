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

/// What a message is about: its name, the workflow, its epoch and step (when it has them).
struct About<'a> {
    name: &'static str,
    workflow_id: &'a str,
    epoch: Option<u64>,
    step_id: Option<u32>,
}

fn about(kind: &Kind) -> Option<About<'_>> {
    macro_rules! fenced {
        ($name:literal, $m:expr, step) => {
            About {
                name: $name,
                workflow_id: &$m.workflow_id,
                epoch: Some($m.epoch),
                step_id: Some($m.step_id),
            }
        };
    }
    Some(match kind {
        Kind::RecordStep(m) => fenced!("waymark.v1.WorkerService/RecordStep", m, step),
        Kind::SendMessage(m) => fenced!("waymark.v1.WorkerService/SendMessage", m, step),
        Kind::Recv(m) => fenced!("waymark.v1.WorkerService/Recv", m, step),
        Kind::SetEvent(m) => fenced!("waymark.v1.WorkerService/SetEvent", m, step),
        Kind::GetEvent(m) => fenced!("waymark.v1.WorkerService/GetEvent", m, step),
        Kind::WriteStream(m) => fenced!("waymark.v1.WorkerService/WriteStream", m, step),
        Kind::StartChild(m) => fenced!("waymark.v1.WorkerService/StartChild", m, step),
        Kind::AwaitChild(m) => fenced!("waymark.v1.WorkerService/AwaitChild", m, step),
        Kind::Park(m) => fenced!("waymark.v1.WorkerService/Park", m, step),
        Kind::CallStep(m) => fenced!("waymark.v1.WorkerService/CallStep", m, step),
        Kind::Select(m) => fenced!("waymark.v1.WorkerService/Select", m, step),
        Kind::CompleteWorkflow(m) => About {
            name: "waymark.v1.WorkerService/CompleteWorkflow",
            workflow_id: &m.workflow_id,
            epoch: Some(m.epoch),
            step_id: None,
        },
        Kind::StepResult(m) => About {
            name: "waymark.v1.WorkerService/StepResult",
            workflow_id: &m.workflow_id,
            epoch: None,
            step_id: Some(m.step_id),
        },
        Kind::Hello(_) | Kind::Credit(_) | Kind::Heartbeat(_) | Kind::Batch(_) => return None,
    })
}

/// The span to handle `kind` in, when spans are exported and the work's trace is known.
pub fn for_message(session: &WorkerSession, kind: &Kind) -> Option<Span> {
    if !telemetry::exporting() {
        return None;
    }
    let about = about(kind)?;
    let trace = match kind {
        Kind::StepResult(m) => session.served_steps.take(&m.workflow_id, m.step_id, m.attempt),
        _ => session.trace_of(about.workflow_id),
    }?;
    let span = tracing::info_span!(
        target: "waymark::rpc",
        "worker message",
        otel.name = about.name,
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
