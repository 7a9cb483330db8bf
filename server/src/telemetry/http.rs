//! The metrics listener (`--metrics-listen`): plain HTTP/1.1 for Prometheus and orchestrators.
//!
//! - `GET /metrics`: every metric in the OpenMetrics text format.
//! - `GET /healthz`: liveness — 200 while the process serves at all (a replica whose database is
//!   away is alive: restarting it would not bring the database back).
//! - `GET /readyz`: readiness — 200 when the replica can do work (its database answers and its
//!   schema is up to date, and it is not draining), else 503 with the reason.
//!
//! Anything else is 404. Requests are small and answered at once; a connection that sends
//! nothing is dropped after a few seconds, and at most [`MAX_CONNECTIONS`] are served at once.
//!
//! On loopback every path is open. Beyond it (`--metrics-listen 0.0.0.0:…` with `--auth`),
//! `/metrics` — which names every namespace, queue and workflow name — needs an API key whose
//! role may read (`authorization: Bearer <key>`, Prometheus's `authorization.credentials_file`),
//! and is 401 without one. `/readyz` answers everyone with its status, since an orchestrator's
//! probe cannot send a key, but says *why* a replica is not ready only to a key that may read;
//! `/healthz` says nothing but "ok".

use std::{convert::Infallible, sync::Arc, time::Duration};

use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{body::Incoming, server::conn::http1, service::service_fn, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

/// What the listener asks the replica.
#[async_trait]
pub trait Probe: Send + Sync + 'static {
    /// Sets the metrics that are levels (connected workers, queue depth…) from current state.
    async fn refresh_levels(&self);
    /// `Err(reason)` while the replica cannot do work.
    async fn ready(&self) -> Result<(), String>;
    /// Whether a request with this `authorization` header, from `peer`, may read `/metrics` and
    /// `/readyz`.
    async fn admits(&self, authorization: Option<&str>, peer: std::net::IpAddr) -> bool;
}

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 32;

/// Serves the listener until the task is dropped.
pub async fn serve(listener: tokio::net::TcpListener, probe: Arc<dyn Probe>) {
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(place) = places.clone().acquire_owned().await else {
            return;
        };
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let probe = probe.clone();
        tokio::spawn(async move {
            let _place = place;
            let service = service_fn(move |req| answer(req, probe.clone(), peer.ip()));
            let _ = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(5))
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(
    req: Request<Incoming>,
    probe: Arc<dyn Probe>,
    peer: std::net::IpAddr,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != hyper::Method::GET {
        return Ok(text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into()));
    }
    let path = req.uri().path();
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if path == "/readyz" {
        let admitted = probe.admits(authorization, peer).await;
        let (status, body) = readiness(probe.ready().await, admitted);
        return Ok(text(status, body));
    }
    if path == "/metrics" && !probe.admits(authorization, peer).await {
        let mut r = text(
            StatusCode::UNAUTHORIZED,
            "an API key that may read is required: send `authorization: Bearer <key>`\n".into(),
        );
        r.headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
        return Ok(r);
    }
    Ok(match path {
        "/metrics" => {
            probe.refresh_levels().await;
            let body = super::metrics::metrics().encode();
            let mut r = text(StatusCode::OK, body);
            r.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8"
                    .parse()
                    .expect("valid"),
            );
            r
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz or /readyz\n".into(),
        ),
    })
}

/// `/readyz`'s answer: the status for anyone, the reason only for a caller `admitted` to read.
fn readiness(ready: Result<(), String>, admitted: bool) -> (StatusCode, String) {
    match ready {
        Ok(()) => (StatusCode::OK, "ready\n".into()),
        Err(why) if admitted => (StatusCode::SERVICE_UNAVAILABLE, format!("not ready: {why}\n")),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        "text/plain; charset=utf-8".parse().expect("valid"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_a_replica_is_not_ready_is_told_only_to_readers() {
        let down = || Err("the database does not answer: host db.internal".to_string());
        assert_eq!(readiness(Ok(()), false), (StatusCode::OK, "ready\n".into()));
        assert_eq!(
            readiness(down(), false),
            (StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into())
        );
        let (status, told) = readiness(down(), true);
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(told.contains("db.internal"), "{told}");
    }
}
