//! `waymark.v1.WorkerService/Connect`: one task reads the worker's messages and runs each request
//! on its own task (so many workflows' checkpoints are in flight together); a second task turns
//! the engine's pushes (dispatch, cancel, drain) into stream messages.

use std::{pin::Pin, sync::Arc, time::Duration};

use tokio::{sync::mpsc, task::JoinSet};
use tokio_stream::{wrappers::ReceiverStream, Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};
use waymark_proto::v1::{
    self, reply, server_message, worker_message, worker_service_server::WorkerService, ServerMessage, WorkerMessage,
};
use waymark_store::{Completed, Fence, NewStep, Outcome, Received};

use super::{convert, status, worker_steps};
use crate::engine::{children::ChildRequest, Engine, EngineError, Registration, ToWorker, WorkerSession};

pub struct WorkerApi {
    pub engine: Arc<Engine>,
}

type Outbound = mpsc::Sender<Result<ServerMessage, Status>>;

/// How long a new stream may take to say hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

fn msg(kind: server_message::Kind) -> Result<ServerMessage, Status> {
    Ok(ServerMessage { kind: Some(kind) })
}

fn reply_error(e: EngineError) -> reply::Result {
    reply::Result::Error(v1::ReplyError {
        code: status::code(e.code) as i32,
        reason: e.reason.to_string(),
        message: e.message,
    })
}

fn outcome(output: Option<&v1::Payload>, failure: Option<&v1::Failure>, field: &str) -> Result<Outcome, EngineError> {
    match failure {
        Some(f) => Ok(Outcome::Failure(convert::failure_from_wire(f))),
        None => convert::payload_text(field, output)
            .map(Outcome::Output)
            .map_err(|s| EngineError::invalid(s.message().to_string())),
    }
}

/// A step checkpoint from the wire (its fence is taken from the request that carries it).
fn new_step(r: v1::RecordStep) -> Result<NewStep, EngineError> {
    let (output, failure) = match r.outcome {
        Some(v1::record_step::Outcome::Output(p)) => (Some(p), None),
        Some(v1::record_step::Outcome::Failure(f)) => (None, Some(f)),
        None => (None, None),
    };
    Ok(NewStep {
        step_id: r.step_id,
        name: r.name,
        outcome: outcome(output.as_ref(), failure.as_ref(), "step output")?,
        attempts: r.attempts.max(1),
    })
}

fn completed(c: Completed) -> v1::WorkflowCompleted {
    let wire = convert::workflow(c.workflow);
    v1::WorkflowCompleted {
        status: wire.status,
        output: wire.output,
        failure: wire.failure,
        adopted: c.adopted,
    }
}

fn dispatch(w: waymark_store::ClaimedWorkflow) -> server_message::Kind {
    let wf = w.workflow;
    server_message::Kind::DispatchWorkflow(v1::DispatchWorkflow {
        input: convert::payload(&wf.input),
        steps: w.steps.into_iter().map(convert::step).collect(),
        app_version: wf.app_version.unwrap_or_default(),
        recovery_attempts: wf.recovery_attempts,
        created_at: convert::timestamp(wf.created_at),
        epoch: wf.epoch,
        workflow_id: wf.workflow_id,
        workflow_name: wf.workflow_name,
    })
}

/// A wait's result as the wire's outcome and value.
fn wait_outcome(r: Received) -> (v1::recv_result::Outcome, Option<v1::Payload>) {
    use v1::recv_result::Outcome as O;
    match r {
        Received::Delivered(p) => (O::Delivered, convert::payload(&p)),
        Received::TimedOut => (O::TimedOut, None),
        Received::Waiting => (O::Waiting, None),
    }
}

async fn handle(
    engine: Arc<Engine>,
    session: Arc<WorkerSession>,
    out: Outbound,
    request_id: u64,
    kind: worker_message::Kind,
) {
    use worker_message::Kind;
    let result = match kind {
        Kind::RecordStep(mut r) => {
            let fence = Fence {
                workflow_id: std::mem::take(&mut r.workflow_id),
                epoch: r.epoch,
            };
            match new_step(r) {
                Ok(step) => match engine.record_step(&session, fence, step).await {
                    Ok(_) => reply::Result::StepRecorded(v1::StepRecorded {}),
                    Err(e) => reply_error(e),
                },
                Err(e) => reply_error(e),
            }
        }
        Kind::CompleteWorkflow(c) => {
            let fence = Fence {
                workflow_id: c.workflow_id,
                epoch: c.epoch,
            };
            let (output, failure) = match c.outcome {
                Some(v1::complete_workflow::Outcome::Output(p)) => (Some(p), None),
                Some(v1::complete_workflow::Outcome::Failure(f)) => (None, Some(f)),
                None => (None, None),
            };
            let steps = c.steps.into_iter().map(new_step).collect::<Result<Vec<NewStep>, _>>();
            match outcome(output.as_ref(), failure.as_ref(), "workflow output").and_then(|o| steps.map(|s| (o, s))) {
                Ok((outcome, steps)) => match engine.complete_workflow(&session, fence, steps, outcome).await {
                    Ok(c) => reply::Result::WorkflowCompleted(completed(c)),
                    Err(e) => reply_error(e),
                },
                Err(e) => reply_error(e),
            }
        }
        Kind::SendMessage(m) => {
            let fence = Fence {
                workflow_id: m.workflow_id,
                epoch: m.epoch,
            };
            match convert::payload_text("message", m.message.as_ref()) {
                Ok(message) => match engine
                    .send_message_step(&session, fence, m.step_id, m.destination_id, m.topic, message)
                    .await
                {
                    Ok(message_id) => reply::Result::MessageSent(v1::MessageSent { message_id }),
                    Err(e) => reply_error(e),
                },
                Err(s) => reply_error(EngineError::invalid(s.message().to_string())),
            }
        }
        Kind::Recv(r) => {
            let fence = Fence {
                workflow_id: r.workflow_id,
                epoch: r.epoch,
            };
            match engine.recv(&session, fence, r.step_id, r.topic, r.deadline_ms).await {
                Ok(received) => {
                    let (outcome, message) = wait_outcome(received);
                    reply::Result::RecvResult(v1::RecvResult {
                        outcome: outcome as i32,
                        message,
                        server_now_ms: engine.now_ms(),
                    })
                }
                Err(e) => reply_error(e),
            }
        }
        Kind::SetEvent(e) => {
            let fence = Fence {
                workflow_id: e.workflow_id,
                epoch: e.epoch,
            };
            match convert::payload_text("event value", e.value.as_ref()) {
                Ok(value) => match engine.set_event(&session, fence, e.step_id, e.key, value).await {
                    Ok(()) => reply::Result::StepRecorded(v1::StepRecorded {}),
                    Err(e) => reply_error(e),
                },
                Err(s) => reply_error(EngineError::invalid(s.message().to_string())),
            }
        }
        Kind::GetEvent(g) => {
            let fence = Fence {
                workflow_id: g.workflow_id,
                epoch: g.epoch,
            };
            match engine
                .get_event_step(&session, fence, g.step_id, g.target_workflow_id, g.key, g.deadline_ms)
                .await
            {
                Ok(received) => {
                    let (outcome, value) = wait_outcome(received);
                    reply::Result::EventResult(v1::EventResult {
                        outcome: outcome as i32,
                        value,
                        server_now_ms: engine.now_ms(),
                    })
                }
                Err(e) => reply_error(e),
            }
        }
        Kind::WriteStream(w) => {
            let fence = Fence {
                workflow_id: w.workflow_id,
                epoch: w.epoch,
            };
            let value = if w.close {
                Ok(None)
            } else {
                convert::payload_text("stream value", w.value.as_ref()).map(Some)
            };
            match value {
                Ok(value) => match engine.write_stream(&session, fence, w.step_id, w.key, value).await {
                    Ok(offset) => reply::Result::StreamWritten(v1::StreamWritten { offset }),
                    Err(e) => reply_error(e),
                },
                Err(s) => reply_error(EngineError::invalid(s.message().to_string())),
            }
        }
        Kind::StartChild(c) => {
            let fence = Fence {
                workflow_id: c.workflow_id,
                epoch: c.epoch,
            };
            match convert::payload_text("child input", c.input.as_ref()) {
                Ok(input) => {
                    let req = ChildRequest {
                        workflow_name: c.workflow_name,
                        child_workflow_id: c.child_workflow_id,
                        input,
                        queue_name: c.queue_name,
                    };
                    match engine.start_child(&session, fence, c.step_id, req).await {
                        Ok(child_workflow_id) => reply::Result::ChildStarted(v1::ChildStarted { child_workflow_id }),
                        Err(e) => reply_error(e),
                    }
                }
                Err(s) => reply_error(EngineError::invalid(s.message().to_string())),
            }
        }
        Kind::AwaitChild(a) => {
            let fence = Fence {
                workflow_id: a.workflow_id,
                epoch: a.epoch,
            };
            use v1::recv_result::Outcome as O;
            match engine
                .await_child(&session, fence, a.step_id, a.child_workflow_id)
                .await
            {
                Ok(None) => reply::Result::ChildResult(v1::ChildResult {
                    outcome: O::Waiting as i32,
                    ..Default::default()
                }),
                Ok(Some(done)) => reply::Result::ChildResult(v1::ChildResult {
                    outcome: O::Delivered as i32,
                    status: convert::status_to_wire(done.status) as i32,
                    output: done.output.as_deref().and_then(convert::payload),
                    failure: done.failure.as_ref().map(convert::failure_to_wire),
                }),
                Err(e) => reply_error(e),
            }
        }
        Kind::Park(p) => {
            let fence = Fence {
                workflow_id: p.workflow_id,
                epoch: p.epoch,
            };
            let on = match p.on {
                Some(v1::park::On::Topic(topic)) => waymark_store::ParkedOn::Message(topic),
                Some(v1::park::On::Event(e)) => waymark_store::ParkedOn::Event {
                    workflow_id: e.workflow_id,
                    key: e.key,
                },
                Some(v1::park::On::Step(step_id)) => waymark_store::ParkedOn::Step(step_id),
                Some(v1::park::On::AwaitedWorkflowId(id)) => waymark_store::ParkedOn::Workflow(id),
                Some(v1::park::On::Timer(_)) | None => waymark_store::ParkedOn::Timer,
            };
            match engine.park(&session, fence, p.step_id, p.wake_at_ms, on).await {
                Ok(parked) => reply::Result::Parked(v1::Parked { parked }),
                Err(e) => reply_error(e),
            }
        }
        Kind::CallStep(c) => worker_steps::call_step(&engine, &session, c)
            .await
            .unwrap_or_else(reply_error),
        Kind::StepResult(r) => worker_steps::step_result(&engine, &session, r)
            .await
            .unwrap_or_else(reply_error),
        Kind::Select(s) => worker_steps::select(&engine, &session, s)
            .await
            .unwrap_or_else(reply_error),
        Kind::Heartbeat(h) => {
            let held = h.reports_held.then_some(crate::engine::Held {
                workflow_ids: h.held_workflow_ids,
                dispatches_received: h.dispatches_received,
            });
            if let Err(e) = engine.heartbeat(&session, held).await {
                tracing::warn!(error = %e, "heartbeat not recorded");
            }
            return;
        }
        // Credits and batches are taken apart before handling; a hello counts only first.
        Kind::Credit(_) | Kind::Hello(_) | Kind::Batch(_) => return,
    };
    if request_id != 0 {
        let _ = out
            .send(msg(server_message::Kind::Reply(v1::Reply {
                request_id,
                result: Some(result),
            })))
            .await;
    }
}

#[tonic::async_trait]
impl WorkerService for WorkerApi {
    type ConnectStream = Pin<Box<dyn Stream<Item = Result<ServerMessage, Status>> + Send + 'static>>;

    async fn connect(&self, req: Request<Streaming<WorkerMessage>>) -> Result<Response<Self::ConnectStream>, Status> {
        let engine = self.engine.clone();
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
            app_version: hello.app_version,
            workflow_names: hello.workflow_names,
            step_names: hello.step_names,
            queues: hello.queues,
        };
        let (push_tx, push_rx) = mpsc::channel::<ToWorker>(1024);
        let (out, out_rx) = mpsc::channel(4096);
        let session = engine
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
        tokio::spawn(async move {
            let mut tasks = JoinSet::new();
            let mut shutdown = engine.shutdown_signal();
            let mut drain_deadline: Option<tokio::time::Instant> = None;
            let most = engine.config().max_requests_per_stream;
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
            tasks.shutdown().await;
            engine.detach_worker(&session).await;
        });

        // Replies and the engine's pushes go out as one stream, the pushes converted as the
        // transport polls for them: a dispatch or a wakeup reaches the socket without passing
        // through a task of its own. It ends when the session is dropped everywhere and the
        // inbound side is done.
        let clock = self.engine.clone();
        // Weak: the stream must not keep its own session alive (the session holds the channel
        // this stream reads, which would then never close).
        let noted = Arc::downgrade(&session_for_pushes);
        let pushes = ReceiverStream::new(push_rx).map(move |p| {
            // Numbered here, in the order the worker will receive them, so its heartbeats'
            // dispatch count says exactly which dispatches it had seen.
            if let (ToWorker::Dispatch(w), Some(s)) = (&p, noted.upgrade()) {
                s.note_dispatched(&w.workflow.workflow_id, w.workflow.epoch);
            }
            msg(pushed(p, clock.now_ms()))
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
        engine.grant_credits(session, c.workflows, c.steps);
        return;
    }
    tasks.spawn(handle(engine.clone(), session.clone(), out.clone(), request_id, kind));
}

/// What the engine pushes, as the message the worker gets.
fn pushed(p: ToWorker, now_ms: i64) -> server_message::Kind {
    match p {
        ToWorker::Dispatch(w) => dispatch(*w),
        ToWorker::DispatchStep(t) => worker_steps::dispatch(*t),
        ToWorker::Cancel(id) => server_message::Kind::Cancel(v1::Cancel { workflow_id: id }),
        ToWorker::Drain => server_message::Kind::Drain(v1::Drain {}),
        ToWorker::Wakeup { workflow_id, step_id } => server_message::Kind::Wakeup(v1::Wakeup {
            workflow_id,
            step_id,
            recv: None,
        }),
        ToWorker::Delivered {
            workflow_id,
            step_id,
            message,
        } => server_message::Kind::Wakeup(v1::Wakeup {
            workflow_id,
            step_id,
            recv: Some(v1::RecvResult {
                outcome: v1::recv_result::Outcome::Delivered as i32,
                message: convert::payload(&message),
                server_now_ms: now_ms,
            }),
        }),
    }
}
