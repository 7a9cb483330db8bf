//! `waymark.v1.AdminService`: API keys and namespaces. Converts, calls the authenticator, maps
//! errors. Only admin keys get here (the authentication layer refuses the rest, and lets only an
//! admin of every namespace make, delete or limit namespaces), and each acts only within its
//! namespaces ([`crate::auth::scope`]).

use std::sync::Arc;

use tonic::{Request, Response, Status};
use waymark_proto::v1::{self, admin_service_server::AdminService};
use waymark_store::{ApiKeyRecord, NamespaceLimits, NamespaceRecord};

use super::{
    audit::{note_resource, noted},
    caller, convert,
    status::to_status,
};
use crate::auth::{Authenticator, KeySpec, Role};
use crate::namespaces::Namespaces;

pub struct AdminApi {
    pub auth: Arc<Authenticator>,
    pub namespaces: Arc<Namespaces>,
    /// What WhoAmI tells of the web console.
    pub console: crate::console::ConsoleInfo,
}

fn namespace_to_wire(n: NamespaceRecord) -> v1::Namespace {
    let wire = |v: Option<u32>| v.unwrap_or(0);
    v1::Namespace {
        name: n.name,
        created_at: convert::timestamp(n.created_at),
        limits: Some(v1::NamespaceLimits {
            start_rate: wire(n.limits.start_rate),
            max_worker_streams: wire(n.limits.max_worker_streams),
            max_waits: wire(n.limits.max_waits),
        }),
    }
}

fn limits_from_wire(l: Option<v1::NamespaceLimits>) -> NamespaceLimits {
    let l = l.unwrap_or_default();
    let own = |v: u32| (v > 0).then_some(v);
    NamespaceLimits {
        start_rate: own(l.start_rate),
        max_worker_streams: own(l.max_worker_streams),
        max_waits: own(l.max_waits),
    }
}

fn role_to_wire(role: &str) -> v1::Role {
    match Role::parse(role) {
        Some(Role::Reader) => v1::Role::Reader,
        Some(Role::Client) => v1::Role::Client,
        Some(Role::Worker) => v1::Role::Worker,
        Some(Role::Admin) => v1::Role::Admin,
        None => v1::Role::Unspecified,
    }
}

fn role_from_wire(n: i32) -> Result<Role, Status> {
    match v1::Role::try_from(n) {
        Ok(v1::Role::Reader) => Ok(Role::Reader),
        Ok(v1::Role::Client) => Ok(Role::Client),
        Ok(v1::Role::Worker) => Ok(Role::Worker),
        Ok(v1::Role::Admin) => Ok(Role::Admin),
        _ => Err(super::status::invalid("role must be READER, CLIENT, WORKER or ADMIN")),
    }
}

fn to_wire(k: ApiKeyRecord) -> v1::ApiKey {
    v1::ApiKey {
        role: role_to_wire(&k.role) as i32,
        key_id: k.key_id,
        name: k.name,
        namespaces: k.namespaces,
        name_patterns: k.name_patterns,
        created_at: convert::timestamp(k.created_at),
        expires_at: k.expires_at.and_then(convert::timestamp),
        revoked_at: k.revoked_at.and_then(convert::timestamp),
    }
}

#[tonic::async_trait]
impl AdminService for AdminApi {
    async fn create_api_key(
        &self,
        req: Request<v1::CreateApiKeyRequest>,
    ) -> Result<Response<v1::CreateApiKeyResponse>, Status> {
        let by = caller(&req);
        let r = req.into_inner();
        let spec = KeySpec {
            name: r.name,
            role: role_from_wire(r.role)?,
            namespaces: r.namespaces,
            name_patterns: r.name_patterns,
            expires_at: r.expires_at.as_ref().map(convert::millis),
        };
        let created = self.auth.create_key(by.as_deref(), spec).await.map_err(to_status)?;
        note_resource(&created.record.key_id);
        Ok(Response::new(v1::CreateApiKeyResponse {
            key: Some(to_wire(created.record)),
            secret: created.text,
        }))
    }

    async fn list_api_keys(
        &self,
        req: Request<v1::ListApiKeysRequest>,
    ) -> Result<Response<v1::ListApiKeysResponse>, Status> {
        let keys = self.auth.list_keys(caller(&req).as_deref()).await.map_err(to_status)?;
        Ok(Response::new(v1::ListApiKeysResponse {
            keys: keys.into_iter().map(to_wire).collect(),
        }))
    }

    async fn revoke_api_key(
        &self,
        req: Request<v1::RevokeApiKeyRequest>,
    ) -> Result<Response<v1::RevokeApiKeyResponse>, Status> {
        let by = caller(&req);
        let revoked = self
            .auth
            .revoke_key(by.as_deref(), &noted(req.into_inner().key_id))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::RevokeApiKeyResponse { revoked }))
    }

    async fn create_namespace(
        &self,
        req: Request<v1::CreateNamespaceRequest>,
    ) -> Result<Response<v1::CreateNamespaceResponse>, Status> {
        let name = noted(req.into_inner().name);
        // Keys left naming an earlier namespace of this name (its deletion could not reach them
        // all) do not come with the new one.
        if self.namespaces.record(&name).await.map_err(to_status)?.is_none() {
            self.auth.namespace_deleted(&name).await.map_err(to_status)?;
        }
        let n = self.namespaces.create(&name).await.map_err(to_status)?;
        Ok(Response::new(v1::CreateNamespaceResponse {
            namespace: Some(namespace_to_wire(n)),
        }))
    }

    async fn list_namespaces(
        &self,
        req: Request<v1::ListNamespacesRequest>,
    ) -> Result<Response<v1::ListNamespacesResponse>, Status> {
        let mut all = self.namespaces.list().await.map_err(to_status)?;
        if let Some(by) = caller(&req) {
            all.retain(|n| by.administers(&n.name));
        }
        Ok(Response::new(v1::ListNamespacesResponse {
            namespaces: all.into_iter().map(namespace_to_wire).collect(),
        }))
    }

    async fn describe_namespace(
        &self,
        req: Request<v1::DescribeNamespaceRequest>,
    ) -> Result<Response<v1::DescribeNamespaceResponse>, Status> {
        let by = caller(&req);
        let name = req.into_inner().name;
        // One this key does not administer is answered as one that does not exist.
        if by.as_ref().is_some_and(|p| !p.administers(&name)) {
            return Err(to_status(crate::namespaces::not_found(&name)));
        }
        let (n, unfinished) = self.namespaces.describe(&name).await.map_err(to_status)?;
        Ok(Response::new(v1::DescribeNamespaceResponse {
            namespace: Some(namespace_to_wire(n)),
            has_unfinished_workflows: unfinished,
        }))
    }

    async fn update_namespace(
        &self,
        req: Request<v1::UpdateNamespaceRequest>,
    ) -> Result<Response<v1::UpdateNamespaceResponse>, Status> {
        let r = req.into_inner();
        note_resource(&r.name);
        let n = self
            .namespaces
            .set_limits(&r.name, limits_from_wire(r.limits))
            .await
            .map_err(to_status)?;
        Ok(Response::new(v1::UpdateNamespaceResponse {
            namespace: Some(namespace_to_wire(n)),
        }))
    }

    async fn delete_namespace(
        &self,
        req: Request<v1::DeleteNamespaceRequest>,
    ) -> Result<Response<v1::DeleteNamespaceResponse>, Status> {
        let r = req.into_inner();
        note_resource(&r.name);
        self.namespaces.delete(&r.name, r.force).await.map_err(to_status)?;
        // Its keys go with it, so a namespace made later under this name is not theirs.
        self.auth.namespace_deleted(&r.name).await.map_err(to_status)?;
        Ok(Response::new(v1::DeleteNamespaceResponse {}))
    }

    async fn who_am_i(&self, req: Request<v1::WhoAmIRequest>) -> Result<Response<v1::WhoAmIResponse>, Status> {
        let by = caller(&req);
        let key = match &by {
            Some(p) => self.auth.record_of(p).await.map_err(to_status)?.map(to_wire),
            None => None,
        };
        let mut namespaces: Vec<String> = self
            .namespaces
            .list()
            .await
            .map_err(to_status)?
            .into_iter()
            .map(|n| n.name)
            .filter(|n| by.as_ref().is_none_or(|p| p.may_act_in(n)))
            .collect();
        namespaces.sort();
        Ok(Response::new(v1::WhoAmIResponse {
            key,
            auth_enabled: self.auth.enabled,
            namespaces,
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            console_url: self.console.url.clone().unwrap_or_default(),
            console_read_only: self.console.read_only,
        }))
    }
}
