//! The console port's front door, before gRPC-web is translated: GETs are the app's files
//! ([`super::assets`]); POSTs of gRPC-web go on to the API, marked [`ReadOnlyDoor`] when the
//! console is read-only (the authentication layer then refuses every call that is not a read,
//! whatever the key, with CONSOLE_READ_ONLY); anything else is refused.
//!
//! Without `--auth` the console answers only requests addressed to an IP address or
//! `localhost`: a web page elsewhere cannot point a name of its own at 127.0.0.1 (DNS
//! rebinding) and drive an unauthenticated console from the user's browser. Cross-origin calls
//! are refused by the browser itself: gRPC-web needs a CORS preflight, and none is answered.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use http::{header, Method, Request, Response, StatusCode};
use tower::{Layer, Service};

use super::assets;

/// Set on API calls that came through a read-only console.
#[derive(Debug, Clone, Copy)]
pub struct ReadOnlyDoor;

#[derive(Debug, Clone, Copy)]
pub struct ConsoleGateLayer {
    pub read_only: bool,
    /// Refuse requests addressed to a host name other than `localhost` (authentication off).
    pub check_host: bool,
}

impl<S> Layer<S> for ConsoleGateLayer {
    type Service = ConsoleGate<S>;
    fn layer(&self, inner: S) -> ConsoleGate<S> {
        ConsoleGate { inner, door: *self }
    }
}

#[derive(Debug, Clone)]
pub struct ConsoleGate<S> {
    inner: S,
    door: ConsoleGateLayer,
}

/// Whether a request's host (`Host`, or the URI's authority over HTTP/2) is an IP address or
/// `localhost`.
pub fn host_allowed<B>(req: &Request<B>) -> bool {
    let host = req.uri().host().map(str::to_string).or_else(|| {
        let h = req.headers().get(header::HOST)?.to_str().ok()?;
        // "[::1]:7451", "127.0.0.1:7451", "localhost".
        let h = match h.strip_prefix('[') {
            Some(rest) => rest.split(']').next()?,
            None => h.rsplit_once(':').map_or(h, |(host, _)| host),
        };
        Some(h.to_string())
    });
    let Some(host) = host else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok()
}

fn is_grpc_web<B>(req: &Request<B>) -> bool {
    req.method() == Method::POST
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/grpc-web"))
}

fn refuse(status: StatusCode, text: &'static str) -> Response<tonic::body::Body> {
    body(assets::plain(status, "text/plain; charset=utf-8", text))
}

fn body(r: Response<bytes::Bytes>) -> Response<tonic::body::Body> {
    r.map(|b| tonic::body::Body::new(http_body_util::Full::new(b)))
}

impl<S, B, R> Service<Request<B>> for ConsoleGate<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Send + 'static,
    R: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    R::Error: Into<tonic::codegen::StdError>,
{
    type Response = Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        if self.door.check_host && !host_allowed(&req) {
            return Box::pin(std::future::ready(Ok(refuse(
                StatusCode::FORBIDDEN,
                "this console runs without keys and answers only requests for localhost or an IP address\n",
            ))));
        }
        if is_grpc_web(&req) {
            if self.door.read_only {
                req.extensions_mut().insert(ReadOnlyDoor);
            }
            // The service made ready is the one that must take the call.
            let clone = self.inner.clone();
            let mut inner = std::mem::replace(&mut self.inner, clone);
            return Box::pin(async move { Ok(inner.call(req).await?.map(tonic::body::Body::new)) });
        }
        let answer = match *req.method() {
            Method::GET | Method::HEAD => body(assets::answer(&req)),
            _ => refuse(
                StatusCode::METHOD_NOT_ALLOWED,
                "the console takes GET, and gRPC-web POSTs\n",
            ),
        };
        Box::pin(std::future::ready(Ok(answer)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(host: Option<&str>, uri: &str) -> Request<()> {
        let mut b = Request::builder().uri(uri);
        if let Some(h) = host {
            b = b.header(header::HOST, h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn only_addresses_and_localhost_pass_without_keys() {
        for ok in [
            "127.0.0.1:7451",
            "localhost:7451",
            "LOCALHOST",
            "[::1]:7451",
            "10.0.0.5",
        ] {
            assert!(host_allowed(&req(Some(ok), "/")), "{ok}");
        }
        for bad in [
            "evil.example:7451",
            "127.0.0.1.evil.example",
            "localhost.evil.example:80",
        ] {
            assert!(!host_allowed(&req(Some(bad), "/")), "{bad}");
        }
        assert!(!host_allowed(&req(None, "/")));
        // HTTP/2 carries the authority in the URI.
        assert!(host_allowed(&req(None, "http://127.0.0.1:7451/")));
        assert!(!host_allowed(&req(None, "http://rebound.example:7451/")));
    }
}
