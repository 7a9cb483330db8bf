//! API keys, for administrators (an `admin` key is needed): create, list, revoke.

use waymark_proto::v1;

use crate::{Client, Error};

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads workflows, steps, messages, events, streams, queues and schedules.
    Reader,
    /// A reader that also starts, cancels, resumes, delays and sends, and changes queues and
    /// schedules.
    Client,
    /// Connects a worker stream, and nothing else.
    Worker,
    /// Everything in the namespaces it lists, their keys included; with `*`, namespaces too.
    Admin,
}

impl Role {
    fn to_wire(self) -> v1::Role {
        match self {
            Role::Reader => v1::Role::Reader,
            Role::Client => v1::Role::Client,
            Role::Worker => v1::Role::Worker,
            Role::Admin => v1::Role::Admin,
        }
    }
    fn from_wire(n: i32) -> Option<Role> {
        match v1::Role::try_from(n).ok()? {
            v1::Role::Reader => Some(Role::Reader),
            v1::Role::Client => Some(Role::Client),
            v1::Role::Worker => Some(Role::Worker),
            v1::Role::Admin => Some(Role::Admin),
            v1::Role::Unspecified => None,
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "reader" => Ok(Role::Reader),
            "client" => Ok(Role::Client),
            "worker" => Ok(Role::Worker),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("{s:?} is not a role: reader, client, worker or admin")),
        }
    }
}

/// A key to create.
#[derive(Debug, Clone)]
pub struct ApiKeySpec {
    pub name: String,
    pub role: Role,
    /// Empty: `default`. `*`: every namespace.
    pub namespaces: Vec<String>,
    /// For a worker key, the names its worker may register (`exact` or `prefix*`).
    pub name_patterns: Vec<String>,
    /// Milliseconds since the Unix epoch; `None` never expires.
    pub expires_at_ms: Option<i64>,
}

/// A key as listed (never with its secret).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ApiKeyInfo {
    pub key_id: String,
    pub name: String,
    pub role: Option<Role>,
    pub namespaces: Vec<String>,
    pub name_patterns: Vec<String>,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

fn ms(t: &prost_types::Timestamp) -> i64 {
    t.seconds * 1000 + t.nanos as i64 / 1_000_000
}

impl From<v1::ApiKey> for ApiKeyInfo {
    fn from(k: v1::ApiKey) -> Self {
        ApiKeyInfo {
            role: Role::from_wire(k.role),
            created_at_ms: k.created_at.as_ref().map(ms).unwrap_or_default(),
            expires_at_ms: k.expires_at.as_ref().map(ms),
            revoked_at_ms: k.revoked_at.as_ref().map(ms),
            key_id: k.key_id,
            name: k.name,
            namespaces: k.namespaces,
            name_patterns: k.name_patterns,
        }
    }
}

/// Who the client's key is to the server, and what the server offers ([`Client::who_am_i`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Identity {
    /// The key the client calls with; `None` when the server checks no keys.
    pub key: Option<ApiKeyInfo>,
    pub auth_enabled: bool,
    /// The namespaces that exist and the key may act in.
    pub namespaces: Vec<String>,
    pub server_version: String,
    /// Where the server's web console is (`http://127.0.0.1:7451/`), when it is on.
    pub console_url: Option<String>,
    pub console_read_only: bool,
}

impl Client {
    /// The calling key, its namespaces, and where the console is. Any key that may read.
    pub async fn who_am_i(&self) -> Result<Identity, Error> {
        let r = self.admin.clone().who_am_i(v1::WhoAmIRequest {}).await?.into_inner();
        Ok(Identity {
            key: r.key.map(Into::into),
            auth_enabled: r.auth_enabled,
            namespaces: r.namespaces,
            server_version: r.server_version,
            console_url: (!r.console_url.is_empty()).then_some(r.console_url),
            console_read_only: r.console_read_only,
        })
    }

    /// Creates a key; returns it and its text, which is shown only here.
    pub async fn create_api_key(&self, spec: &ApiKeySpec) -> Result<(ApiKeyInfo, String), Error> {
        let r = self
            .admin
            .clone()
            .create_api_key(v1::CreateApiKeyRequest {
                name: spec.name.clone(),
                role: spec.role.to_wire() as i32,
                namespaces: spec.namespaces.clone(),
                name_patterns: spec.name_patterns.clone(),
                expires_at: spec.expires_at_ms.map(crate::client::timestamp),
            })
            .await?
            .into_inner();
        Ok((r.key.unwrap_or_default().into(), r.secret))
    }

    pub async fn list_api_keys(&self) -> Result<Vec<ApiKeyInfo>, Error> {
        let r = self.admin.clone().list_api_keys(v1::ListApiKeysRequest {}).await?;
        Ok(r.into_inner().keys.into_iter().map(Into::into).collect())
    }

    /// Revokes a key; false when it was revoked already.
    pub async fn revoke_api_key(&self, key_id: &str) -> Result<bool, Error> {
        let r = self
            .admin
            .clone()
            .revoke_api_key(v1::RevokeApiKeyRequest { key_id: key_id.into() })
            .await?;
        Ok(r.into_inner().revoked)
    }
}
