//! A run's held-back step records, and the rule that makes holding them back safe: nothing a
//! workflow does after a step — another step's function, any request to the server — starts
//! before that step's record is durable.
//!
//! Records are held back until the workflow's next step or request, or its completion (which
//! carries them), so the last steps of a run cost no round trip of their own. Steps started
//! together (`join!(step(c), step(d))`) both flush; the second must not go on while the first is
//! still waiting for its acknowledgements, or `d` could act on `a`'s result before a crash can
//! no longer forget `a`. So a flush holds a lock from taking the records until they are
//! acknowledged, and one that starts meanwhile waits for it.

use std::sync::{
    atomic::{AtomicBool, Ordering},
    Mutex,
};

use waymark_proto::v1::{self, reply, worker_message};

use super::conn::Conn;
use crate::WorkflowError;

#[derive(Default)]
pub(crate) struct Records {
    held: Mutex<Vec<v1::RecordStep>>,
    /// Held from taking the records to their last acknowledgement.
    flushing: tokio::sync::Mutex<()>,
    /// The run was let go: a record or request could not be made durable (the stream broke, or
    /// the server stayed unavailable past the resend bound). Nothing more is sent for it; the
    /// server dispatches the workflow again.
    dropped: AtomicBool,
}

impl Records {
    /// Holds back a step's record until the next flush.
    pub(crate) fn hold(&self, record: v1::RecordStep) {
        self.held.lock().unwrap().push(record);
    }

    /// Takes what is held, for a completion that carries it.
    pub(crate) fn take(&self) -> Vec<v1::RecordStep> {
        std::mem::take(&mut *self.held.lock().unwrap())
    }

    pub(crate) fn drop_run(&self) {
        self.dropped.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Makes every record held so far durable, and waits for any flush already under way: when
    /// this returns Ok, every record taken before the call is acknowledged.
    pub(crate) async fn flush(&self, conn: &Conn) -> Result<(), WorkflowError> {
        let _turn = self.flushing.lock().await;
        if self.is_dropped() {
            return Err(WorkflowError::Disconnected);
        }
        let held = self.take();
        if held.is_empty() {
            return Ok(());
        }
        let sends = held
            .into_iter()
            .map(|r| conn.request_resending(worker_message::Kind::RecordStep(r)));
        let mut outcome = Ok(());
        for reply in futures::future::join_all(sends).await {
            let r = match reply {
                Ok(reply::Result::StepRecorded(_)) => Ok(()),
                Ok(reply::Result::Error(e)) => Err(super::context::refused(e)),
                Ok(_) | Err(_) => Err(WorkflowError::Disconnected),
            };
            if outcome.is_ok() {
                outcome = r;
            }
        }
        if outcome.is_err() {
            // A record that is not durable may be one a later step depends on: no later step
            // or request may go on (one waiting for this flush would otherwise find nothing
            // held and go), so the run ends here, whatever refused it.
            self.drop_run();
        }
        outcome
    }
}

#[cfg(test)]
mod tests;
