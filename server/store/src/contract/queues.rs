//! Queues and their limits.

use async_trait::async_trait;

use crate::*;

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
}
