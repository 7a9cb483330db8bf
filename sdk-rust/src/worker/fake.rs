//! A connection the test answers by hand, for worker tests that need no server.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::sync::mpsc;
use waymark_proto::v1::{self, reply, worker_message, WorkerMessage};

use super::conn::{Conn, Limits};

pub(crate) fn fake_conn_with(resend_for: Duration, limits: Limits) -> (Arc<Conn>, mpsc::Receiver<WorkerMessage>) {
    let (tx, rx) = mpsc::channel(64);
    (Arc::new(Conn::new(tx, resend_for, limits)), rx)
}

pub(crate) fn dispatch() -> v1::DispatchWorkflow {
    v1::DispatchWorkflow {
        workflow_id: "w".into(),
        workflow_name: "flow".into(),
        epoch: 1,
        ..Default::default()
    }
}

pub(crate) fn fake_conn(resend_for: Duration) -> (Arc<Conn>, mpsc::Receiver<WorkerMessage>) {
    fake_conn_with(resend_for, Limits::default())
}

/// Lets every other task run as far as it can.
pub(crate) async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

pub(crate) fn answer(conn: &Conn, request: &WorkerMessage, result: reply::Result) {
    conn.resolve(v1::Reply {
        request_id: request.request_id,
        result: Some(result),
    });
}

pub(crate) fn unavailable() -> reply::Result {
    reply::Result::Error(v1::ReplyError {
        code: tonic::Code::Unavailable as i32,
        reason: "STORE_UNAVAILABLE".into(),
        message: "the database is unavailable; retry later".into(),
    })
}

pub(crate) fn recorded() -> reply::Result {
    reply::Result::StepRecorded(v1::StepRecorded {})
}

pub(crate) fn step_id(m: &WorkerMessage) -> Option<u32> {
    match &m.kind {
        Some(worker_message::Kind::RecordStep(r)) => Some(r.step_id),
        _ => None,
    }
}

/// Answers every request from now on with what `reply` says for it, keeping a copy of each (in
/// the order sent). Abort the handle when done.
pub(crate) fn answer_all(
    conn: &Arc<Conn>,
    mut requests: mpsc::Receiver<WorkerMessage>,
    reply: impl Fn(&WorkerMessage) -> reply::Result + Send + 'static,
) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<WorkerMessage>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let (conn, kept) = (conn.clone(), sent.clone());
    let task = tokio::spawn(async move {
        while let Some(m) = requests.recv().await {
            kept.lock().unwrap().push(m.clone());
            answer(&conn, &m, reply(&m));
        }
    });
    (task, sent)
}
