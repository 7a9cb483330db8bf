//! Queues in the storage contract: a name and the limits dispatch keeps for it. A limit that is
//! `None` does not apply.

use crate::{Millis, StoreError, StoreResult};

/// The queue that always exists.
pub const DEFAULT_QUEUE: &str = "default";

pub mod admission;

/// The limits are the admission policy's input, defined with it.
pub use admission::{QueueLimits, RateLimit};

/// A change to some of a queue's limits: `Some(v)` sets the limit to `v` (`None` inside
/// removes it); `None` leaves it as it is. Applied to the stored row under its lock, so two
/// operators changing different limits at once both land.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueUpdate {
    pub worker_concurrency: Option<Option<u32>>,
    pub global_concurrency: Option<Option<u32>>,
    pub rate_limit: Option<Option<RateLimit>>,
    pub partition_concurrency: Option<Option<u32>>,
}

impl QueueUpdate {
    pub fn apply_to(&self, limits: &QueueLimits) -> QueueLimits {
        QueueLimits {
            worker_concurrency: self.worker_concurrency.unwrap_or(limits.worker_concurrency),
            global_concurrency: self.global_concurrency.unwrap_or(limits.global_concurrency),
            rate_limit: self.rate_limit.unwrap_or(limits.rate_limit),
            partition_concurrency: self.partition_concurrency.unwrap_or(limits.partition_concurrency),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRecord {
    pub name: String,
    pub limits: QueueLimits,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// SQL: the `queues` row in scope has a limit set. Workflows of such a queue are admitted by
/// its limited claim only; the plain claim and the direct dispatch of a start leave them alone.
macro_rules! has_limits {
    () => {
        "(worker_concurrency IS NOT NULL OR global_concurrency IS NOT NULL OR rate_limit IS NOT NULL \
          OR partition_concurrency IS NOT NULL)"
    };
}
pub(crate) use has_limits;

/// Columns of `queues`, in [`QueueRow`] order.
macro_rules! queue_columns {
    () => {
        "queue_name, worker_concurrency, global_concurrency, rate_limit, rate_period_ms, \
         partition_concurrency, created_at, updated_at"
    };
}
pub(crate) use queue_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct QueueRow {
    pub queue_name: String,
    pub worker_concurrency: Option<i64>,
    pub global_concurrency: Option<i64>,
    pub rate_limit: Option<i64>,
    pub rate_period_ms: Option<i64>,
    pub partition_concurrency: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl From<QueueRow> for QueueRecord {
    fn from(r: QueueRow) -> Self {
        QueueRecord {
            name: r.queue_name,
            limits: QueueLimits {
                worker_concurrency: r.worker_concurrency.map(|v| v as u32),
                global_concurrency: r.global_concurrency.map(|v| v as u32),
                rate_limit: r.rate_limit.zip(r.rate_period_ms).map(|(n, p)| RateLimit {
                    max_starts: n as u32,
                    period_ms: p,
                }),
                partition_concurrency: r.partition_concurrency.map(|v| v as u32),
            },
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// The limits as the six nullable columns store them.
pub(crate) fn limit_columns(l: &QueueLimits) -> [Option<i64>; 5] {
    [
        l.worker_concurrency.map(i64::from),
        l.global_concurrency.map(i64::from),
        l.rate_limit.map(|r| i64::from(r.max_starts)),
        l.rate_limit.map(|r| r.period_ms),
        l.partition_concurrency.map(i64::from),
    ]
}

pub(crate) fn not_found(name: &str) -> StoreError {
    StoreError::QueueNotFound(name.to_string())
}

pub(crate) fn exists(name: &str) -> StoreResult<QueueRecord> {
    Err(StoreError::QueueExists(name.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_changes_only_what_it_names() {
        let before = QueueLimits {
            worker_concurrency: Some(2),
            global_concurrency: Some(5),
            rate_limit: None,
            partition_concurrency: None,
        };
        let update = QueueUpdate {
            global_concurrency: Some(None),
            partition_concurrency: Some(Some(1)),
            ..Default::default()
        };
        assert_eq!(
            update.apply_to(&before),
            QueueLimits {
                worker_concurrency: Some(2),
                global_concurrency: None,
                rate_limit: None,
                partition_concurrency: Some(1),
            }
        );
    }
}
