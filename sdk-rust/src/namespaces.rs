//! Namespaces, for administrators (an `admin` key is needed with authentication on).

use waymark_proto::v1;

use crate::{Client, Error};

/// A namespace as listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NamespaceInfo {
    pub name: String,
    pub created_at_ms: i64,
    /// What it may use of each replica, beside the caps every namespace shares.
    pub limits: NamespaceLimits,
    /// Filled in by [`Client::describe_namespace`] only.
    pub has_unfinished_workflows: Option<bool>,
}

/// Limits of one namespace, each per replica (`None`: no limit of its own; the server's caps,
/// shared by every namespace, still hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct NamespaceLimits {
    /// StartWorkflow calls a second; past it `NAMESPACE_START_RATE`.
    pub start_rate: Option<u32>,
    /// Worker streams open at once; past it `TOO_MANY_WORKER_STREAMS`.
    pub max_worker_streams: Option<u32>,
    /// Client calls waiting at once; past it `TOO_MANY_WAITS`.
    pub max_waits: Option<u32>,
}

fn info(n: v1::Namespace, unfinished: Option<bool>) -> NamespaceInfo {
    let l = n.limits.unwrap_or_default();
    let own = |v: u32| (v > 0).then_some(v);
    NamespaceInfo {
        name: n.name,
        created_at_ms: n
            .created_at
            .map(|t| t.seconds * 1000 + t.nanos as i64 / 1_000_000)
            .unwrap_or_default(),
        limits: NamespaceLimits {
            start_rate: own(l.start_rate),
            max_worker_streams: own(l.max_worker_streams),
            max_waits: own(l.max_waits),
        },
        has_unfinished_workflows: unfinished,
    }
}

impl Client {
    /// Creates a namespace; `NAMESPACE_EXISTS` when it exists.
    pub async fn create_namespace(&self, name: &str) -> Result<NamespaceInfo, Error> {
        let r = self
            .admin
            .clone()
            .create_namespace(v1::CreateNamespaceRequest { name: name.into() })
            .await?;
        Ok(info(r.into_inner().namespace.unwrap_or_default(), None))
    }

    pub async fn list_namespaces(&self) -> Result<Vec<NamespaceInfo>, Error> {
        let r = self.admin.clone().list_namespaces(v1::ListNamespacesRequest {}).await?;
        Ok(r.into_inner().namespaces.into_iter().map(|n| info(n, None)).collect())
    }

    pub async fn describe_namespace(&self, name: &str) -> Result<NamespaceInfo, Error> {
        let r = self
            .admin
            .clone()
            .describe_namespace(v1::DescribeNamespaceRequest { name: name.into() })
            .await?
            .into_inner();
        Ok(info(r.namespace.unwrap_or_default(), Some(r.has_unfinished_workflows)))
    }

    /// Sets a namespace's limits, whole (what is `None` is lifted). Needs an admin key of every
    /// namespace.
    pub async fn update_namespace(&self, name: &str, limits: NamespaceLimits) -> Result<NamespaceInfo, Error> {
        let r = self
            .admin
            .clone()
            .update_namespace(v1::UpdateNamespaceRequest {
                name: name.into(),
                limits: Some(v1::NamespaceLimits {
                    start_rate: limits.start_rate.unwrap_or(0),
                    max_worker_streams: limits.max_worker_streams.unwrap_or(0),
                    max_waits: limits.max_waits.unwrap_or(0),
                }),
            })
            .await?;
        Ok(info(r.into_inner().namespace.unwrap_or_default(), None))
    }

    /// Deletes a namespace and everything in it; refused (`NAMESPACE_NOT_EMPTY`) while it
    /// holds unfinished workflows unless `force`.
    pub async fn delete_namespace(&self, name: &str, force: bool) -> Result<(), Error> {
        self.admin
            .clone()
            .delete_namespace(v1::DeleteNamespaceRequest {
                name: name.into(),
                force,
            })
            .await?;
        Ok(())
    }
}
