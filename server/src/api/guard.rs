//! What every call passes through before its service sees it, as one tower layer:
//!
//! - **A deadline.** A unary call that does not wait answers within the server's request
//!   timeout, whatever the client asked (a client's own shorter deadline still wins), so a call
//!   stuck on a database that stopped answering is not held — with its memory — for ever. Calls
//!   that wait (AwaitWorkflow, GetEvent) get the timeout on top of the longest wait they may
//!   ask for. Streams (a worker's, ReadStream, health watches) are not cut: their answer starts
//!   at once and they are bounded elsewhere.
//! - **One error for an oversized request.** tonic refuses a message over the decoding limit
//!   with OUT_OF_RANGE and a message of its own; clients get INVALID_ARGUMENT with the
//!   MESSAGE_TOO_LARGE reason, like every other input the server refuses.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tonic::{Code, Status};
use tower::{Layer, Service};

use super::status::to_status;
use crate::engine::{events::MAX_CLIENT_WAIT, EngineError, ErrorCode};

#[derive(Clone)]
pub struct CallGuardLayer {
    pub request_timeout: Duration,
}

impl<S> Layer<S> for CallGuardLayer {
    type Service = CallGuard<S>;
    fn layer(&self, inner: S) -> CallGuard<S> {
        CallGuard {
            inner,
            request_timeout: self.request_timeout,
        }
    }
}

#[derive(Clone)]
pub struct CallGuard<S> {
    inner: S,
    request_timeout: Duration,
}

/// How long the server gives a call on `path` (a gRPC method path), if it bounds it at all.
pub fn deadline_for(path: &str, request_timeout: Duration) -> Option<Duration> {
    const STREAMS: [&str; 4] = [
        "/waymark.v1.WorkerService/Connect",
        "/waymark.v1.WorkflowService/ReadStream",
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.",
    ];
    const WAITS: [&str; 3] = [
        "/waymark.v1.WorkflowService/AwaitWorkflow",
        "/waymark.v1.WorkflowService/GetEvent",
        "/waymark.v1.WorkflowService/UpdateWorkflow",
    ];
    if STREAMS.iter().any(|p| path.starts_with(p)) {
        None
    } else if WAITS.contains(&path) {
        Some(MAX_CLIENT_WAIT + request_timeout)
    } else {
        Some(request_timeout)
    }
}

impl<S, B, R> Service<http::Request<B>> for CallGuard<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Send + 'static,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let deadline = deadline_for(req.uri().path(), self.request_timeout);
        let answer = self.inner.call(req);
        Box::pin(async move {
            let response = match deadline {
                None => answer.await?,
                Some(d) => match tokio::time::timeout(d, answer).await {
                    Ok(r) => r?,
                    Err(_) => {
                        return Ok(to_status(EngineError::new(
                            ErrorCode::DeadlineExceeded,
                            "REQUEST_TIMEOUT",
                            format!("the server gives a call at most {d:?}; try again"),
                        ))
                        .into_http())
                    }
                },
            };
            Ok(rewrite_too_large(response))
        })
    }
}

/// tonic's refusal of a request over the decoding limit, as our INVALID_ARGUMENT.
fn rewrite_too_large<R: Default>(response: http::Response<R>) -> http::Response<R> {
    let too_large = response
        .extensions()
        .get::<Status>()
        .is_some_and(|s| s.code() == Code::OutOfRange && s.message().contains("decoded message length too large"));
    if !too_large {
        return response;
    }
    let message = response
        .extensions()
        .get::<Status>()
        .map(|s| s.message().to_string())
        .unwrap_or_default();
    // tonic's text: "… found N bytes, the limit is: M bytes".
    let numbers: Vec<&str> = message
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect();
    let text = match numbers.as_slice() {
        [found, limit] => format!("the request is {found} bytes; this call takes at most {limit}"),
        _ => "the request is larger than this call takes".to_string(),
    };
    to_status(EngineError::new(ErrorCode::InvalidArgument, "MESSAGE_TOO_LARGE", text)).into_http()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic_types::StatusExt;

    #[test]
    fn only_unary_calls_get_a_deadline() {
        let t = Duration::from_secs(60);
        assert_eq!(deadline_for("/waymark.v1.WorkflowService/StartWorkflow", t), Some(t));
        assert_eq!(deadline_for("/waymark.v1.QueueService/ListQueues", t), Some(t));
        assert_eq!(
            deadline_for("/waymark.v1.WorkflowService/AwaitWorkflow", t),
            Some(MAX_CLIENT_WAIT + t)
        );
        assert_eq!(deadline_for("/waymark.v1.WorkerService/Connect", t), None);
        assert_eq!(deadline_for("/waymark.v1.WorkflowService/ReadStream", t), None);
        assert_eq!(deadline_for("/grpc.health.v1.Health/Watch", t), None);
        assert_eq!(deadline_for("/grpc.health.v1.Health/Check", t), Some(t));
    }

    #[tokio::test]
    async fn a_call_that_does_not_answer_gets_deadline_exceeded_with_a_reason() {
        let never = tower::service_fn(|_req: http::Request<()>| {
            std::future::pending::<Result<http::Response<String>, std::convert::Infallible>>()
        });
        let mut guarded = CallGuardLayer {
            request_timeout: Duration::from_millis(20),
        }
        .layer(never);
        let req = http::Request::builder()
            .uri("/waymark.v1.WorkflowService/GetWorkflow")
            .body(())
            .unwrap();
        let answer = guarded.call(req).await.unwrap();
        let s = answer.extensions().get::<Status>().unwrap();
        assert_eq!(s.code(), Code::DeadlineExceeded);
        assert_eq!(s.get_details_error_info().unwrap().reason, "REQUEST_TIMEOUT");
        assert_eq!(answer.headers()["grpc-status"], "4");
    }

    #[test]
    fn an_oversized_request_becomes_invalid_argument_with_a_reason() {
        let tonic_refusal = Status::out_of_range(
            "Error, decoded message length too large: found 9000000 bytes, the limit is: 5242880 bytes",
        );
        let rewritten = rewrite_too_large(tonic_refusal.into_http::<String>());
        let s = rewritten.extensions().get::<Status>().unwrap();
        assert_eq!(s.code(), Code::InvalidArgument);
        assert_eq!(s.get_details_error_info().unwrap().reason, "MESSAGE_TOO_LARGE");
        assert!(
            s.message().contains("9000000") && s.message().contains("5242880"),
            "{}",
            s.message()
        );
        let other = Status::out_of_range("something else").into_http::<String>();
        let kept = rewrite_too_large(other);
        assert_eq!(kept.extensions().get::<Status>().unwrap().code(), Code::OutOfRange);
    }
}
