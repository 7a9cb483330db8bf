//! The list of namespaces: a row per namespace.

use super::Backend;
use crate::rows::db_error;
use crate::*;

#[async_trait::async_trait]
impl NamespaceList for Backend {
    #[tracing::instrument(name = "store.add_namespace", level = "debug", target = "waymark::store", skip_all)]
    async fn add_namespace(&self, name: &str, now: Millis) -> StoreResult<NamespaceRecord> {
        let done =
            sqlx::query("INSERT INTO namespaces (name, created_at) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING")
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
        })
    }

    #[tracing::instrument(name = "store.get_namespace", level = "debug", target = "waymark::store", skip_all)]
    async fn get_namespace(&self, name: &str) -> StoreResult<Option<NamespaceRecord>> {
        let row: Option<(String, Millis)> = sqlx::query_as("SELECT name, created_at FROM namespaces WHERE name = $1")
            .bind(name)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
        Ok(row.map(|(name, created_at)| NamespaceRecord { name, created_at }))
    }

    #[tracing::instrument(name = "store.list_namespaces", level = "debug", target = "waymark::store", skip_all)]
    async fn list_namespaces(&self, limit: u32) -> StoreResult<Vec<NamespaceRecord>> {
        let rows: Vec<(String, Millis)> =
            sqlx::query_as("SELECT name, created_at FROM namespaces ORDER BY name LIMIT $1")
                .bind(limit as i64)
                .fetch_all(self.reader())
                .await
                .map_err(db_error)?;
        Ok(rows
            .into_iter()
            .map(|(name, created_at)| NamespaceRecord { name, created_at })
            .collect())
    }

    #[tracing::instrument(
        name = "store.remove_namespace",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn remove_namespace(&self, name: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM namespaces WHERE name = $1")
            .bind(name)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }
}
