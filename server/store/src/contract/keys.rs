//! API keys, as stored: the public key id, a hash of the secret, and what the key may do. The
//! store keeps them and never interprets a role or a pattern; the server's `auth` module does.

use async_trait::async_trait;

use crate::*;

/// One API key without its secret (only the secret's SHA-256, hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKeyRecord {
    pub key_id: String,
    pub secret_sha256: String,
    pub name: String,
    /// `reader`, `client`, `worker` or `admin`.
    pub role: String,
    /// The namespaces the key acts in; `*` is every one.
    pub namespaces: Vec<String>,
    /// The workflow and step names a worker key may register (empty: any).
    pub name_patterns: Vec<String>,
    pub created_at: Millis,
    pub expires_at: Option<Millis>,
    pub revoked_at: Option<Millis>,
}

#[async_trait]
pub trait ApiKeys: Send + Sync {
    /// Stores a new key; `ApiKeyExists` when its id is taken (ids are random: only a replay
    /// or a bug repeats one).
    async fn create_api_key(&self, key: &ApiKeyRecord) -> StoreResult<()>;

    async fn get_api_key(&self, key_id: &str) -> StoreResult<Option<ApiKeyRecord>>;

    /// Every key, newest first. Keys are made by administrators, a handful per service, so
    /// the list is read whole; at most `limit` of them.
    async fn list_api_keys(&self, limit: u32) -> StoreResult<Vec<ApiKeyRecord>>;

    /// Marks a key revoked at `now`; false when there is no such key or it was revoked already.
    async fn revoke_api_key(&self, key_id: &str, now: Millis) -> StoreResult<bool>;

    /// Replaces the namespaces a key acts in (a namespace it listed was deleted); false when
    /// there is no such key.
    async fn set_api_key_namespaces(&self, key_id: &str, namespaces: &[String]) -> StoreResult<bool>;

    /// Whether any key with role `role` exists, revoked or not (to bootstrap the first admin
    /// key once).
    async fn any_api_key_with_role(&self, role: &str) -> StoreResult<bool>;
}
