//! Queues: a row per queue with its limits.

use super::Backend;
use crate::queues::{self, limit_columns, queue_columns, QueueRow};
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl Queues for Backend {
    async fn create_queue(&self, name: &str, limits: &QueueLimits, now: Millis) -> StoreResult<QueueRecord> {
        let [worker, global, rate, period, partition] = limit_columns(limits);
        let row: Option<QueueRow> = sqlx::query_as(concat!(
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

    async fn update_queue(&self, name: &str, update: &QueueUpdate, now: Millis) -> StoreResult<QueueRecord> {
        let mut tx = self.writer().begin().await.map_err(db_error)?;
        let current: Option<QueueRow> = sqlx::query_as(concat!(
            "SELECT ",
            queue_columns!(),
            " FROM queues WHERE queue_name = $1",
            for_update!()
        ))
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db_error)?;
        let current: QueueRecord = current.ok_or_else(|| queues::not_found(name))?.into();
        let [worker, global, rate, period, partition] = limit_columns(&update.apply_to(&current.limits));
        let row: QueueRow = sqlx::query_as(concat!(
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

    async fn get_queue(&self, name: &str) -> StoreResult<Option<QueueRecord>> {
        let row: Option<QueueRow> = sqlx::query_as(concat!(
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

    async fn list_queues(&self) -> StoreResult<Vec<QueueRecord>> {
        let rows: Vec<QueueRow> =
            sqlx::query_as(concat!("SELECT ", queue_columns!(), " FROM queues ORDER BY queue_name"))
                .fetch_all(self.reader())
                .await
                .map_err(db_error)?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    async fn delete_queue(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM queues WHERE queue_name = $1")
            .bind(name)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        self.announce_soon(crate::changes::Change::QueuesChanged);
        Ok(done.rows_affected() == 1)
    }

    async fn ensure_queues(&self, names: &[String], now: Millis) -> StoreResult<()> {
        for name in names {
            sqlx::query(
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
