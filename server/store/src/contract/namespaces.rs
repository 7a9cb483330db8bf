//! The list of namespaces. It lives in the `default` namespace's store only: each namespace's
//! data lives in a store of its own (a schema, a file), which the server opens by name.

use async_trait::async_trait;

use crate::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub name: String,
    pub created_at: Millis,
}

#[async_trait]
pub trait NamespaceList: Send + Sync {
    /// Adds a namespace to the list; `NamespaceExists` when it is there already.
    async fn add_namespace(&self, name: &str, now: Millis) -> StoreResult<NamespaceRecord>;

    async fn get_namespace(&self, name: &str) -> StoreResult<Option<NamespaceRecord>>;

    /// The namespaces by name, at most `limit`.
    async fn list_namespaces(&self, limit: u32) -> StoreResult<Vec<NamespaceRecord>>;

    /// Takes a namespace off the list; false when it was not on it.
    async fn remove_namespace(&self, name: &str) -> StoreResult<bool>;
}
