//! The list of namespaces. It lives in the `default` namespace's store only: each namespace's
//! data lives in a store of its own (a schema, a file), which the server opens by name.

use async_trait::async_trait;

use crate::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub name: String,
    pub created_at: Millis,
    pub limits: NamespaceLimits,
}

/// What one namespace may use of a server, beside the caps every namespace shares. `None`: no
/// limit of its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NamespaceLimits {
    /// Client starts a second, per replica.
    pub start_rate: Option<u32>,
    /// Worker streams open at once, per replica.
    pub max_worker_streams: Option<u32>,
    /// Client calls waiting at once (AwaitWorkflow, GetEvent, ReadStream), per replica.
    pub max_waits: Option<u32>,
}

#[async_trait]
pub trait NamespaceList: Send + Sync {
    /// Adds a namespace to the list; `NamespaceExists` when it is there already.
    async fn add_namespace(&self, name: &str, now: Millis) -> StoreResult<NamespaceRecord>;

    async fn get_namespace(&self, name: &str) -> StoreResult<Option<NamespaceRecord>>;

    /// The namespaces by name, at most `limit`.
    async fn list_namespaces(&self, limit: u32) -> StoreResult<Vec<NamespaceRecord>>;

    /// Sets a namespace's limits (all three: what is `None` is lifted); false when there is no
    /// such namespace.
    async fn set_namespace_limits(&self, name: &str, limits: &NamespaceLimits) -> StoreResult<bool>;

    /// Takes a namespace off the list; false when it was not on it.
    async fn remove_namespace(&self, name: &str) -> StoreResult<bool>;
}
