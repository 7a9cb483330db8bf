//! The sending half of a worker's stream, shared by every workflow running on it: request ids
//! and the replies they wait for, resending on UNAVAILABLE, and the size limits the server
//! announced in its welcome.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
    time::Duration,
};

use tokio::sync::{mpsc, oneshot};
use waymark_proto::{
    json,
    v1::{self, reply, worker_message, WorkerMessage},
};

use crate::WorkflowError;

/// The sending half of a stream, shared by every workflow running on it.
pub(crate) struct Conn {
    tx: mpsc::Sender<WorkerMessage>,
    next_id: AtomicU64,
    pending: Mutex<HashMap<u64, oneshot::Sender<reply::Result>>>,
    /// How long a request the server answers UNAVAILABLE is sent again before its run is let go.
    resend_for: Duration,
    /// The sizes the server takes, from its welcome.
    pub(crate) limits: Limits,
}

/// Sizes the server takes (see `Welcome` in worker.proto).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Largest JSON payload, in bytes of its text.
    pub payload: usize,
    /// Largest message this worker may send, in bytes of its encoding.
    pub message: usize,
}

impl Default for Limits {
    /// What a server too old to say uses.
    fn default() -> Self {
        Limits {
            payload: 4 * 1024 * 1024,
            message: 9 * 1024 * 1024,
        }
    }
}

impl Limits {
    pub(crate) fn from_welcome(w: &v1::Welcome) -> Limits {
        let d = Limits::default();
        Limits {
            payload: if w.max_payload_bytes == 0 {
                d.payload
            } else {
                w.max_payload_bytes as usize
            },
            message: if w.max_message_bytes == 0 {
                d.message
            } else {
                w.max_message_bytes as usize
            },
        }
    }

    /// `value` as a payload, or PAYLOAD_TOO_LARGE (saying what it is) when its JSON is larger
    /// than the server takes: refused here, before a message that could not be delivered.
    pub(crate) fn payload(&self, what: &str, value: &serde_json::Value) -> Result<v1::Payload, WorkflowError> {
        let size = serde_json::to_string(value)?.len();
        if size > self.payload {
            return Err(WorkflowError::failed(
                "PAYLOAD_TOO_LARGE",
                format!(
                    "{what} is {size} bytes of JSON; the server takes at most {}",
                    self.payload
                ),
            ));
        }
        Ok(json::to_payload(value))
    }
}

impl Conn {
    pub(crate) fn new(tx: mpsc::Sender<WorkerMessage>, resend_for: Duration, limits: Limits) -> Conn {
        Conn {
            tx,
            next_id: AtomicU64::new(0),
            pending: Mutex::new(HashMap::new()),
            resend_for,
            limits,
        }
    }

    /// Sends a request and waits for the server's reply.
    pub(crate) async fn request(&self, kind: worker_message::Kind) -> Result<reply::Result, WorkflowError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        if self
            .tx
            .send(WorkerMessage {
                request_id: id,
                kind: Some(kind),
            })
            .await
            .is_err()
        {
            self.pending.lock().unwrap().remove(&id);
            return Err(WorkflowError::Disconnected);
        }
        rx.await.map_err(|_| WorkflowError::Disconnected)
    }

    /// Like [`request`](Self::request), sending the request again with backoff while the server
    /// answers UNAVAILABLE (its database restarting, say): that is never the workflow's failure,
    /// and fencing and idempotency make a resend safe. Past the bound the run is let go
    /// (`Disconnected`): the server dispatches the workflow again.
    pub(crate) async fn request_resending(&self, kind: worker_message::Kind) -> Result<reply::Result, WorkflowError> {
        let started = tokio::time::Instant::now();
        let mut backoff = crate::resend::Backoff::default();
        loop {
            match self.request(kind.clone()).await? {
                reply::Result::Error(e) if e.code == tonic::Code::Unavailable as i32 => {
                    let Some(pause) = backoff.next_within(started.elapsed(), self.resend_for) else {
                        tracing::warn!(reason = %e.reason, "the server stayed unavailable; letting the run go");
                        return Err(WorkflowError::Disconnected);
                    };
                    tracing::debug!(reason = %e.reason, ?pause, "the server is unavailable; sending again");
                    tokio::time::sleep(pause).await;
                }
                r => return Ok(r),
            }
        }
    }

    /// Sends a message that gets no reply.
    pub(crate) async fn send(&self, kind: worker_message::Kind) -> bool {
        self.tx
            .send(WorkerMessage {
                request_id: 0,
                kind: Some(kind),
            })
            .await
            .is_ok()
    }

    pub(crate) fn resolve(&self, r: v1::Reply) {
        if let (Some(tx), Some(result)) = (self.pending.lock().unwrap().remove(&r.request_id), r.result) {
            let _ = tx.send(result);
        }
    }
}
