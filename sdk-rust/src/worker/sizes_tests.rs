//! Sizes agree with the server's: an output over the payload limit fails (the step, or the
//! workflow) instead of travelling, and a completion too big with its held records aboard sends
//! them first. Against a connection the test answers by hand.

use std::{sync::Arc, time::Duration};

use tokio::sync::mpsc;
use waymark_proto::v1::{self, reply, worker_message, WorkerMessage};

use super::{
    conn::Limits,
    context::WorkflowContext,
    fake::{answer_all, dispatch, fake_conn_with, recorded},
    session,
};
use crate::{Worker, WorkflowError};

const LIMITS: Limits = Limits {
    payload: 1_000,
    message: 2_500,
};

fn big(n: usize) -> String {
    "x".repeat(n)
}

/// Runs `worker`'s workflow "flow" against a fake that acknowledges everything; returns every
/// message the run sent, once it has ended.
async fn run(worker: Worker) -> Vec<WorkerMessage> {
    let (conn, requests) = fake_conn_with(Duration::from_secs(5), LIMITS);
    let (done_tx, mut done_rx) = mpsc::unbounded_channel();
    let _run = session::start(&worker.config, conn.clone(), dispatch(), done_tx);
    let (answering, sent) = answer_all(&conn, requests, |m| match &m.kind {
        Some(worker_message::Kind::CompleteWorkflow(_)) => {
            reply::Result::WorkflowCompleted(v1::WorkflowCompleted::default())
        }
        _ => recorded(),
    });
    done_rx.recv().await.expect("the run ends");
    answering.abort();
    let sent = sent.lock().unwrap().clone();
    sent
}

fn completion(sent: &[WorkerMessage]) -> &v1::CompleteWorkflow {
    match sent.last().and_then(|m| m.kind.as_ref()) {
        Some(worker_message::Kind::CompleteWorkflow(c)) => c,
        other => panic!("the last message is not a completion: {other:?}"),
    }
}

#[tokio::test]
async fn an_output_over_the_limit_fails_the_workflow_with_payload_too_large() {
    let worker = Worker::builder()
        .workflow("flow", |_ctx: WorkflowContext, _: serde_json::Value| async move {
            Ok(big(2_000))
        })
        .build();
    let sent = run(worker).await;
    match &completion(&sent).outcome {
        Some(v1::complete_workflow::Outcome::Failure(f)) => {
            assert_eq!(f.kind, "PAYLOAD_TOO_LARGE");
            assert!(f.message.contains("2002 bytes"), "{}", f.message);
        }
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_step_output_over_the_limit_is_a_recorded_step_failure() {
    let worker = Worker::builder()
        .workflow("flow", |ctx: WorkflowContext, _: serde_json::Value| async move {
            let got = ctx.step("huge", || async { Ok::<_, String>(big(2_000)) }).await;
            match got {
                Err(WorkflowError::Step { message, .. }) => Ok(format!("caught: {message}")),
                other => Ok(format!("unexpected: {other:?}")),
            }
        })
        .build();
    let sent = run(worker).await;
    let c = completion(&sent);
    match &c.outcome {
        Some(v1::complete_workflow::Outcome::Output(_)) => {}
        other => panic!("the workflow caught the step's failure and finished: {other:?}"),
    }
    assert_eq!(c.steps.len(), 1);
    match &c.steps[0].outcome {
        Some(v1::record_step::Outcome::Failure(f)) => assert_eq!(f.kind, "PAYLOAD_TOO_LARGE"),
        other => panic!("the step is recorded as failed: {other:?}"),
    }
}

#[tokio::test]
async fn a_completion_too_big_with_its_records_sends_them_first() {
    let worker = Worker::builder()
        .workflow("flow", |ctx: WorkflowContext, _: serde_json::Value| async move {
            // Three steps of 900 bytes each, run together so all three records are still held
            // at the end; with the output, far over 2,500.
            // (a barrier, so none finishes before all three have started)
            let all_started = Arc::new(tokio::sync::Barrier::new(3));
            let step = |name: &'static str| {
                let all_started = all_started.clone();
                ctx.step(name, move || {
                    let all_started = all_started.clone();
                    async move {
                        all_started.wait().await;
                        Ok::<_, String>(big(900))
                    }
                })
            };
            let (a, b, c) = tokio::join!(step("s0"), step("s1"), step("s2"));
            for r in [a, b, c] {
                r?;
            }
            Ok(big(900))
        })
        .build();
    let sent = run(worker).await;
    for m in &sent {
        assert!(
            prost::Message::encoded_len(m) <= LIMITS.message,
            "a message of {} bytes",
            prost::Message::encoded_len(m)
        );
    }
    let records: Vec<u32> = sent
        .iter()
        .filter_map(|m| match &m.kind {
            Some(worker_message::Kind::RecordStep(r)) => Some(r.step_id),
            _ => None,
        })
        .collect();
    assert_eq!(records.len(), 3, "every held record went on its own: {records:?}");
    let c = completion(&sent);
    assert!(c.steps.is_empty(), "the completion carries none of them");
    assert!(matches!(c.outcome, Some(v1::complete_workflow::Outcome::Output(_))));
}
