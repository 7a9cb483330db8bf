//! What operators see of a replica: logs, traces exported over OTLP when asked, Prometheus
//! metrics, and health for orchestrators.
//!
//! - [`install`] sets up the process's `tracing` subscriber: log lines to stderr (text or JSON),
//!   and — only with an OTLP endpoint — an OpenTelemetry layer that exports spans. Without an
//!   endpoint no span is built for export and nothing is sent: the cost is the log lines alone.
//! - [`context`]: W3C trace contexts taken from calls and kept with the work.
//! - [`metrics`]: the Prometheus registry every part of the server counts into.
//! - [`http`]: the metrics listener (`/metrics`, `/healthz`, `/readyz`).

use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider, Resource};
use tracing_subscriber::{
    filter::{filter_fn, DynFilterFn},
    layer::SubscriberExt,
    util::SubscriberInitExt,
    EnvFilter, Layer,
};

pub mod context;
pub mod http;
pub mod metrics;
pub mod store_calls;

/// Set once spans are exported: new work then keeps the server's span as its parent.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (an OTLP endpoint was given).
pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// How a replica reports.
#[derive(Debug, Clone, Default)]
pub struct TelemetryOptions {
    /// Log lines as JSON objects instead of text.
    pub log_json: bool,
    /// Where to send spans (OTLP over gRPC, e.g. `http://127.0.0.1:4317`); none: not exported.
    pub otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans.
    pub service_name: String,
    /// Time store calls for the metrics (there is a metrics listener to read them). Without,
    /// no layer wants the store calls' spans and none is made: a call costs a level check.
    pub store_call_metrics: bool,
}

/// Keeps the span exporter alive; [`Telemetry::shutdown`] sends what is still buffered.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes buffered spans (bounded by the exporter's own timeout) and stops exporting.
    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            if let Err(e) = p.shutdown() {
                eprintln!("waymark: spans not all exported at shutdown: {e}");
            }
        }
    }
}

/// Installs the process's subscriber. Log lines follow `WAYMARK_LOG` (default `info`); spans
/// for export are Waymark's own (`waymark*` targets), whatever the log filter says.
pub fn install(opts: &TelemetryOptions) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_env("WAYMARK_LOG").unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    // Colours only for a person at a terminal, not in a log file.
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let fmt = if opts.log_json {
        fmt.json().with_filter(filter).boxed()
    } else {
        fmt.with_filter(filter).boxed()
    };
    // Store calls' spans, timed for the latency histogram whether or not spans are exported —
    // when a metrics listener can show it.
    let store_calls = opts
        .store_call_metrics
        .then(|| store_calls::StoreCalls.with_filter(filter_fn(|m| m.target() == store_calls::TARGET)));
    let Some(endpoint) = opts.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) else {
        tracing_subscriber::registry().with(fmt).with(store_calls).try_init()?;
        return Ok(Telemetry { provider: None });
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot export spans to {endpoint}: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(opts.service_name.clone()).build())
        .build();
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    // Waymark's own spans; a store call only below a call's span (one the server makes on its
    // own, or for a worker stream's message, would be a trace of one span).
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("waymark"))
        .with_filter(DynFilterFn::new(|m, cx| {
            m.is_span()
                && m.target().starts_with("waymark")
                && (m.target() != store_calls::TARGET || cx.lookup_current().is_some())
        }));
    tracing_subscriber::registry()
        .with(fmt)
        .with(store_calls)
        .with(otel)
        .try_init()?;
    EXPORTING.store(true, Ordering::Relaxed);
    Ok(Telemetry {
        provider: Some(provider),
    })
}
