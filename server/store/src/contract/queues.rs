//! Queues and their limits.

use async_trait::async_trait;

use crate::*;

/// How much unfinished work one queue holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub queue_name: String,
    pub enqueued: u64,
    pub pending: u64,
    pub delayed: u64,
    /// When its oldest ENQUEUED workflow was started (none enqueued: `None`).
    pub oldest_enqueued_at: Option<Millis>,
    /// Distinct partition keys among its ENQUEUED workflows (the empty key not counted).
    pub partitions: u64,
}

/// Queues and their limits.
#[async_trait]
pub trait Queues: Send + Sync {
    /// Creates a queue; `QueueExists` when the name is taken.
    async fn create_queue(&self, name: &str, limits: &QueueLimits, now: Millis) -> StoreResult<QueueRecord>;

    /// Changes some of a queue's limits, reading and writing the row under its lock;
    /// `QueueNotFound` when there is no such queue.
    async fn update_queue(&self, name: &str, update: &QueueUpdate, now: Millis) -> StoreResult<QueueRecord>;

    async fn get_queue(&self, name: &str) -> StoreResult<Option<QueueRecord>>;

    /// Every queue, by name.
    async fn list_queues(&self) -> StoreResult<Vec<QueueRecord>>;

    /// Removes a queue; false when there was none. Its workflows keep their queue name.
    async fn delete_queue(&self, name: &str) -> StoreResult<bool>;

    /// Creates, without limits, those of `names` that do not exist (a worker declaring them).
    async fn ensure_queues(&self, names: &[String], now: Millis) -> StoreResult<()>;

    /// What every queue holding unfinished workflows holds (only `queue` when given), by queue
    /// name. Reads the unfinished workflows through their per-status indexes, never the
    /// finished ones: its cost follows the work waiting, not the history kept.
    async fn queue_counts(&self, queue: Option<&str>) -> StoreResult<Vec<QueueCounts>>;
}
