//! Queues: a row per queue with its limits.

use crate::dialect::{sql, Backend};
use crate::queues::{self, limit_columns, queue_columns, QueueRow};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl<B: Backend> Queues for B {
    #[tracing::instrument(name = "store.create_queue", level = "debug", target = "waymark::store", skip_all)]
    async fn create_queue(&self, name: &str, limits: &QueueLimits, now: Millis) -> StoreResult<QueueRecord> {
        let [worker, global, rate, period, partition] = limit_columns(limits);
        let row: Option<QueueRow> = B::query_as(concat!(
            "INSERT INTO queues (queue_name, worker_concurrency, global_concurrency, rate_limit, rate_period_ms, \
               partition_concurrency, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7) \
             ON CONFLICT (queue_name) DO NOTHING RETURNING ",
            queue_columns!()
        ))
        .bind(name)
        .bind(worker)
        .bind(global)
        .bind(rate)
        .bind(period)
        .bind(partition)
        .bind(now)
        .fetch_optional(self.writer())
        .await
        .map_err(db_error)?;
        match row {
            Some(r) => {
                self.announce_soon(crate::changes::Change::QueuesChanged);
                Ok(r.into())
            }
            None => queues::exists(name),
        }
    }

    #[tracing::instrument(name = "store.update_queue", level = "debug", target = "waymark::store", skip_all)]
    async fn update_queue(&self, name: &str, update: &QueueUpdate, now: Millis) -> StoreResult<QueueRecord> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let current: Option<QueueRow> = B::query_as(sql!(B:
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE queue_name = $1",
            B::FOR_UPDATE
        ))
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let current: QueueRecord = current.ok_or_else(|| queues::not_found(name))?.into();
        let [worker, global, rate, period, partition] = limit_columns(&update.apply_to(&current.limits));
        let row: QueueRow = B::query_as(concat!(
            "UPDATE queues SET worker_concurrency = $2, global_concurrency = $3, rate_limit = $4, \
               rate_period_ms = $5, partition_concurrency = $6, updated_at = $7 WHERE queue_name = $1 RETURNING ",
            queue_columns!()
        ))
        .bind(name)
        .bind(worker)
        .bind(global)
        .bind(rate)
        .bind(period)
        .bind(partition)
        .bind(now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db_error)?;
        tx.commit().await.map_err(db_error)?;
        self.announce_soon(crate::changes::Change::QueuesChanged);
        Ok(row.into())
    }

    #[tracing::instrument(name = "store.get_queue", level = "debug", target = "waymark::store", skip_all)]
    async fn get_queue(&self, name: &str) -> StoreResult<Option<QueueRecord>> {
        let row: Option<QueueRow> = B::query_as(concat!(
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE queue_name = $1"
        ))
        .bind(name)
        .fetch_optional(self.reader())
        .await
        .map_err(db_error)?;
        Ok(row.map(Into::into))
    }

    #[tracing::instrument(name = "store.list_queues", level = "debug", target = "waymark::store", skip_all)]
    async fn list_queues(&self) -> StoreResult<Vec<QueueRecord>> {
        let rows: Vec<QueueRow> = B::query_as(concat!("SELECT ", queue_columns!(), " FROM queues ORDER BY queue_name"))
            .fetch_all(self.reader())
            .await
            .map_err(db_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    #[tracing::instrument(name = "store.delete_queue", level = "debug", target = "waymark::store", skip_all)]
    async fn delete_queue(&self, name: &str) -> StoreResult<bool> {
        let done = B::query("DELETE FROM queues WHERE queue_name = $1")
            .bind(name)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        self.announce_soon(crate::changes::Change::QueuesChanged);
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(name = "store.queue_counts", level = "debug", target = "waymark::store", skip_all)]
    async fn queue_counts(&self, queue: Option<&str>) -> StoreResult<Vec<QueueCounts>> {
        // One branch per status, each matching its partial index's condition exactly.
        let rows: Vec<(String, String, i64, Option<i64>, i64)> = B::query_as(
            "SELECT queue_name, 'ENQUEUED', COUNT(*), MIN(created_at), COUNT(DISTINCT NULLIF(partition_key, '')) \
               FROM workflows WHERE status = 'ENQUEUED' AND (CAST($1 AS TEXT) IS NULL OR queue_name = $1) \
               GROUP BY queue_name \
             UNION ALL SELECT queue_name, 'PENDING', COUNT(*), NULL, 0 FROM workflows \
               WHERE status = 'PENDING' AND (CAST($1 AS TEXT) IS NULL OR queue_name = $1) GROUP BY queue_name \
             UNION ALL SELECT queue_name, 'DELAYED', COUNT(*), NULL, 0 FROM workflows \
               WHERE status = 'DELAYED' AND (CAST($1 AS TEXT) IS NULL OR queue_name = $1) GROUP BY queue_name",
        )
        .bind(queue)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        let mut by_queue: std::collections::BTreeMap<String, QueueCounts> = Default::default();
        for (name, status, count, oldest, partitions) in rows {
            let c = by_queue.entry(name.clone()).or_insert_with(|| QueueCounts {
                queue_name: name,
                ..Default::default()
            });
            match status.as_str() {
                "ENQUEUED" => {
                    c.enqueued = count as u64;
                    c.oldest_enqueued_at = oldest;
                    c.partitions = partitions as u64;
                }
                "PENDING" => c.pending = count as u64,
                _ => c.delayed = count as u64,
            }
        }
        Ok(by_queue.into_values().collect())
    }

    #[tracing::instrument(name = "store.ensure_queues", level = "debug", target = "waymark::store", skip_all)]
    async fn ensure_queues(&self, names: &[String], now: Millis) -> StoreResult<()> {
        for name in names {
            B::query(
                "INSERT INTO queues (queue_name, created_at, updated_at) VALUES ($1, $2, $2) \
                 ON CONFLICT (queue_name) DO NOTHING",
            )
            .bind(name)
            .bind(now)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        }
        Ok(())
    }
}
