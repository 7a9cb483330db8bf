//! API keys: a row per key, the secret only as a hash.

use crate::dialect::Backend;
use crate::rows::db_error;
use crate::*;

type KeyRow = (
    String,
    String,
    String,
    String,
    String,
    String,
    Millis,
    Option<Millis>,
    Option<Millis>,
);

macro_rules! key_columns {
    () => {
        "key_id, secret_sha256, name, role, namespaces, name_patterns, created_at, expires_at, revoked_at"
    };
}

fn from_row(r: KeyRow) -> ApiKeyRecord {
    // The arrays are written by `create_api_key` only; a row edited by hand into something else
    // reads as empty lists, which grant nothing.
    let list = |s: &str| serde_json::from_str::<Vec<String>>(s).unwrap_or_default();
    ApiKeyRecord {
        namespaces: list(&r.4),
        name_patterns: list(&r.5),
        key_id: r.0,
        secret_sha256: r.1,
        name: r.2,
        role: r.3,
        created_at: r.6,
        expires_at: r.7,
        revoked_at: r.8,
    }
}

#[async_trait::async_trait]
impl<B: Backend> ApiKeys for B {
    #[tracing::instrument(name = "store.create_api_key", level = "debug", target = "waymark::store", skip_all)]
    async fn create_api_key(&self, key: &ApiKeyRecord) -> StoreResult<()> {
        let done = B::query(
            "INSERT INTO api_keys (key_id, secret_sha256, name, role, namespaces, name_patterns, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (key_id) DO NOTHING",
        )
        .bind(&key.key_id)
        .bind(&key.secret_sha256)
        .bind(&key.name)
        .bind(&key.role)
        .bind(serde_json::to_string(&key.namespaces).expect("a list of strings serializes"))
        .bind(serde_json::to_string(&key.name_patterns).expect("a list of strings serializes"))
        .bind(key.created_at)
        .bind(key.expires_at)
        .execute(self.writer())
        .await
        .map_err(db_error)?;
        if done.rows_affected() == 0 {
            return Err(StoreError::ApiKeyExists(key.key_id.clone()));
        }
        Ok(())
    }

    #[tracing::instrument(name = "store.get_api_key", level = "debug", target = "waymark::store", skip_all)]
    async fn get_api_key(&self, key_id: &str) -> StoreResult<Option<ApiKeyRecord>> {
        let row: Option<KeyRow> = B::query_as(concat!("SELECT ", key_columns!(), " FROM api_keys WHERE key_id = $1"))
            .bind(key_id)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
        Ok(row.map(from_row))
    }

    #[tracing::instrument(name = "store.list_api_keys", level = "debug", target = "waymark::store", skip_all)]
    async fn list_api_keys(&self, limit: u32) -> StoreResult<Vec<ApiKeyRecord>> {
        let rows: Vec<KeyRow> = B::query_as(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys ORDER BY created_at DESC, key_id LIMIT $1"
        ))
        .bind(limit as i64)
        .fetch_all(self.reader())
        .await
        .map_err(db_error)?;
        Ok(rows.into_iter().map(from_row).collect())
    }

    #[tracing::instrument(name = "store.revoke_api_key", level = "debug", target = "waymark::store", skip_all)]
    async fn revoke_api_key(&self, key_id: &str, now: Millis) -> StoreResult<bool> {
        let done = B::query("UPDATE api_keys SET revoked_at = $2 WHERE key_id = $1 AND revoked_at IS NULL")
            .bind(key_id)
            .bind(now)
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(
        name = "store.set_api_key_namespaces",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn set_api_key_namespaces(&self, key_id: &str, namespaces: &[String]) -> StoreResult<bool> {
        let done = B::query("UPDATE api_keys SET namespaces = $2 WHERE key_id = $1")
            .bind(key_id)
            .bind(serde_json::to_string(namespaces).expect("a list of strings serializes"))
            .execute(self.writer())
            .await
            .map_err(db_error)?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(
        name = "store.any_api_key_with_role",
        level = "debug",
        target = "waymark::store",
        skip_all
    )]
    async fn any_api_key_with_role(&self, role: &str) -> StoreResult<bool> {
        let found: Option<(String,)> = B::query_as("SELECT key_id FROM api_keys WHERE role = $1 LIMIT 1")
            .bind(role)
            .fetch_optional(self.reader())
            .await
            .map_err(db_error)?;
        Ok(found.is_some())
    }
}
