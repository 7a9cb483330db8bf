//! OpenTelemetry spans for workflows, steps and calls, joined to the trace the work was started
//! in (`contract/tracing.md`).
//!
//! Spans go to OpenTelemetry's global tracer provider: an application that installs one (with
//! an exporter) sees them; one that does not pays for a no-op tracer only. The W3C context is
//! read and written here by hand — a few lines — so no propagator needs installing.

use std::str::FromStr;

use opentelemetry::{
    global,
    trace::{SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState, Tracer},
    Context, KeyValue,
};
use waymark_proto::v1;

/// The tracer every span of the SDK comes from.
fn tracer() -> global::BoxedTracer {
    global::tracer("waymark")
}

/// The remote parent a W3C context names; an empty context when it is absent or malformed.
pub(crate) fn parent(t: Option<&v1::TraceContext>) -> Context {
    match t.and_then(|t| span_context(&t.traceparent, &t.tracestate)) {
        Some(sc) => Context::new().with_remote_span_context(sc),
        None => Context::new(),
    }
}

fn span_context(traceparent: &str, tracestate: &str) -> Option<SpanContext> {
    let mut parts = traceparent.trim().split('-');
    let (version, trace, span, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if version != "00" || parts.next().is_some() || trace.len() != 32 || span.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace).ok().filter(|t| *t != TraceId::INVALID)?;
    let span_id = SpanId::from_hex(span).ok().filter(|s| *s != SpanId::INVALID)?;
    let flags = TraceFlags::new(u8::from_str_radix(flags, 16).ok()?);
    let state = TraceState::from_str(tracestate).unwrap_or_default();
    Some(SpanContext::new(trace_id, span_id, flags, true, state))
}

/// The W3C context of `cx`'s span, for the wire; `None` when it has no valid span.
pub(crate) fn wire(cx: &Context) -> Option<v1::TraceContext> {
    let span = cx.span();
    let sc = span.span_context();
    sc.is_valid().then(|| v1::TraceContext {
        traceparent: format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()),
        tracestate: sc.trace_state().header(),
    })
}

/// Opens a span under `parent` and returns the context it is current in.
pub(crate) fn open(name: String, kind: SpanKind, parent: &Context, attributes: Vec<KeyValue>) -> Context {
    let tracer = tracer();
    let span = tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .start_with_context(&tracer, parent);
    parent.with_span(span)
}

/// The span of a workflow run, under the context its dispatch carries.
pub(crate) fn workflow(d: &v1::DispatchWorkflow) -> Context {
    let replay = !d.steps.is_empty() || d.recovery_attempts > 0;
    open(
        format!("workflow {}", d.workflow_name),
        SpanKind::Consumer,
        &parent(d.trace_context.as_ref()),
        vec![
            KeyValue::new("waymark.workflow.id", d.workflow_id.clone()),
            KeyValue::new("waymark.workflow.name", d.workflow_name.clone()),
            KeyValue::new("waymark.epoch", d.epoch as i64),
            KeyValue::new("waymark.replay", replay),
            KeyValue::new("waymark.recovery_attempts", d.recovery_attempts as i64),
        ],
    )
}

/// Ends `cx`'s span, as failed when `error` says why.
pub(crate) fn end(cx: &Context, error: Option<String>) {
    let span = cx.span();
    if let Some(message) = error {
        span.set_status(Status::error(message));
    }
    span.end();
}

/// The attributes every span of a workflow's step carries.
pub(crate) fn step_attributes(workflow_id: &str, step_id: u32, name: &str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("waymark.workflow.id", workflow_id.to_string()),
        KeyValue::new("waymark.step.id", step_id as i64),
        KeyValue::new("waymark.step.name", name.to_string()),
    ]
}

/// The current OpenTelemetry context's span as W3C metadata, for a client call.
pub(crate) fn current_wire() -> Option<v1::TraceContext> {
    wire(&Context::current())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_context_reads_and_writes_back_the_same() {
        let t = v1::TraceContext {
            traceparent: GOOD.into(),
            tracestate: "a=1".into(),
        };
        let cx = parent(Some(&t));
        assert_eq!(wire(&cx), Some(t));
    }

    #[test]
    fn malformed_contexts_start_no_trace() {
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
            "00-zzf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let t = v1::TraceContext {
                traceparent: bad.into(),
                tracestate: String::new(),
            };
            assert_eq!(wire(&parent(Some(&t))), None, "{bad:?}");
        }
        assert_eq!(wire(&parent(None)), None);
    }
}
