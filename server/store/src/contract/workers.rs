//! Dispatch to worker streams, their leases, and taking back what a lost stream held.

use async_trait::async_trait;

use crate::*;

/// What a worker can take: the claim's filter.
#[derive(Debug, Clone)]
pub struct Claim {
    pub worker_id: String,
    /// The stream the workflows go out on; its lease keeps them from recovery.
    pub session_id: String,
    pub app_version: String,
    pub workflow_names: Vec<String>,
    pub queues: Vec<String>,
    pub limit: u32,
}

/// A workflow dispatched to a worker, with its checkpoints.
#[derive(Debug, Clone)]
pub struct ClaimedWorkflow {
    pub workflow: WorkflowRecord,
    pub steps: Vec<StepRecord>,
}

/// A live worker stream as the store keeps it (for listing workers across replicas).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRecord {
    pub session_id: String,
    pub worker_id: String,
    /// What the stream declared (JSON written by the engine); `None` before it was described.
    pub info: Option<String>,
    /// Its load at its last heartbeat (JSON written by the engine).
    pub load: Option<String>,
    pub lease_expires_at: Millis,
    /// Its last heartbeat.
    pub updated_at: Millis,
}

/// What a recovery pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Put back in their queue.
    pub requeued: Vec<String>,
    /// Recovered more often than the limit allows: now MAX_RECOVERY_ATTEMPTS_EXCEEDED.
    pub dead_lettered: Vec<String>,
}

/// Dispatch to worker streams, their leases, and taking back what a lost stream held.
#[async_trait]
pub trait Workers: Send + Sync {
    /// Take up to `claim.limit` ENQUEUED workflows the worker can run, lowest priority first,
    /// oldest first within a priority: each becomes
    /// PENDING, owned by the worker, with its epoch raised by one and its app version pinned.
    /// Concurrent claims never take the same workflow. Queues with limits are not claimed here
    /// (judged by their stored row as the claim runs); see [`Store::claim_limited`].
    async fn claim_workflows(&self, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>>;

    /// Like `claim_workflows` for the one queue `queue` (`claim.queues` is ignored), which has
    /// limits: under the queue's lock, counts what runs (fleet-wide, on this worker, per
    /// partition) and what started within the rate window, and takes no more than every limit
    /// allows, partitions in turn (see [`admission`]). Claims of one queue run one at a time
    /// across all replicas.
    async fn claim_limited(&self, queue: &str, claim: &Claim, now: Millis) -> StoreResult<Vec<ClaimedWorkflow>>;

    /// Create or extend the lease of one worker stream: the workflows dispatched on it are safe
    /// from recovery until `until`.
    async fn renew_session_lease(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        now: Millis,
    ) -> StoreResult<()>;

    /// Like `renew_session_lease`, also keeping `load` (what the stream holds and can take, as
    /// JSON) with the lease: the heartbeat's one write.
    async fn heartbeat_session(
        &self,
        session_id: &str,
        worker_id: &str,
        until: Millis,
        load: &str,
        now: Millis,
    ) -> StoreResult<()>;

    /// Keeps what a stream declared (JSON) with its lease, once it holds its worker id.
    async fn describe_session(&self, session_id: &str, info: &str) -> StoreResult<()>;

    /// Worker streams whose lease is live at `now`, by worker id then session, at most `limit`.
    async fn live_sessions(&self, now: Millis, limit: u32) -> StoreResult<Vec<SessionRecord>>;

    /// Opens the lease of a new worker stream (as `renew_session_lease`) for `worker_id`,
    /// authenticated with `key_id` — unless a live stream of that worker id, on any replica,
    /// holds it with another key (or none where this one has one): then false, and nothing is
    /// written. Checked and written under the worker id's lock, so two racing hellos cannot both
    /// pass.
    async fn hold_worker_id(
        &self,
        session_id: &str,
        worker_id: &str,
        key_id: Option<&str>,
        until: Millis,
        now: Millis,
    ) -> StoreResult<bool>;

    /// Take back at once every workflow still owned by this worker (it reconnected, so it dropped
    /// them). Counts as a recovery, like `recover_expired`.
    async fn release_worker(&self, worker_id: &str, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// Take back workflows a live worker says it no longer holds (its heartbeat left them out:
    /// the SDK lost the run). Only a workflow still PENDING at the listed epoch is taken back —
    /// one that finished, parked or was dispatched again meanwhile is left alone. Counts as a
    /// recovery, like `recover_expired`.
    async fn release_lost(&self, lost: &[Fence], max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// Take back the PENDING workflows owned by stream `session_id` that are not among those
    /// the replica `sent` down it (each at its epoch): a claim or a dispatching start whose
    /// commit reached the database but whose answer did not (the connection broke), so nothing
    /// was sent, and the live worker's heartbeats would keep them for ever. Back to ENQUEUED
    /// without counting a recovery: the worker never had them.
    async fn release_unsent(&self, session_id: &str, sent: &[Fence], now: Millis) -> StoreResult<Recovery>;

    /// Take back the PENDING workflows whose stream's lease ended before `now` (or that have no
    /// live stream at all): each one's recovery count goes up by one and it returns to ENQUEUED,
    /// or becomes MAX_RECOVERY_ATTEMPTS_EXCEEDED when the count passes the limit.
    async fn recover_expired(&self, max_recovery_attempts: u32, now: Millis) -> StoreResult<Recovery>;

    /// Forget worker streams whose lease ended before `before` and that own nothing.
    async fn prune_sessions(&self, before: Millis) -> StoreResult<u64>;
}
