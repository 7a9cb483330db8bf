//! Namespaces, for administrators (an `admin` key is needed with authentication on).

use waymark_proto::v1;

use crate::{Client, Error};

/// A namespace as listed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NamespaceInfo {
    pub name: String,
    pub created_at_ms: i64,
    /// Filled in by [`Client::describe_namespace`] only.
    pub has_unfinished_workflows: Option<bool>,
}

fn info(n: v1::Namespace, unfinished: Option<bool>) -> NamespaceInfo {
    NamespaceInfo {
        name: n.name,
        created_at_ms: n
            .created_at
            .map(|t| t.seconds * 1000 + t.nanos as i64 / 1_000_000)
            .unwrap_or_default(),
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
