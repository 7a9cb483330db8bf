//! One request off a worker's stream, to the command that handles it, and its reply back.
//!
//! [`commands!`] below is the one list of the stream's commands: a request kind is registered
//! there and nowhere else. Its routing, its metrics (here) and its span (`span.rs`) come from
//! that list and the [`Command`] each implements in its own file.

use std::sync::Arc;

use tokio::sync::mpsc;
use tonic::Status;
use tracing::Instrument;
use waymark_proto::v1::{self, server_message, worker_message, worker_message::Kind, ServerMessage};

use super::span;
use crate::{
    api::status,
    engine::{Engine, Held, WorkerSession},
    ops::{command, About, Answer, Command},
    telemetry::metrics,
};

/// Every command of the worker stream, by its `WorkerMessage` kind. The match arms it makes
/// are exhaustive: a kind added to the wire fails to compile until it is listed here (or, if it
/// is not a command, beside `Hello`, `Credit`, `Heartbeat` and `Batch`).
macro_rules! commands {
    ($($kind:ident),* $(,)?) => {
        /// A command's full name (`waymark.v1.WorkerService/RecordStep`) and what it is about;
        /// `None` for a message that is not a command.
        pub(super) fn about(kind: &Kind) -> Option<(&'static str, About<'_>)> {
            match kind {
                $(Kind::$kind(m) => Some((concat!("waymark.v1.WorkerService/", stringify!($kind)), m.about())),)*
                Kind::Hello(_) | Kind::Credit(_) | Kind::Heartbeat(_) | Kind::Batch(_) => None,
            }
        }

        /// Runs the command `kind` is; its name and answer, or `None` for a message that is
        /// not a command.
        async fn apply(engine: &Engine, session: &Arc<WorkerSession>, kind: Kind) -> Option<(&'static str, Answer)> {
            match kind {
                $(Kind::$kind(m) => Some((stringify!($kind), m.apply(engine, session).await)),)*
                Kind::Hello(_) | Kind::Credit(_) | Kind::Heartbeat(_) | Kind::Batch(_) => None,
            }
        }
    };
}

commands!(
    RecordStep,
    CompleteWorkflow,
    SendMessage,
    Recv,
    SetEvent,
    GetEvent,
    WriteStream,
    StartChild,
    AwaitChild,
    Park,
    CallStep,
    StepResult,
    Select,
);

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
    if let Kind::Heartbeat(h) = kind {
        // Answered by nothing: a heartbeat only counts.
        let held = h.reports_held.then_some(Held {
            workflow_ids: h.held_workflow_ids,
            dispatches_received: h.dispatches_received,
        });
        if let Err(err) = engine.workers().heartbeat(&session, held).await {
            tracing::warn!(error = %err, "heartbeat not recorded");
        }
        return;
    }
    // Credits and batches are taken apart before handling; a hello counts only first.
    let began = std::time::Instant::now();
    let Some((command, answer)) = apply(&engine, &session, kind).await else {
        return;
    };
    let labels = metrics::CommandLabels {
        command,
        code: answer.as_ref().map_or_else(|e| status::code_name(e.code), |_| "Ok"),
    };
    let m = metrics::metrics();
    m.worker_commands.get_or_create(&labels).inc();
    m.worker_command_duration
        .get_or_create(&labels)
        .observe(began.elapsed().as_secs_f64());
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
