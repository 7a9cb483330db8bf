//! W3C Trace Context: where a call or a piece of work sits in a distributed trace.
//!
//! A context comes in on a call's `traceparent`/`tracestate` metadata (or a worker's request),
//! is checked here, and is kept with the work it started so every dispatch hands it back. What
//! is kept is the server's own span for the call when spans are exported (so the worker's spans
//! hang under it), else the caller's context as it came: either way the work joins the caller's
//! trace.

use std::collections::HashMap;

use opentelemetry::{
    propagation::TextMapPropagator,
    trace::{TraceContextExt, TraceId},
};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use waymark_store::TraceContext;

/// Longest `tracestate` kept; W3C allows 32 entries of at most 256 characters but recommends
/// propagating at least 512 — and nothing unbounded goes into a row.
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// `traceparent`/`tracestate` as given, if they are a well-formed version-00 context; `None`
/// (no trace) otherwise. A malformed `tracestate` alone is dropped, keeping the parent.
pub fn checked(traceparent: &str, tracestate: &str) -> Option<TraceContext> {
    let traceparent = traceparent.trim();
    if !is_traceparent(traceparent) {
        return None;
    }
    let tracestate = tracestate.trim();
    let tracestate =
        if tracestate.len() <= MAX_TRACESTATE_BYTES && tracestate.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            tracestate
        } else {
            ""
        };
    Some(TraceContext {
        traceparent: traceparent.to_string(),
        tracestate: tracestate.to_string(),
    })
}

/// "00-<32 hex>-<16 hex>-<2 hex>", lowercase, with neither id all zeros.
fn is_traceparent(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let hex = |p: &str, n: usize| p.len() == n && p.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

/// The context a call's HTTP/2 headers carry, if any (and well-formed).
pub fn from_headers(headers: &http::HeaderMap) -> Option<TraceContext> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
    checked(text("traceparent"), text("tracestate"))
}

/// The trace id of a context, for log lines.
pub fn trace_id(t: &TraceContext) -> &str {
    t.traceparent.get(3..35).unwrap_or("")
}

/// The OpenTelemetry context whose remote parent is `t`.
pub fn as_parent(t: &TraceContext) -> opentelemetry::Context {
    let mut carrier = HashMap::with_capacity(2);
    carrier.insert("traceparent".to_string(), t.traceparent.clone());
    if !t.tracestate.is_empty() {
        carrier.insert("tracestate".to_string(), t.tracestate.clone());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// What new work started now should keep: the current span's own context when spans are
/// exported (the work's spans then hang under this call's), else what the caller sent.
pub fn for_work(incoming: Option<TraceContext>) -> Option<TraceContext> {
    if !super::exporting() {
        return incoming;
    }
    current().or(incoming)
}

/// The current span's context, when it has a valid one (spans are exported).
pub fn current() -> Option<TraceContext> {
    let cx = tracing::Span::current().context();
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() || sc.trace_id() == TraceId::INVALID {
        return None;
    }
    let mut carrier = HashMap::with_capacity(2);
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    checked(
        carrier.get("traceparent").map_or("", String::as_str),
        carrier.get("tracestate").map_or("", String::as_str),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn well_formed_contexts_are_kept_and_malformed_ones_dropped() {
        let t = checked(GOOD, "congo=t61rcWkgMzE").unwrap();
        assert_eq!(
            (t.traceparent.as_str(), t.tracestate.as_str()),
            (GOOD, "congo=t61rcWkgMzE")
        );
        assert_eq!(trace_id(&t), "4bf92f3577b34da6a3ce929d0e0e4736");
        for bad in [
            "",
            "garbage",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ] {
            assert_eq!(checked(bad, ""), None, "{bad:?}");
        }
    }

    #[test]
    fn an_oversized_or_binary_tracestate_is_dropped_and_the_parent_kept() {
        let long = "k=".to_string() + &"v".repeat(MAX_TRACESTATE_BYTES);
        assert_eq!(checked(GOOD, &long).unwrap().tracestate, "");
        assert_eq!(checked(GOOD, "a=\u{1}").unwrap().tracestate, "");
        let at_limit = "k=".to_string() + &"v".repeat(MAX_TRACESTATE_BYTES - 2);
        assert_eq!(checked(GOOD, &at_limit).unwrap().tracestate, at_limit);
    }

    #[test]
    fn headers_are_read_and_a_context_becomes_a_remote_parent() {
        let mut h = http::HeaderMap::new();
        assert_eq!(from_headers(&h), None);
        h.insert("traceparent", GOOD.parse().unwrap());
        h.insert("tracestate", "a=1".parse().unwrap());
        let t = from_headers(&h).unwrap();
        let cx = as_parent(&t);
        let sc = cx.span().span_context().clone();
        assert!(sc.is_remote());
        assert_eq!(format!("{}", sc.trace_id()), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(format!("{}", sc.span_id()), "00f067aa0ba902b7");
        assert_eq!(sc.trace_state().header(), "a=1");
    }

    #[test]
    fn without_export_new_work_keeps_the_callers_context() {
        let t = checked(GOOD, "").unwrap();
        assert_eq!(for_work(Some(t.clone())), Some(t));
        assert_eq!(for_work(None), None);
    }
}
