//! Queues from a client: create, change, read, list and remove them (`waymark.v1.QueueService`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use waymark_proto::v1;

use crate::{types::ms, Client, Error};

/// A queue's limits. `None`: no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimits {
    /// Most of the queue's workflows one worker process runs at once.
    pub worker_concurrency: Option<u32>,
    /// Most of the queue's workflows running at once across the fleet.
    pub global_concurrency: Option<u32>,
    /// At most this many starts in any window of this length.
    pub rate_limit: Option<(u32, Duration)>,
    /// Most workflows of one partition key running at once.
    pub partition_concurrency: Option<u32>,
}

/// A queue as the server reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueInfo {
    pub name: String,
    pub limits: QueueLimits,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// What it holds now (as the server read it when answering).
    pub stats: QueueStats,
}

/// How much unfinished work a queue holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueStats {
    pub enqueued: u64,
    pub pending: u64,
    pub delayed: u64,
    /// How long its oldest ENQUEUED workflow has waited; `None` when none is enqueued.
    pub oldest_enqueued_age_ms: Option<i64>,
    /// Partition keys among its ENQUEUED workflows.
    pub partitions: u64,
    /// Workflows the answering replica dispatched from it in each of the last 15 minutes,
    /// oldest first, the current minute last.
    pub dispatched_per_minute: Vec<u32>,
}

/// Which limits an update changes: `Some(v)` sets one (`Some(None)` removes it); `None` leaves
/// it as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueUpdate {
    pub worker_concurrency: Option<Option<u32>>,
    pub global_concurrency: Option<Option<u32>>,
    pub rate_limit: Option<Option<(u32, Duration)>>,
    pub partition_concurrency: Option<Option<u32>>,
}

fn wire_rate((max_starts, period): (u32, Duration)) -> v1::RateLimit {
    v1::RateLimit {
        max_starts,
        period: Some(prost_types::Duration {
            seconds: period.as_secs() as i64,
            nanos: period.subsec_nanos() as i32,
        }),
    }
}

fn wire(name: &str, l: &QueueLimits) -> v1::Queue {
    v1::Queue {
        name: name.to_string(),
        worker_concurrency: l.worker_concurrency,
        global_concurrency: l.global_concurrency,
        rate_limit: l.rate_limit.map(wire_rate),
        partition_concurrency: l.partition_concurrency,
        ..Default::default()
    }
}

impl From<v1::Queue> for QueueInfo {
    fn from(q: v1::Queue) -> Self {
        let rate_limit = q.rate_limit.map(|r| {
            let p = r.period.unwrap_or_default();
            (
                r.max_starts,
                Duration::new(p.seconds.max(0) as u64, p.nanos.max(0) as u32),
            )
        });
        QueueInfo {
            limits: QueueLimits {
                worker_concurrency: q.worker_concurrency,
                global_concurrency: q.global_concurrency,
                rate_limit,
                partition_concurrency: q.partition_concurrency,
            },
            created_at_ms: ms(q.created_at.as_ref()),
            updated_at_ms: ms(q.updated_at.as_ref()),
            stats: q
                .stats
                .map(|s| QueueStats {
                    enqueued: s.enqueued,
                    pending: s.pending,
                    delayed: s.delayed,
                    oldest_enqueued_age_ms: s
                        .oldest_enqueued_age
                        .map(|d| d.seconds * 1000 + d.nanos as i64 / 1_000_000),
                    partitions: s.partitions,
                    dispatched_per_minute: s.dispatched_per_minute,
                })
                .unwrap_or_default(),
            name: q.name,
        }
    }
}

impl Client {
    /// Creates a queue; `QUEUE_EXISTS` when the name is taken.
    pub async fn create_queue(&self, name: &str, limits: &QueueLimits) -> Result<QueueInfo, Error> {
        let r = self
            .queues
            .clone()
            .create_queue(v1::CreateQueueRequest {
                queue: Some(wire(name, limits)),
            })
            .await?;
        Ok(r.into_inner().queue.unwrap_or_default().into())
    }

    /// Changes the limits `update` names.
    pub async fn update_queue(&self, name: &str, update: &QueueUpdate) -> Result<QueueInfo, Error> {
        let mut queue = v1::Queue {
            name: name.to_string(),
            ..Default::default()
        };
        let mut paths = Vec::new();
        if let Some(v) = update.worker_concurrency {
            queue.worker_concurrency = v;
            paths.push("worker_concurrency".to_string());
        }
        if let Some(v) = update.global_concurrency {
            queue.global_concurrency = v;
            paths.push("global_concurrency".to_string());
        }
        if let Some(v) = update.rate_limit {
            queue.rate_limit = v.map(wire_rate);
            paths.push("rate_limit".to_string());
        }
        if let Some(v) = update.partition_concurrency {
            queue.partition_concurrency = v;
            paths.push("partition_concurrency".to_string());
        }
        if paths.is_empty() {
            return self.get_queue(name).await;
        }
        let r = self
            .queues
            .clone()
            .update_queue(v1::UpdateQueueRequest {
                queue: Some(queue),
                update_mask: Some(prost_types::FieldMask { paths }),
            })
            .await?;
        Ok(r.into_inner().queue.unwrap_or_default().into())
    }

    pub async fn get_queue(&self, name: &str) -> Result<QueueInfo, Error> {
        let r = self
            .queues
            .clone()
            .get_queue(v1::GetQueueRequest { name: name.into() })
            .await?;
        Ok(r.into_inner().queue.unwrap_or_default().into())
    }

    pub async fn list_queues(&self) -> Result<Vec<QueueInfo>, Error> {
        crate::pages::read_all(|page_token| async move {
            let r = self
                .queues
                .clone()
                .list_queues(v1::ListQueuesRequest {
                    page_size: 0,
                    page_token,
                })
                .await?
                .into_inner();
            Ok((r.queues.into_iter().map(QueueInfo::from).collect(), r.next_page_token))
        })
        .await
    }

    pub async fn delete_queue(&self, name: &str) -> Result<(), Error> {
        self.queues
            .clone()
            .delete_queue(v1::DeleteQueueRequest { name: name.into() })
            .await?;
        Ok(())
    }
}
