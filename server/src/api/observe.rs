//! What every call leaves behind, as the outermost tower layer: a span (the server's span for
//! the RPC, a child of the caller's W3C trace context when it sent one), the access log line,
//! and the RPC metrics.
//!
//! Handlers add what they learn to the span (`note_workflow`): the workflow's id, name, queue
//! and epoch, so the access log line — printed inside the span — carries them with the trace
//! id. The caller's context itself travels on to the handler as [`IncomingTrace`], which a
//! start keeps with the workflow.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use tower::{Layer, Service};
use tracing::{field::Empty, Instrument};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use waymark_store::{TraceContext, WorkflowRecord};

use super::audit;
use crate::telemetry::{self, context, metrics};

/// The caller's trace context (`traceparent`/`tracestate` metadata), when it sent a valid one.
#[derive(Clone, Debug)]
pub struct IncomingTrace(pub Option<TraceContext>);

impl IncomingTrace {
    /// What a request's extensions say; none when the layer did not run (unit tests).
    pub fn of<T>(req: &tonic::Request<T>) -> Option<TraceContext> {
        req.extensions().get::<IncomingTrace>().and_then(|t| t.0.clone())
    }
}

/// Puts a workflow's id, name, queue and epoch on the current call's span (and its id in the
/// call's audit line).
pub fn note_workflow(w: &WorkflowRecord) {
    super::audit::note_resource(&w.workflow_id);
    let span = tracing::Span::current();
    span.record("waymark.workflow.id", w.workflow_id.as_str());
    span.record("waymark.workflow.name", w.workflow_name.as_str());
    span.record("waymark.queue", w.queue_name.as_str());
    span.record("waymark.epoch", w.epoch);
}

/// Puts a workflow id on the current call's span (when that is all the call names).
pub fn note_workflow_id(id: &str) {
    super::audit::note_resource(id);
    tracing::Span::current().record("waymark.workflow.id", id);
}

/// Which answered calls leave an access line (`info` on `waymark::access`: method, status,
/// latency, peer, key id, in the call's span).
///
/// `Errors` is the default: a busy server answers tens of thousands of calls a second, and a
/// line for each costs it about 8 % of its throughput (docs/benchmarks.md) and its operators a
/// log nobody reads, while the calls worth a look (refused, failed, timed out) still leave one.
/// Every call is counted and timed by the RPC metrics either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AccessLog {
    /// A line for every call.
    All,
    /// A line for every call answered with a status other than OK.
    #[default]
    Errors,
    /// No line.
    Off,
}

impl AccessLog {
    /// `all`, `errors` or `off`; `true` and `false` (the flag's older values) are `all` and
    /// `off`.
    pub fn parse(text: &str) -> Result<AccessLog, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" | "true" | "on" | "yes" | "1" => Ok(AccessLog::All),
            "errors" => Ok(AccessLog::Errors),
            "off" | "false" | "no" | "0" | "none" => Ok(AccessLog::Off),
            _ => Err(format!("{text:?} is not one of all, errors, off")),
        }
    }

    /// Whether a call answered with gRPC status `code` leaves a line.
    pub fn logs(self, code: i32) -> bool {
        match self {
            AccessLog::All => true,
            AccessLog::Errors => code != 0,
            AccessLog::Off => false,
        }
    }
}

impl std::fmt::Display for AccessLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccessLog::All => "all",
            AccessLog::Errors => "errors",
            AccessLog::Off => "off",
        })
    }
}

#[derive(Clone)]
pub struct ObserveLayer {
    /// Which calls leave an access line.
    pub access_log: AccessLog,
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;
    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            access_log: self.access_log,
        }
    }
}

#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    access_log: AccessLog,
}

impl<S, B, R> Service<http::Request<B>> for Observe<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Send + 'static,
    S::Future: Send + 'static,
    R: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let began = Instant::now();
        // A method the contract does not have is named once, not by what the caller sent:
        // metric labels and span names stay bounded whatever the paths.
        const OTHERS: [&str; 4] = [
            "/grpc.health.v1.Health/Check",
            "/grpc.health.v1.Health/Watch",
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        ];
        let known =
            super::contract_methods().iter().any(|m| m == req.uri().path()) || OTHERS.contains(&req.uri().path());
        let path = if known {
            req.uri().path().trim_start_matches('/').to_string()
        } else {
            "unknown".to_string()
        };
        let (service, method) = path.split_once('/').unwrap_or((path.as_str(), ""));
        let incoming = context::from_headers(req.headers());
        let peer = super::peer_addr(req.extensions())
            .map(|a| a.to_string())
            .unwrap_or_default();
        let span = tracing::info_span!(
            target: "waymark::rpc",
            "rpc",
            otel.name = %path,
            otel.kind = "server",
            otel.status_code = Empty,
            rpc.system = "grpc",
            rpc.service = %service,
            rpc.method = %method,
            rpc.grpc.status_code = Empty,
            trace_id = Empty,
            waymark.namespace = Empty,
            waymark.workflow.id = Empty,
            waymark.workflow.name = Empty,
            waymark.queue = Empty,
            waymark.epoch = Empty,
        );
        if let Some(t) = &incoming {
            span.record("trace_id", context::trace_id(t));
            if telemetry::exporting() {
                let _ = span.set_parent(context::as_parent(t));
            }
        }
        req.extensions_mut().insert(IncomingTrace(incoming));
        let access = crate::auth::access::required(req.uri().path());
        let notes = audit::CallNotes::default();
        let answer = {
            let _entered = span.enter();
            audit::scoped(notes.clone(), self.inner.call(req))
        };
        let access_log = self.access_log;
        Box::pin(
            async move {
                let response = answer.await?;
                // A refusal is "trailers-only": its status is in the headers. A success's status
                // comes in trailers after the body, which this layer does not wait for.
                let code = response
                    .headers()
                    .get("grpc-status")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse::<i32>().ok())
                    .unwrap_or(0);
                let code_name = format!("{:?}", tonic::Code::from_i32(code));
                let latency = began.elapsed();
                let span = tracing::Span::current();
                span.record("rpc.grpc.status_code", code);
                if code != 0 {
                    span.record("otel.status_code", "ERROR");
                }
                let labels = metrics::RpcLabels {
                    method: path.clone(),
                    code: code_name.clone(),
                };
                let m = metrics::metrics();
                m.rpc_requests.get_or_create(&labels).inc();
                m.rpc_duration.get_or_create(&labels).observe(latency.as_secs_f64());
                let notes = notes.lock().unwrap().clone();
                if access_log.logs(code) {
                    tracing::info!(
                        target: "waymark::access",
                        method = %path,
                        status = %code_name,
                        latency_ms = latency.as_secs_f64() * 1000.0,
                        peer = %peer,
                        key_id = notes.key_id.as_deref().unwrap_or("-"),
                        "call answered"
                    );
                }
                if audit::audited(access, tonic::Code::from_i32(code)) {
                    audit::log(&path, tonic::Code::from_i32(code), &peer, &notes);
                }
                Ok(response)
            }
            .instrument(span),
        )
    }
}
