//! The list of namespaces: a row per namespace.

use crate::dialect::Backend;
use crate::rows::db_error;
use crate::*;

type NamespaceRow = (String, Millis, Option<i64>, Option<i64>, Option<i64>);

macro_rules! namespace_columns {
    () => {
        "name, created_at, start_rate, max_worker_streams, max_waits"
    };
}

fn from_row((name, created_at, start_rate, max_worker_streams, max_waits): NamespaceRow) -> NamespaceRecord {
    // Written by `set_namespace_limits` from u32s; a value edited by hand out of range reads as
    // no limit of its own rather than a wrapped one.
    let limit = |v: Option<i64>| v.and_then(|n| u32::try_from(n).ok());
    NamespaceRecord {
        name,
        created_at,
        limits: NamespaceLimits {
            start_rate: limit(start_rate),
            max_worker_streams: limit(max_worker_streams),
            max_waits: limit(max_waits),
        },
    }
}

#[async_trait::async_trait]
impl<B: Backend> NamespaceList for B {
    #[tracing::instrument(name = "store.add_namespace", level = "debug", target = "waymark::store", skip_all)]
    async fn add_namespace(&self, name: &str, now: Millis) -> StoreResult<NamespaceRecord> {
        let done = B::query("INSERT INTO namespaces (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
            .bind(name)
            .bind(now)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NamespaceExists(name.to_string()));
        }
        Ok(NamespaceRecord {
            name: name.to_string(),
            created_at: now,
            limits: NamespaceLimits::default(),
        })
    }

    #[tracing::instrument(name = "store.get_namespace", level = "debug", target = "waymark::store", skip_all)]
    async fn get_namespace(&self, name: &str) -> StoreResult<Option<NamespaceRecord>> {
        let row: Option<NamespaceRow> = B::query_as(concat!(
            "SELECT ",
            namespace_columns!(),
            " FROM namespaces WHERE name = $1"
        ))
        .bind(name)
        .fetch_optional(self.reader())
        .await
        .map_err(db_error)?;
        Ok(row.map(from_row))
    }

    #[tracing::instrument(name = "store.list_namespaces", level = "debug", target = "waymark::store", skip_all)]
    async fn list_namespaces(&self, limit: u32) -> StoreResult<Vec<NamespaceRecord>> {
        let rows: Vec<NamespaceRow> = B::query_as(concat!(
            "SELECT ",
            namespace_columns!(),
            " FROM namespaces ORDER BY name LIMIT $1"
        ))
        .bind(limit as i64)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    #[tracing::instrument(
        name = "store.set_namespace_limits",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn set_namespace_limits(&self, name: &str, limits: &NamespaceLimits) -> StoreResult<bool> {
        let done =
            B::query("UPDATE namespaces SET start_rate = $2, max_worker_streams = $3, max_waits = $4 WHERE name = $1")
                .bind(name)
                .bind(limits.start_rate.map(i64::from))
                .bind(limits.max_worker_streams.map(i64::from))
                .bind(limits.max_waits.map(i64::from))
                .execute(self.writer())
                .await
                .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(
        name = "store.remove_namespace",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn remove_namespace(&self, name: &str) -> StoreResult<bool> {
        let done = B::query("DELETE FROM namespaces WHERE name = $1")
            .bind(name)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }
}
