//! The authentication layer: before any service sees a call, the key it carries is checked
//! ([`crate::auth`]) and the call's method is matched against the key's role; the verified
//! [`Principal`] rides on in the request's extensions for services that need more (the worker
//! stream binds itself to it). A refusal is answered here, with UNAUTHENTICATED or
//! PERMISSION_DENIED, and the service is never called.
//!
//! Health `Watch` and reflection streams need no key; each remote address may hold only a few
//! open, for a few minutes each ([`crate::auth::peers`], [`super::open_stream`]).
//!
//! The namespace a call acts in — the one its `waymark-namespace` metadata names, else its
//! key's when the key has just one, else `default` — is checked here too (the key must be
//! allowed in it) and rides on as a [`Namespace`] extension.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tower::{Layer, Service};

use super::open_stream::AnswerBody;
use super::status::to_status;
use crate::auth::peers::{STREAMS_PER_PEER, STREAM_DEADLINE};
use crate::auth::{
    access, permission_denied, unauthenticated, Authenticator, KeyWatch, Principal, ANY_NAMESPACE, DEFAULT_NAMESPACE,
};
use crate::engine::{EngineError, EngineResult, ErrorCode};
use crate::namespaces::Namespace;

/// Unary calls that may wait long for their answer: each ends with UNAUTHENTICATED once its key
/// is revoked (a stream's reader watches its key itself: see ReadStream).
const LONG_POLLS: [&str; 2] = [
    "/waymark.v1.WorkflowService/AwaitWorkflow",
    "/waymark.v1.WorkflowService/GetEvent",
];

/// Streams anyone may open, key or not (their method paths start so).
const OPEN_STREAMS: [&str; 3] = [
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/",
    "/grpc.reflection.v1alpha.ServerReflection/",
];

/// The metadata naming the namespace a call acts in.
pub const NAMESPACE_HEADER: &str = "waymark-namespace";

#[derive(Clone)]
pub struct AuthLayer {
    pub auth: Arc<Authenticator>,
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authn<S>;
    fn layer(&self, inner: S) -> Authn<S> {
        Authn {
            inner,
            auth: self.auth.clone(),
        }
    }
}

#[derive(Clone)]
pub struct Authn<S> {
    inner: S,
    auth: Arc<Authenticator>,
}

/// What the check reads off a call, taken before the body is touched.
struct Call {
    path: String,
    /// The `waymark-namespace` header: absent, text, or not text.
    namespace: Option<Result<String, ()>>,
    authorization: Option<String>,
    /// The caller's address (unknown off TCP).
    peer: Option<std::net::IpAddr>,
    /// It came through a read-only console ([`crate::console::gate::ReadOnlyDoor`]).
    read_only: bool,
}

impl Call {
    fn of<B>(req: &http::Request<B>) -> Call {
        let text = |name| {
            req.headers()
                .get(name)
                .map(|v: &http::HeaderValue| v.to_str().map(str::to_string))
        };
        Call {
            path: req.uri().path().to_string(),
            namespace: text(NAMESPACE_HEADER).map(|r| r.map_err(|_| ())),
            authorization: text(http::header::AUTHORIZATION.as_str()).and_then(Result::ok),
            peer: super::peer_addr(req.extensions()).map(|a| a.ip()),
            read_only: req.extensions().get::<crate::console::gate::ReadOnlyDoor>().is_some(),
        }
    }
}

/// Who may make this call (`None` when authentication is off or the call is open to all), and
/// in which namespace: the one it names; else the key's, when the key has exactly one; else
/// `default`. Whether the namespace exists is the services' to say: a key learns that only of
/// namespaces it may act in.
async fn admit(auth: &Authenticator, call: &Call) -> EngineResult<(Option<Principal>, Namespace)> {
    let path = call.path.as_str();
    let needed = access::required(path);
    let named = match &call.namespace {
        None => None,
        Some(Ok(n)) => Some(n.as_str()),
        Some(Err(())) => return Err(EngineError::invalid("the waymark-namespace header is not text")),
    };
    if let Some(n) = named {
        super::audit::note_namespace(n);
    }
    // A read-only console changes nothing, whoever holds the key.
    if call.read_only && !access::only_reads(path) {
        return Err(EngineError::new(
            ErrorCode::PermissionDenied,
            "CONSOLE_READ_ONLY",
            format!("the console is read-only (--console-read-only): {path} changes something; use the API or the CLI"),
        ));
    }
    if !auth.enabled || needed == access::Access::Open {
        return Ok((None, Namespace(named.unwrap_or(DEFAULT_NAMESPACE).to_string())));
    }
    let principal = auth.authenticate(call.authorization.as_deref(), call.peer).await?;
    super::audit::note_key(&principal.key_id);
    let namespace = match (named, principal.namespaces.as_slice()) {
        (Some(n), _) => n,
        (None, [only]) if only != ANY_NAMESPACE => only.as_str(),
        (None, _) => DEFAULT_NAMESPACE,
    };
    if !principal.role.may(needed) {
        return Err(permission_denied(format!(
            "this key's role ({}) may not call {path}",
            principal.role.as_str()
        )));
    }
    // Namespaces themselves are the server's: only an admin of every namespace makes or
    // deletes one.
    if needed == access::Access::Server && !principal.administers_all() {
        return Err(permission_denied(format!(
            "only an admin key of every namespace ('*') may call {path}"
        )));
    }
    // Keys and namespaces are the server's, not a namespace's: an admin call acts on them
    // (within the key's own namespaces) whatever namespace it names.
    let administrative = matches!(needed, access::Access::Administer | access::Access::Server);
    // WhoAmI is about the key, whatever namespace the call names.
    let about_the_key = access::KEY_ONLY.contains(&path);
    if !administrative && !about_the_key && !principal.may_act_in(namespace) {
        return Err(permission_denied(format!(
            "this key may not act in namespace {namespace:?}"
        )));
    }
    let namespace = Namespace(namespace.to_string());
    Ok((Some(principal), namespace))
}

impl<S, B, R> Service<http::Request<B>> for Authn<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = http::Response<AnswerBody<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        // The service made ready is the one that must take the call; a fresh clone stays behind.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let auth = self.auth.clone();
        let call = Call::of(&req);
        Box::pin(async move {
            let answer = |r: Result<http::Response<R>, S::Error>| r.map(|r| r.map(AnswerBody::plain));
            let refuse = |e| Ok(to_status(e).into_http().map(AnswerBody::plain));
            if OPEN_STREAMS.iter().any(|p| call.path.starts_with(p)) {
                // Anyone may open these, key or not: each address holds only so many, for only
                // so long.
                let Some(place) = auth.peers.stream(call.peer) else {
                    return refuse(EngineError::new(
                        ErrorCode::ResourceExhausted,
                        "TOO_MANY_STREAMS",
                        format!("this address holds {STREAMS_PER_PEER} unauthenticated streams already"),
                    ));
                };
                let response = inner.call(req).await?;
                return Ok(response.map(|b| AnswerBody::bounded(b, place, STREAM_DEADLINE)));
            }
            match admit(&auth, &call).await {
                Ok((principal, namespace)) => {
                    tracing::Span::current().record("waymark.namespace", namespace.0.as_str());
                    super::audit::note_namespace(&namespace.0);
                    let watch = principal.map(|p| KeyWatch {
                        auth: auth.clone(),
                        principal: Arc::new(p),
                        namespace: namespace.0.clone(),
                    });
                    req.extensions_mut().insert(namespace);
                    let Some(watch) = watch else {
                        return answer(inner.call(req).await);
                    };
                    req.extensions_mut().insert(watch.principal.clone());
                    req.extensions_mut().insert(watch.clone());
                    if !LONG_POLLS.contains(&call.path.as_str()) {
                        return answer(inner.call(req).await);
                    }
                    // A long poll ends when its key does: it may otherwise wait for hours.
                    tokio::select! {
                        a = inner.call(req) => answer(a),
                        _ = watch.revoked() => refuse(unauthenticated()),
                    }
                }
                Err(e) => refuse(e),
            }
        })
    }
}
