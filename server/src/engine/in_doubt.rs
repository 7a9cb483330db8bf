//! Claims whose answer was lost. A claim (or a start dispatching straight to a worker) that
//! fails may still have committed: the database wrote the rows PENDING for the stream, and the
//! connection broke before it said so — PostgreSQL shutting down between its commit and its
//! reply does exactly that. Nothing was sent, so the worker never runs them, and because its
//! heartbeats keep its lease alive, recovery never takes them back: stuck for as long as the
//! worker lives.
//!
//! So such a failure puts the stream in doubt (`WorkerSession::doubt`), and before the
//! dispatcher claims for it again it settles the doubt: whatever the stream owns in the
//! database beyond what was sent down it goes back to the queue (`Store::release_unsent`).
//! While in doubt the stream takes no direct dispatches, and the settling waits for those
//! already under way, so nothing sent is taken for lost.

use super::{worker::Workers, WorkerSession};

impl Workers {
    /// Settles `session`'s doubt, if it has one. False while it cannot yet (a start is still
    /// dispatching to it, or the database is away): no claim for it until then.
    pub(crate) async fn settle_doubt(&self, session: &WorkerSession) -> bool {
        if !session.in_doubt() {
            return true;
        }
        if session.placing() > 0 {
            return false;
        }
        let sent = session.sent();
        match self
            .core
            .store
            .release_unsent(&session.lease_id, &sent, self.core.now())
            .await
        {
            Ok(released) => {
                session.settled();
                if !released.requeued.is_empty() {
                    tracing::warn!(worker_id = %session.registration.worker_id, workflows = ?released.requeued,
                        "a write that failed had given these workflows to the worker all the same; back in their queue");
                    self.core.work_enqueued();
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not settle a failed claim yet; retrying at the next pass");
                false
            }
        }
    }
}
