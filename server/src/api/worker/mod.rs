//! `waymark.v1.WorkerService/Connect`: one task reads the worker's messages and runs each request
//! on its own task (so many workflows' checkpoints are in flight together); the engine's pushes
//! (dispatch, wakeup, cancel, drain) join the replies on the way out.
//!
//! Each request kind is an operation in a file of its own (`crate::ops`); `route.rs` lists them
//! once, and routing, metrics and spans come from that list.

mod list;
mod pushes;
mod route;
mod span;

use std::{pin::Pin, sync::Arc, time::Duration};

use tokio::{sync::mpsc, task::JoinSet};
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use waymark_proto::v1::{
    self, server_message, worker_message, worker_service_server::WorkerService, ServerMessage, WorkerMessage,
};

use super::status;
use crate::auth::{permission_denied, unauthenticated, KeyWatch, Principal};
use crate::engine::{Engine, Registration, ToWorker, WorkerSession};

pub struct WorkerApi {
    pub namespaces: Arc<crate::namespaces::Namespaces>,
}

/// A worker key registers only the names its patterns allow, and takes work only from queues
/// they cover (besides `default`, which always exists): a worker never creates a queue its key
/// does not name.
fn check_names(principal: Option<&Principal>, registration: &Registration) -> Result<(), Status> {
    if principal.is_none() {
        return Ok(());
    }
    let queues = registration
        .queues
        .iter()
        .filter(|q| *q != crate::engine::workflows::DEFAULT_QUEUE);
    let names = registration
        .workflow_names
        .iter()
        .chain(&registration.step_names)
        .chain(queues);
    match names.into_iter().find(|n| !registration.reaches(n)) {
        None => Ok(()),
        Some(n) => Err(status::to_status(permission_denied(format!(
            "this key does not cover {n:?}: it registers only the workflow, step and queue names its patterns allow"
        )))),
    }
}

/// How long a new stream may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

fn msg(kind: server_message::Kind) -> Result<ServerMessage, Status> {
    Ok(ServerMessage { kind: Some(kind) })
}

#[tonic::async_trait]
impl WorkerService for WorkerApi {
    type ConnectStream = Pin<Box<dyn Stream<Item = Result<ServerMessage, Status>> + Send + 'static>>;

    async fn list_workers(
        &self,
        req: Request<v1::ListWorkersRequest>,
    ) -> Result<Response<v1::ListWorkersResponse>, Status> {
        list::list_workers(&self.namespaces, req).await
    }

    async fn connect(&self, req: Request<Streaming<WorkerMessage>>) -> Result<Response<Self::ConnectStream>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let principal = req.extensions().get::<Arc<Principal>>().cloned();
        // The stream ends when its key does (revoked, expired, or no longer in this namespace).
        let watch = req.extensions().get::<KeyWatch>().cloned();
        let mut inbound = req.into_inner();
        let hello = match tokio::time::timeout(HELLO_TIMEOUT, inbound.message()).await {
            Ok(Ok(Some(WorkerMessage {
                kind: Some(worker_message::Kind::Hello(h)),
                ..
            }))) => h,
            Ok(Ok(_)) => return Err(status::invalid("the first message on a worker stream must be a hello")),
            Ok(Err(s)) => return Err(s),
            Err(_) => return Err(status::invalid("no hello within 10 seconds")),
        };
        let registration = Registration {
            worker_id: hello.worker_id,
            app_name: hello.app_name,
            app_version: hello.app_version,
            sdk: hello.sdk,
            workflow_names: hello.workflow_names,
            step_names: hello.step_names,
            queues: hello.queues,
            key_id: principal.as_ref().map(|p| p.key_id.clone()),
            name_patterns: principal.as_ref().map(|p| p.name_patterns.clone()).unwrap_or_default(),
        };
        check_names(principal.as_deref(), &registration)?;
        let (push_tx, push_rx) = mpsc::channel::<ToWorker>(1024);
        let (out, out_rx) = mpsc::channel(4096);
        let session = engine
            .workers()
            .attach_worker(registration, push_tx)
            .await
            .map_err(status::to_status)?;
        let welcome = v1::Welcome {
            session_id: session.session_id.to_string(),
            heartbeat_interval_ms: engine.config().heartbeat_interval.as_millis() as u32,
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            max_payload_bytes: engine.config().max_payload_bytes as u64,
            max_message_bytes: engine.config().max_worker_message_bytes() as u64,
        };
        let _ = out.send(msg(server_message::Kind::Welcome(welcome))).await;
        let session_for_pushes = session.clone();

        // Stream → engine.
        let clock = engine.clone();
        tokio::spawn(async move {
            let mut tasks = JoinSet::new();
            let key_gone = async move {
                match watch {
                    Some(w) => w.revoked().await,
                    None => std::future::pending().await,
                }
            };
            tokio::pin!(key_gone);
            let mut shutdown = engine.shutdown_signal();
            let mut drain_deadline: Option<tokio::time::Instant> = None;
            let most = engine.config().max_requests_per_stream;
            let mut key_revoked = false;
            loop {
                if drain_deadline.is_some() && tasks.is_empty() {
                    break;
                }
                let received = tokio::select! {
                    // At the cap the stream is not read: the worker's sends wait in HTTP/2 flow
                    // control until a request finishes.
                    m = inbound.message(), if tasks.len() < most => m,
                    Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
                    _ = shutdown.wait_for(|v| *v), if drain_deadline.is_none() => {
                        drain_deadline = Some(tokio::time::Instant::now() + engine.config().drain_timeout);
                        continue;
                    }
                    _ = tokio::time::sleep_until(drain_deadline.unwrap_or_else(tokio::time::Instant::now)), if drain_deadline.is_some() => break,
                    _ = &mut key_gone => {
                        key_revoked = true;
                        break;
                    }
                };
                match received {
                    Ok(Some(WorkerMessage {
                        kind: Some(worker_message::Kind::Batch(b)),
                        ..
                    })) => {
                        // In order, each as if it had come alone; nothing nested. A batch counts
                        // against the cap message by message.
                        for m in b.messages {
                            while tasks.len() >= most {
                                tasks.join_next().await;
                            }
                            match m.kind {
                                Some(worker_message::Kind::Batch(_)) | None => {}
                                Some(kind) => accept(&engine, &session, &out, &mut tasks, m.request_id, kind),
                            }
                        }
                    }
                    Ok(Some(WorkerMessage {
                        request_id,
                        kind: Some(kind),
                    })) => {
                        accept(&engine, &session, &out, &mut tasks, request_id, kind);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => break,
                }
            }
            if key_revoked {
                tracing::info!(key_id = ?session.registration.key_id, worker_id = %session.registration.worker_id,
                    "the stream's key was revoked or expired; closing it");
                let _ = out.send(Err(status::to_status(unauthenticated()))).await;
            }
            tasks.shutdown().await;
            engine.workers().detach_worker(&session).await;
        });

        // Replies and the engine's pushes go out as one stream, the pushes converted as the
        // transport polls for them: a dispatch or a wakeup reaches the socket without passing
        // through a task of its own. It ends when the session is dropped everywhere and the
        // inbound side is done.
        // Weak: the stream must not keep its own session alive (the session holds the channel
        // this stream reads, which would then never close).
        let noted = Arc::downgrade(&session_for_pushes);
        let pushes = ReceiverStream::new(push_rx).map(move |p| {
            // Numbered here, in the order the worker will receive them, so its heartbeats'
            // dispatch count says exactly which dispatches it had seen.
            match (&p, noted.upgrade()) {
                (ToWorker::Dispatch(w), Some(s)) => s.note_dispatched(&w.workflow.workflow_id, w.workflow.epoch),
                (ToWorker::DispatchStep(t), Some(s)) if crate::telemetry::exporting() => s.served_steps.note(t),
                _ => {}
            }
            msg(pushes::pushed(p, clock.now_ms()))
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(out_rx).merge(pushes))))
    }
}

/// Takes one message off a worker's stream: credits at once (they only count), anything else
/// handled on a task of its own, so a slow request does not hold up the stream.
fn accept(
    engine: &Arc<Engine>,
    session: &Arc<WorkerSession>,
    out: &mpsc::Sender<Result<ServerMessage, Status>>,
    tasks: &mut JoinSet<()>,
    request_id: u64,
    kind: worker_message::Kind,
) {
    if let worker_message::Kind::Credit(c) = &kind {
        engine.workers().grant_credits(session, c.workflows, c.steps);
        return;
    }
    tasks.spawn(route::handle(
        engine.clone(),
        session.clone(),
        out.clone(),
        request_id,
        kind,
    ));
}
