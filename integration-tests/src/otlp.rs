//! A test OTLP receiver: a gRPC `TraceService` that keeps every span it is sent, so a test can
//! check that processes in several languages exported one trace with the right parent links.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use opentelemetry_proto::tonic::{
    collector::trace::v1::{
        trace_service_server::{TraceService, TraceServiceServer},
        ExportTraceServiceRequest, ExportTraceServiceResponse,
    },
    common::v1::any_value::Value,
};
use tokio::sync::Notify;

/// One span as received, its ids in lowercase hex (the parent empty for a root).
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub service: String,
    pub name: String,
    /// 1 internal, 2 server, 3 client, 4 producer, 5 consumer (OTLP's numbering).
    pub kind: i32,
    pub trace_id: String,
    pub span_id: String,
    pub parent_span_id: String,
    pub attributes: HashMap<String, String>,
}

impl ReceivedSpan {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

#[derive(Default)]
struct Received {
    spans: Mutex<Vec<ReceivedSpan>>,
    arrived: Notify,
}

/// The receiver, listening until dropped.
pub struct OtlpReceiver {
    pub addr: SocketAddr,
    received: Arc<Received>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Service(Arc<Received>);

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn text(v: Option<&opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

#[tonic::async_trait]
impl TraceService for Service {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut got = Vec::new();
        for rs in req.into_inner().resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .map(|a| text(a.value.as_ref()))
                .unwrap_or_default();
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(ReceivedSpan {
                        service: service.clone(),
                        name: s.name,
                        kind: s.kind,
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent_span_id: hex(&s.parent_span_id),
                        attributes: s
                            .attributes
                            .iter()
                            .map(|a| (a.key.clone(), text(a.value.as_ref())))
                            .collect(),
                    });
                }
            }
        }
        self.0.spans.lock().unwrap().extend(got);
        self.0.arrived.notify_waiters();
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

impl OtlpReceiver {
    /// Listens on a free local port.
    pub async fn start() -> OtlpReceiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a local port");
        let addr = listener.local_addr().expect("bound");
        let received = Arc::new(Received::default());
        let service = TraceServiceServer::new(Service(received.clone()));
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(incoming)
                .await;
        });
        OtlpReceiver { addr, received, task }
    }

    /// The endpoint to give exporters (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received.spans.lock().unwrap().clone()
    }

    /// Waits until the spans received satisfy `done` (checked as each export arrives), or
    /// `patience` passes: then panics with what did arrive.
    pub async fn wait_for(
        &self,
        what: &str,
        patience: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Vec<ReceivedSpan> {
        let deadline = tokio::time::Instant::now() + patience;
        loop {
            let arrived = self.received.arrived.notified();
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                let seen: Vec<String> = spans
                    .iter()
                    .map(|s| {
                        format!(
                            "{} [{}] trace {} span {} parent {}",
                            s.name, s.service, s.trace_id, s.span_id, s.parent_span_id
                        )
                    })
                    .collect();
                panic!(
                    "spans for {what} did not arrive within {patience:?}; received:\n{}",
                    seen.join("\n")
                );
            }
        }
    }
}
