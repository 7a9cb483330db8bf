//! `waymark.v1.QueueService`: queues as server resources. Converts, calls the engine, maps errors.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use waymark_proto::v1::{self, queue_service_server::QueueService};
use waymark_store::{Millis, QueueCounts, QueueLimits, QueueRecord, QueueUpdate, RateLimit};

use super::{
    audit::{note_resource, noted},
    convert,
    status::to_status,
};
use crate::namespaces::Namespaces;

pub struct QueueApi {
    pub namespaces: Arc<Namespaces>,
}

/// What a queue holds, for its `stats`; none counted is all zeros.
fn stats(counts: Option<&QueueCounts>, now: Millis, dispatched_per_minute: Vec<u32>) -> v1::QueueStats {
    let c = counts.cloned().unwrap_or_default();
    v1::QueueStats {
        enqueued: c.enqueued,
        pending: c.pending,
        delayed: c.delayed,
        oldest_enqueued_age: c.oldest_enqueued_at.map(|at| {
            let ms = (now - at).max(0);
            prost_types::Duration {
                seconds: ms / 1000,
                nanos: ((ms % 1000) * 1_000_000) as i32,
            }
        }),
        partitions: c.partitions,
        dispatched_per_minute,
    }
}

fn to_wire(q: QueueRecord) -> v1::Queue {
    v1::Queue {
        stats: None,
        name: q.name,
        worker_concurrency: q.limits.worker_concurrency,
        global_concurrency: q.limits.global_concurrency,
        rate_limit: q.limits.rate_limit.map(|r| v1::RateLimit {
            max_starts: r.max_starts,
            period: Some(prost_types::Duration {
                seconds: r.period_ms / 1000,
                nanos: ((r.period_ms % 1000) * 1_000_000) as i32,
            }),
        }),
        partition_concurrency: q.limits.partition_concurrency,
        created_at: convert::timestamp(q.created_at),
        updated_at: convert::timestamp(q.updated_at),
    }
}

fn rate_from_wire(r: Option<&v1::RateLimit>) -> Result<Option<RateLimit>, Status> {
    let Some(r) = r else { return Ok(None) };
    let period_ms = convert::duration_ms("rate limit period", r.period.as_ref())?
        .ok_or_else(|| super::status::invalid("a rate limit needs a period"))?;
    Ok(Some(RateLimit {
        max_starts: r.max_starts,
        period_ms,
    }))
}

fn limits_from_wire(q: &v1::Queue) -> Result<QueueLimits, Status> {
    Ok(QueueLimits {
        worker_concurrency: q.worker_concurrency,
        global_concurrency: q.global_concurrency,
        rate_limit: rate_from_wire(q.rate_limit.as_ref())?,
        partition_concurrency: q.partition_concurrency,
    })
}

/// The limits an update names (all of them for an empty mask), set from `queue`.
fn update_from_wire(q: &v1::Queue, mask: Option<&prost_types::FieldMask>) -> Result<QueueUpdate, Status> {
    let limits = limits_from_wire(q)?;
    let paths: Vec<&str> = match mask {
        Some(m) if !m.paths.is_empty() => m.paths.iter().map(String::as_str).collect(),
        _ => vec![
            "worker_concurrency",
            "global_concurrency",
            "rate_limit",
            "partition_concurrency",
        ],
    };
    let mut update = QueueUpdate::default();
    for p in paths {
        match p {
            "worker_concurrency" => update.worker_concurrency = Some(limits.worker_concurrency),
            "global_concurrency" => update.global_concurrency = Some(limits.global_concurrency),
            "rate_limit" => update.rate_limit = Some(limits.rate_limit),
            "partition_concurrency" => update.partition_concurrency = Some(limits.partition_concurrency),
            other => {
                return Err(super::status::invalid(format!(
                    "update_mask names {other:?}; a queue's limits are worker_concurrency, global_concurrency, \
                     rate_limit and partition_concurrency"
                )))
            }
        }
    }
    Ok(update)
}

fn queue_of(q: Option<v1::Queue>) -> Result<v1::Queue, Status> {
    q.ok_or_else(|| super::status::invalid("the request needs a queue"))
}

#[tonic::async_trait]
impl QueueService for QueueApi {
    async fn create_queue(
        &self,
        req: Request<v1::CreateQueueRequest>,
    ) -> Result<Response<v1::CreateQueueResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let q = queue_of(req.into_inner().queue)?;
        note_resource(&q.name);
        let limits = limits_from_wire(&q)?;
        let created = engine.queues().create(&q.name, limits).await.map_err(to_status)?;
        Ok(Response::new(v1::CreateQueueResponse {
            queue: Some(to_wire(created)),
        }))
    }

    async fn update_queue(
        &self,
        req: Request<v1::UpdateQueueRequest>,
    ) -> Result<Response<v1::UpdateQueueResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let q = queue_of(r.queue)?;
        note_resource(&q.name);
        let update = update_from_wire(&q, r.update_mask.as_ref())?;
        let updated = engine.queues().update(&q.name, update).await.map_err(to_status)?;
        Ok(Response::new(v1::UpdateQueueResponse {
            queue: Some(to_wire(updated)),
        }))
    }

    async fn get_queue(&self, req: Request<v1::GetQueueRequest>) -> Result<Response<v1::GetQueueResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let q = engine
            .queues()
            .get(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        let counts = engine.queues().counts_now(Some(&q.name)).await.map_err(to_status)?;
        let stats = stats(counts.first(), engine.now_ms(), engine.dispatched_per_minute(&q.name));
        Ok(Response::new(v1::GetQueueResponse {
            queue: Some(v1::Queue {
                stats: Some(stats),
                ..to_wire(q)
            }),
        }))
    }

    async fn list_queues(
        &self,
        req: Request<v1::ListQueuesRequest>,
    ) -> Result<Response<v1::ListQueuesResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        let r = req.into_inner();
        let page = engine
            .queues_page(&super::workflow_service::page_request(r.page_size, r.page_token))
            .await
            .map_err(to_status)?;
        let counts = engine.queues().counts_now(None).await.map_err(to_status)?;
        let now = engine.now_ms();
        let with_stats = |q: QueueRecord| {
            let per_minute = engine.dispatched_per_minute(&q.name);
            let stats = stats(counts.iter().find(|c| c.queue_name == q.name), now, per_minute);
            v1::Queue {
                stats: Some(stats),
                ..to_wire(q)
            }
        };
        Ok(Response::new(v1::ListQueuesResponse {
            queues: page.items.into_iter().map(with_stats).collect(),
            next_page_token: page.next_token,
        }))
    }

    async fn delete_queue(
        &self,
        req: Request<v1::DeleteQueueRequest>,
    ) -> Result<Response<v1::DeleteQueueResponse>, Status> {
        let engine = super::engine_for(&self.namespaces, &req).await?;
        engine
            .queues()
            .delete(&noted(req.into_inner().name))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::DeleteQueueResponse {}))
    }
}
