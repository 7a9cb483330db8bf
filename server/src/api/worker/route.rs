//! One request off a worker's stream, to the command that handles it, and its reply back.

use std::sync::Arc;

use tokio::sync::mpsc;
use tonic::Status;
use tracing::Instrument;
use waymark_proto::v1::{self, server_message, worker_message, ServerMessage};

use super::{children, command, complete, events, messages, park, record_step, remote_steps, span, write_stream};
use crate::engine::{Engine, Held, WorkerSession};

/// Handles one request and sends its reply (when it has a request id to answer to), in a span
/// of its own when spans are exported (see [`span`]).
pub async fn handle(
    engine: Arc<Engine>,
    session: Arc<WorkerSession>,
    out: mpsc::Sender<Result<ServerMessage, Status>>,
    request_id: u64,
    kind: worker_message::Kind,
) {
    match span::for_message(&session, &kind) {
        Some(span) => answer(engine, session, out, request_id, kind).instrument(span).await,
        None => answer(engine, session, out, request_id, kind).await,
    }
}

async fn answer(
    engine: Arc<Engine>,
    session: Arc<WorkerSession>,
    out: mpsc::Sender<Result<ServerMessage, Status>>,
    request_id: u64,
    kind: worker_message::Kind,
) {
    use worker_message::Kind;
    let (e, s) = (&*engine, &session);
    let answer = match kind {
        Kind::RecordStep(r) => record_step::apply(e, s, r).await,
        Kind::CompleteWorkflow(c) => complete::apply(e, s, c).await,
        Kind::SendMessage(m) => messages::send(e, s, m).await,
        Kind::Recv(r) => messages::recv(e, s, r).await,
        Kind::SetEvent(v) => events::set(e, s, v).await,
        Kind::GetEvent(g) => events::get(e, s, g).await,
        Kind::WriteStream(w) => write_stream::apply(e, s, w).await,
        Kind::StartChild(c) => children::start(e, s, c).await,
        Kind::AwaitChild(a) => children::wait(e, s, a).await,
        Kind::Park(p) => park::apply(e, s, p).await,
        Kind::CallStep(c) => remote_steps::call(e, s, c).await,
        Kind::StepResult(r) => remote_steps::result(e, s, r).await,
        Kind::Select(x) => remote_steps::select(e, s, x).await,
        Kind::Heartbeat(h) => {
            // Answered by nothing: a heartbeat only counts.
            let held = h.reports_held.then_some(Held {
                workflow_ids: h.held_workflow_ids,
                dispatches_received: h.dispatches_received,
            });
            if let Err(err) = engine.heartbeat(s, held).await {
                tracing::warn!(error = %err, "heartbeat not recorded");
            }
            return;
        }
        // Credits and batches are taken apart before handling; a hello counts only first.
        Kind::Credit(_) | Kind::Hello(_) | Kind::Batch(_) => return,
    };
    if answer.is_err() {
        tracing::Span::current().record("otel.status_code", "ERROR");
    }
    if request_id != 0 {
        let result = answer.unwrap_or_else(command::reply_error);
        let reply = server_message::Kind::Reply(v1::Reply {
            request_id,
            result: Some(result),
        });
        let _ = out.send(Ok(ServerMessage { kind: Some(reply) })).await;
    }
}
