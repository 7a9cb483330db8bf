//! Announcements of committed changes to the other replicas, batched.
//!
//! Every NOTIFY is a commit, and PostgreSQL serializes the commits of notifying transactions (a
//! global lock held through the WAL flush). One NOTIFY per finished workflow or per start would
//! cap the whole server at that serialized commit rate and tie up pool connections waiting for
//! it. So changes go into a channel, and one task sends them: whatever queued while the last
//! NOTIFY committed goes out together in the next, as one JSON array payload (within
//! PostgreSQL's 8000-byte limit). Idle, a change still goes out at once, alone.

use sqlx::PgPool;
use tokio::sync::mpsc;

use crate::changes::Change;

/// Payload bytes per NOTIFY, under PostgreSQL's 8000 with room for the array's brackets.
const MAX_PAYLOAD: usize = 7900;

#[derive(Clone)]
pub(crate) struct Announcer {
    tx: mpsc::Sender<Change>,
    /// Whether changes are being dropped (the queue is full), so that is said once per run.
    dropping: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Announcer {
    pub(crate) fn spawn(pool: PgPool, channel: String) -> Announcer {
        let (tx, rx) = mpsc::channel(crate::changes::MAX_QUEUED);
        tokio::spawn(run(pool, channel, rx));
        Announcer {
            tx,
            dropping: Default::default(),
        }
    }

    /// Queues `change` (already committed) for the next NOTIFY. Lost (the queue is full, or
    /// the NOTIFY fails), it is found by the other replicas' polling.
    pub(crate) fn announce(&self, change: Change) {
        use std::sync::atomic::Ordering;
        let mut dropping = self.dropping.load(Ordering::Relaxed);
        let _ = crate::changes::offer(&self.tx, change, &mut dropping);
        self.dropping.store(dropping, Ordering::Relaxed);
    }
}

async fn run(pool: PgPool, channel: String, mut rx: mpsc::Receiver<Change>) {
    let mut held: Option<Change> = None;
    loop {
        let first = match held.take() {
            Some(c) => c,
            None => match rx.recv().await {
                Some(c) => c,
                None => return,
            },
        };
        let mut batch = vec![first];
        let mut size = batch[0].encode().len();
        while let Ok(c) = rx.try_recv() {
            if batch.contains(&c) {
                continue;
            }
            let len = c.encode().len() + 1;
            if size + len > MAX_PAYLOAD {
                held = Some(c);
                break;
            }
            size += len;
            batch.push(c);
        }
        let sent = sqlx::query("SELECT pg_notify($1, $2)")
            .bind(&channel)
            .bind(Change::encode_batch(&batch))
            .execute(&pool)
            .await;
        if let Err(e) = sent {
            tracing::warn!(error = %e, "could not announce changes to other replicas; they will poll");
        }
    }
}
