//! One stream to the server: hello, credits, heartbeats, dispatches, and request/reply
//! correlation. When it ends, every workflow it was running is dropped; the server hands them
//! out again (to this worker when it reconnects, or to another).

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use waymark_proto::{
    json,
    v1::{self, reply, server_message, worker_message, worker_service_client::WorkerServiceClient, WorkerMessage},
};

use super::{
    conn::{Conn, Limits},
    context::WorkflowContext,
    WorkerConfig,
};
use crate::{Error, WorkflowError};

/// Workflows running on this stream.
pub(crate) struct Running {
    /// The epoch of the dispatch this run serves.
    epoch: u64,
    cancelled: Arc<AtomicBool>,
    /// Rung when the server says a wait may be over, and on cancel.
    wakeup: Arc<tokio::sync::Notify>,
    /// Receives the server completed itself and pushed with their wakeup, by step.
    delivered: super::context::Deliveries,
    task: tokio::task::AbortHandle,
}

/// Aborts whatever still runs when the stream is left, however it is left.
struct AbortAll(HashMap<String, Running>);

impl Drop for AbortAll {
    fn drop(&mut self) {
        for (_, r) in self.0.drain() {
            r.task.abort();
        }
    }
}

pub(crate) async fn run(config: Arc<WorkerConfig>) -> Result<(), Error> {
    let channel = config.connect.connect().await?;
    let mut client = WorkerServiceClient::new(channel).max_decoding_message_size(256 * 1024 * 1024);
    let (tx, rx) = mpsc::channel::<WorkerMessage>(4096);
    let hello = v1::Hello {
        worker_id: config.worker_id.clone(),
        app_name: config.app_name.clone(),
        app_version: config.app_version.clone(),
        workflow_names: config.workflows.keys().cloned().collect(),
        step_names: config.steps.keys().cloned().collect(),
        queues: config.queues.clone(),
        sdk: format!("rust/{}", env!("CARGO_PKG_VERSION")),
    };
    let _ = tx
        .send(WorkerMessage {
            request_id: 0,
            kind: Some(worker_message::Kind::Hello(hello)),
        })
        .await;
    let mut inbound = client.connect(ReceiverStream::new(rx)).await?.into_inner();
    let welcome = match inbound.message().await? {
        Some(v1::ServerMessage {
            kind: Some(server_message::Kind::Welcome(w)),
        }) => w,
        _ => return Err(Error::Transport("the server did not welcome this worker".into())),
    };
    tracing::info!(worker_id = %config.worker_id, session = %welcome.session_id, "connected to Waymark");
    let conn = Arc::new(Conn::new(tx, config.resend_for, Limits::from_welcome(&welcome)));
    let step_credits = if config.steps.is_empty() {
        0
    } else {
        config.max_concurrent_steps
    };
    conn.send(worker_message::Kind::Credit(v1::Credit {
        workflows: config.max_concurrent_workflows,
        steps: step_credits,
    }))
    .await;
    // Remote step attempts in flight; dropped (aborted) with the stream, like workflows: the
    // server times them out and dispatches them again.
    let mut step_runs = tokio::task::JoinSet::new();

    let mut heartbeat = tokio::time::interval(Duration::from_millis(welcome.heartbeat_interval_ms.max(100) as u64));
    let mut running = AbortAll(HashMap::new());
    // Dispatches taken off this stream, reported with each heartbeat beside what is still held,
    // so the server can tell a workflow this worker lost from one still on its way here.
    let mut dispatches_received = 0u64;
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, u64)>();
    loop {
        tokio::select! {
            m = inbound.message() => {
                let kind = match m {
                    Ok(Some(v1::ServerMessage { kind: Some(k) })) => k,
                    Ok(Some(_)) => continue,
                    Ok(None) => return Err(Error::Transport("the server closed the worker stream".into())),
                    Err(s) => return Err(s.into()),
                };
                match kind {
                    server_message::Kind::Reply(r) => conn.resolve(r),
                    server_message::Kind::DispatchWorkflow(d) => {
                        let id = d.workflow_id.clone();
                        if let Some(old) = running.0.remove(&id) {
                            // Dispatched again (the server took it back meanwhile): the old run is
                            // stale. Each dispatch spent a credit; the aborted run will never hand
                            // its own back, so it is returned here — else every re-dispatch would
                            // shrink this worker's room for good.
                            old.task.abort();
                            conn.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 })).await;
                        }
                        let r = start(&config, conn.clone(), d, done_tx.clone());
                        running.0.insert(id, r);
                        dispatches_received += 1;
                    }
                    server_message::Kind::Cancel(c) => {
                        if let Some(r) = running.0.get(&c.workflow_id) {
                            r.cancelled.store(true, Ordering::SeqCst);
                            r.wakeup.notify_one();
                        }
                    }
                    server_message::Kind::Wakeup(w) => {
                        if let Some(r) = running.0.get(&w.workflow_id) {
                            if let Some(recv) = w.recv.filter(|r| r.outcome == v1::recv_result::Outcome::Delivered as i32) {
                                r.delivered.lock().unwrap().insert(w.step_id, recv.message.unwrap_or_default());
                            }
                            r.wakeup.notify_one();
                        }
                    }
                    server_message::Kind::DispatchStep(d) => {
                        step_runs.spawn(run_step(config.clone(), conn.clone(), d));
                    }
                    server_message::Kind::Drain(_) => tracing::info!("server is draining; will reconnect when it closes the stream"),
                    server_message::Kind::Welcome(_) => {}
                }
            }
            _ = heartbeat.tick() => {
                conn.send(worker_message::Kind::Heartbeat(heartbeat_of(&running, dispatches_received))).await;
            }
            Some((id, epoch)) = done_rx.recv() => {
                // Only the run that ended leaves: a newer dispatch of the same workflow may have
                // replaced it (its credit was returned then).
                if running.0.get(&id).is_some_and(|r| r.epoch == epoch) {
                    running.0.remove(&id);
                    conn.send(worker_message::Kind::Credit(v1::Credit { workflows: 1, steps: 0 })).await;
                }
            }
            Some(_) = step_runs.join_next(), if !step_runs.is_empty() => {
                conn.send(worker_message::Kind::Credit(v1::Credit { workflows: 0, steps: 1 })).await;
            }
        }
    }
}

/// A heartbeat listing the workflows this stream still holds: a run whose task has ended
/// without reporting (it panicked, or was lost) is not held, so the server takes it back.
fn heartbeat_of(running: &AbortAll, dispatches_received: u64) -> v1::Heartbeat {
    v1::Heartbeat {
        reports_held: true,
        held_workflow_ids: running
            .0
            .iter()
            .filter(|(_, r)| !r.task.is_finished())
            .map(|(id, _)| id.clone())
            .collect(),
        dispatches_received,
    }
}

/// Runs one dispatched workflow on its own task.
pub(crate) fn start(
    config: &WorkerConfig,
    conn: Arc<Conn>,
    d: v1::DispatchWorkflow,
    done: mpsc::UnboundedSender<(String, u64)>,
) -> Running {
    let cancelled = Arc::new(AtomicBool::new(false));
    let wakeup = Arc::new(tokio::sync::Notify::new());
    let delivered = super::context::Deliveries::default();
    let records = Arc::new(super::records::Records::default());
    let f = config.workflows.get(&d.workflow_name).cloned();
    let span = crate::tracing_ctx::workflow(&d);
    let ctx = WorkflowContext::new(
        &d,
        conn.clone(),
        cancelled.clone(),
        wakeup.clone(),
        delivered.clone(),
        records.clone(),
        config.park_after,
    )
    .traced(span.clone());
    let (workflow_id, epoch) = (d.workflow_id.clone(), d.epoch);
    let input = json::from_payload(d.input.as_ref());
    let task = tokio::spawn(async move {
        let result = match (f, input) {
            (None, _) => Err(WorkflowError::failed(
                "UnknownWorkflow",
                format!("this worker has no workflow named {:?}", d.workflow_name),
            )),
            (_, Err(e)) => Err(WorkflowError::Serialization(e.to_string())),
            // The workflow's own spans, if it makes any, hang under its run's.
            (Some(f), Ok(input)) => opentelemetry::context::FutureExt::with_context(f(ctx, input), span.clone()).await,
        };
        let failed = match &result {
            Err(WorkflowError::ContinueAsNew(_)) => None,
            Err(e) if !e.is_interruption() => Some(e.to_string()),
            _ => None,
        };
        crate::tracing_ctx::end(&span, failed);
        let outcome = match result.and_then(|v| conn.limits.payload("the workflow's output", &v)) {
            Ok(p) => Some(v1::complete_workflow::Outcome::Output(p)),
            Err(WorkflowError::ContinueAsNew(next)) => Some(match conn.limits.payload("the next run's input", &next) {
                Ok(p) => v1::complete_workflow::Outcome::ContinueAsNew(v1::ContinueAsNew { input: Some(p) }),
                Err(e) => v1::complete_workflow::Outcome::Failure(v1::Failure {
                    kind: e.kind(),
                    message: e.to_string(),
                }),
            }),
            Err(e) if e.is_interruption() => {
                tracing::info!(%workflow_id, reason = %e, "workflow run stopped");
                None
            }
            Err(e) => Some(v1::complete_workflow::Outcome::Failure(v1::Failure {
                kind: e.kind(),
                message: e.to_string(),
            })),
        };
        // A run that was let go sends nothing more, whatever its function returned: one of
        // its records may not be durable, and the server dispatches it again.
        if records.is_dropped() {
            tracing::info!(%workflow_id, "run let go without completing; the server dispatches it again");
            let _ = done.send((workflow_id, epoch));
            return;
        }
        // The step records the run held back go with the completion, or on their own when the
        // run stopped without one (cancelled), so no finished step is run again.
        let held = records.take();
        if outcome.is_none() {
            for r in held.iter().cloned() {
                let _ = conn.request_resending(worker_message::Kind::RecordStep(r)).await;
            }
        }
        if let Some(outcome) = outcome {
            let mut req = v1::CompleteWorkflow {
                workflow_id: workflow_id.clone(),
                epoch,
                outcome: Some(outcome),
                steps: held,
            };
            // Too big with its held records aboard: they go first, on their own, and the
            // completion follows once they are durable.
            if prost::Message::encoded_len(&req) > conn.limits.message {
                let ahead = std::mem::take(&mut req.steps);
                let sends = ahead
                    .into_iter()
                    .map(|r| conn.request_resending(worker_message::Kind::RecordStep(r)));
                let acked = futures::future::join_all(sends)
                    .await
                    .into_iter()
                    .all(|r| matches!(r, Ok(reply::Result::StepRecorded(_))));
                if !acked {
                    tracing::info!(%workflow_id, "a held step record was not taken; the run ends without completing");
                    let _ = done.send((workflow_id, epoch));
                    return;
                }
            }
            match conn
                .request_resending(worker_message::Kind::CompleteWorkflow(req))
                .await
            {
                Ok(reply::Result::Error(e)) => {
                    tracing::info!(%workflow_id, reason = %e.reason, "completion refused: {}", e.message)
                }
                Ok(_) => {}
                // The stream broke, or the server stayed unavailable: this run is let go and the
                // server hands the workflow out again (the heartbeat no longer lists it).
                Err(_) => {}
            }
        }
        let _ = done.send((workflow_id, epoch));
    });
    Running {
        epoch,
        cancelled,
        wakeup,
        delivered,
        task: task.abort_handle(),
    }
}

/// Runs one attempt of a remote step and reports its result. An attempt still running at its
/// deadline is abandoned: the server has failed it already and refuses a late result.
async fn run_step(config: Arc<WorkerConfig>, conn: Arc<Conn>, d: v1::DispatchStep) {
    let f = config.steps.get(&d.step_name).cloned();
    let mut attributes = crate::tracing_ctx::step_attributes(&d.workflow_id, d.step_id, &d.step_name);
    attributes.push(opentelemetry::KeyValue::new("waymark.step.attempt", d.attempt as i64));
    let span = crate::tracing_ctx::open(
        format!("step {}", d.step_name),
        opentelemetry::trace::SpanKind::Consumer,
        &crate::tracing_ctx::parent(d.trace_context.as_ref()),
        attributes,
    );
    let result = match (f, json::from_payload(d.input.as_ref())) {
        (None, _) => Err(format!("this worker has no step named {:?}", d.step_name)),
        (_, Err(e)) => Err(format!("step input is not JSON: {e}")),
        (Some(f), Ok(input)) => {
            let left = d
                .deadline
                .as_ref()
                .map(|t| t.seconds * 1000 + t.nanos as i64 / 1_000_000 - unix_ms())
                .unwrap_or(i64::MAX);
            let run = opentelemetry::context::FutureExt::with_context(f(input), span.clone());
            match tokio::time::timeout(Duration::from_millis(left.max(0) as u64), run).await {
                Ok(r) => r,
                Err(_) => {
                    crate::tracing_ctx::end(&span, Some("the attempt ran past its deadline".into()));
                    return;
                }
            }
        }
    };
    crate::tracing_ctx::end(&span, result.as_ref().err().cloned());
    let outcome = match result {
        Ok(v) => v1::step_result::Outcome::Output(json::to_payload(&v)),
        Err(message) => v1::step_result::Outcome::Failure(v1::Failure {
            kind: "StepFailed".into(),
            message,
        }),
    };
    let req = v1::StepResult {
        workflow_id: d.workflow_id.clone(),
        step_id: d.step_id,
        attempt: d.attempt,
        outcome: Some(outcome),
    };
    match conn.request_resending(worker_message::Kind::StepResult(req)).await {
        Ok(reply::Result::Error(e)) => {
            tracing::info!(workflow_id = %d.workflow_id, step = %d.step_name, reason = %e.reason, "step result refused: {}", e.message)
        }
        Ok(_) => {}
        Err(_) => {
            tracing::debug!(workflow_id = %d.workflow_id, step = %d.step_name, "stream broke before the step result was sent")
        }
    }
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
