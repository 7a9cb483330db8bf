//! `waymark server`: open the store, apply migrations, serve, drain on SIGTERM.

use std::{path::PathBuf, sync::Arc, time::Duration};

use tonic::transport::{Certificate, Identity, ServerTlsConfig};

use waymark_store::{postgres::PostgresStore, sqlite::SqliteStore, SchemaPolicy, Store};

use crate::auth::Authenticator;
use crate::namespaces::{Namespaces, Storage};

/// How often a replica looks for namespaces deleted through another one.
const NAMESPACE_REFRESH: Duration = Duration::from_secs(5);
use crate::engine::{Engine, EngineConfig, SystemClock};

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7450";
pub const DEFAULT_DATABASE_URL: &str = "sqlite:.waymark/waymark.db";

#[derive(Debug, Clone)]
pub struct ServerOptions {
    pub listen: String,
    /// Where `/metrics`, `/healthz` and `/readyz` are served (off: none).
    pub metrics_listen: Option<String>,
    /// Which answered calls leave an access line.
    pub access_log: crate::api::observe::AccessLog,
    pub database_url: String,
    /// Announce changes to other replicas with PostgreSQL NOTIFY (off: they poll).
    pub notify: bool,
    pub security: SecurityOptions,
    pub engine: EngineConfig,
    /// Most namespaces, `default` included.
    pub max_namespaces: usize,
    /// PostgreSQL: connections of the default namespace's pool, and of each other one's.
    pub db_pool_size: u32,
    pub db_namespace_pool_size: u32,
    /// The web console: where, and whether it may change anything.
    pub console: crate::console::ConsoleOptions,
    /// Apply migrations at start, or only check that they were (`--no-migrate`).
    pub schema: SchemaPolicy,
}

/// Authentication and TLS (see `waymark server --help`).
#[derive(Debug, Clone, Default)]
pub struct SecurityOptions {
    pub auth: bool,
    pub init_admin_key_file: Option<PathBuf>,
    /// An admin key made elsewhere (`waymark key generate`), registered at start.
    pub admin_key_file: Option<PathBuf>,
    pub key_cache_ttl: Duration,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub tls_client_ca: Option<PathBuf>,
    /// A connection that has not finished its TLS handshake by then is closed.
    pub tls_handshake_timeout: Duration,
    pub insecure: bool,
}

impl SecurityOptions {
    fn tls(&self) -> anyhow::Result<Option<ServerTlsConfig>> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| anyhow::anyhow!("cannot read {}: {e}", p.display()));
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            anyhow::ensure!(
                self.tls_cert.is_none() && self.tls_key.is_none() && self.tls_client_ca.is_none(),
                "TLS needs both --tls-cert and --tls-key"
            );
            return Ok(None);
        };
        let mut tls = ServerTlsConfig::new()
            .identity(Identity::from_pem(read(cert)?, read(key)?))
            .timeout(self.tls_handshake_timeout);
        if let Some(ca) = &self.tls_client_ca {
            tls = tls.client_ca_root(Certificate::from_pem(read(ca)?));
        }
        Ok(Some(tls))
    }

    /// Whether the metrics listener at `addr` needs keys: on loopback not; beyond it, with
    /// `--auth`, yes; beyond it without `--auth` it is refused unless `--insecure` (it names
    /// every namespace, queue and workflow name).
    fn metrics_door(&self, addr: std::net::SocketAddr) -> anyhow::Result<bool> {
        if addr.ip().is_loopback() {
            return Ok(false);
        }
        if self.auth {
            return Ok(true);
        }
        anyhow::ensure!(
            self.insecure,
            "refusing to serve metrics on {addr} without authentication: /metrics names every namespace, \
             queue and workflow name. Turn on --auth (then /metrics and /readyz need an API key that may \
             read), keep --metrics-listen on loopback, or pass --insecure to accept the risk"
        );
        Ok(false)
    }

    /// Listening beyond this machine without keys or without TLS is refused unless asked for.
    fn check_exposure(&self, addr: std::net::SocketAddr) -> anyhow::Result<()> {
        let tls = self.tls_cert.is_some();
        if addr.ip().is_loopback() || self.insecure || (self.auth && tls) {
            return Ok(());
        }
        let missing = match (self.auth, tls) {
            (false, false) => "authentication and TLS",
            (false, true) => "authentication",
            _ => "TLS",
        };
        anyhow::bail!(
            "refusing to listen on {addr} without {missing}: anyone who can reach it could read and \
             control every workflow. Turn on --auth (with --init-admin-key-file PATH for the first key) \
             and --tls-cert/--tls-key, or pass --insecure to accept the risk"
        )
    }
}

/// Opens the store a URL names: `sqlite:<path>` or `postgres://…` / `postgresql://…`.
pub async fn open_store(url: &str, notify: bool) -> anyhow::Result<Arc<dyn Store>> {
    let pool_size = waymark_store::postgres::DEFAULT_MAX_CONNECTIONS;
    open_store_with(url, notify, pool_size, SchemaPolicy::Migrate).await
}

/// [`open_store`] with at most `pool_size` PostgreSQL connections, doing about the schema what
/// `schema` says.
pub async fn open_store_with(
    url: &str,
    notify: bool,
    pool_size: u32,
    schema: SchemaPolicy,
) -> anyhow::Result<Arc<dyn Store>> {
    if url.starts_with("sqlite:") {
        Ok(Arc::new(
            SqliteStore::open_with(url, schema)
                .await
                .map_err(|e| anyhow::anyhow!("cannot open {url}: {e}"))?,
        ))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = PostgresStore::open_as(url, None, pool_size, schema)
            .await
            .map_err(|e| anyhow::anyhow!("cannot open the PostgreSQL database: {e}"))?;
        Ok(Arc::new(store.with_notify(notify)))
    } else {
        anyhow::bail!("--database-url must start with sqlite: or postgres:// (got {url:?})")
    }
}

/// What `/readyz` and the level metrics read: nothing until the replica has opened its store
/// (migrations applied), then its namespaces.
#[derive(Default)]
struct ReplicaProbe {
    namespaces: std::sync::OnceLock<Arc<Namespaces>>,
    /// `/metrics` and `/readyz` need a key that may read (the listener is beyond loopback).
    keys_required: bool,
    /// The keys, once the store is open (until then a key cannot be checked: 401).
    auth: std::sync::OnceLock<Arc<Authenticator>>,
}

#[async_trait::async_trait]
impl crate::telemetry::http::Probe for ReplicaProbe {
    async fn refresh_levels(&self) {
        crate::telemetry::metrics::metrics().clear_levels();
        if let Some(namespaces) = self.namespaces.get() {
            for engine in namespaces.all().await {
                engine.report_levels().await;
            }
        }
    }

    async fn ready(&self) -> Result<(), String> {
        let Some(namespaces) = self.namespaces.get() else {
            return Err("starting: opening the database and applying migrations".into());
        };
        namespaces.default_engine().readiness()
    }

    async fn admits(&self, authorization: Option<&str>, peer: std::net::IpAddr) -> bool {
        if !self.keys_required {
            return true;
        }
        let Some(auth) = self.auth.get() else {
            return false;
        };
        matches!(auth.authenticate(authorization, Some(peer)).await,
            Ok(p) if p.role.may(crate::auth::access::Access::Read))
    }
}

pub async fn run(opts: ServerOptions) -> anyhow::Result<()> {
    // The metrics listener comes first, so an orchestrator sees "not ready" (rather than
    // nothing) while migrations run.
    let metrics_listener = match &opts.metrics_listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {addr} for metrics: {e}"))?,
        ),
        None => None,
    };
    let keys_required = match &metrics_listener {
        Some(l) => opts.security.metrics_door(l.local_addr()?)?,
        None => false,
    };
    let probe = Arc::new(ReplicaProbe {
        keys_required,
        ..Default::default()
    });
    let metrics_task = match metrics_listener {
        Some(listener) => {
            tracing::info!(listen = %listener.local_addr()?, keys_required, "metrics, /healthz and /readyz served");
            Some(tokio::spawn(crate::telemetry::http::serve(listener, probe.clone())))
        }
        None => None,
    };
    let store = open_store_with(&opts.database_url, opts.notify, opts.db_pool_size, opts.schema).await?;
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", opts.listen))?;
    let security = &opts.security;
    security.check_exposure(listener.local_addr()?)?;
    let tls = security.tls()?;
    let console_listener = crate::console::bind(&opts.console.listen, listener.local_addr()?).await?;
    let console = match console_listener {
        Some(l) => {
            let addr = l.local_addr()?;
            security.check_exposure(addr)?;
            Some(crate::api::ConsoleDoor {
                listener: l,
                info: crate::console::ConsoleInfo {
                    url: Some(crate::console::url_of(addr, tls.is_some())),
                    read_only: opts.console.read_only,
                },
            })
        }
        None => None,
    };
    let clock: Arc<dyn crate::engine::Clock> = Arc::new(SystemClock);
    let auth = Arc::new(Authenticator::new(
        security.auth,
        store.clone(),
        clock.clone(),
        security.key_cache_ttl,
    ));
    if let Some(path) = &security.admin_key_file {
        auth.import_admin_key(path).await?;
    }
    if let Some(path) = &security.init_admin_key_file {
        auth.bootstrap_admin_key(path).await?;
    }
    let _ = probe.auth.set(auth.clone());
    let engine = Engine::new(store, clock.clone(), opts.engine.clone());
    let mut background = engine.spawn_background();
    let namespaces = Namespaces::new(
        engine.clone(),
        Storage::for_url(
            &opts.database_url,
            opts.notify,
            opts.db_namespace_pool_size,
            opts.schema,
        ),
        clock,
        opts.engine,
        opts.max_namespaces,
    );
    background.push(tokio::spawn({
        let namespaces = namespaces.clone();
        async move {
            // Namespaces deleted through another replica close here within this interval.
            let mut every = tokio::time::interval(NAMESPACE_REFRESH);
            loop {
                every.tick().await;
                namespaces.forget_deleted().await;
            }
        }
    }));
    let _ = probe.namespaces.set(namespaces.clone());
    tracing::info!(listen = %listener.local_addr()?, store = engine.backend(), auth = security.auth,
        tls = tls.is_some(), "waymark server ready");
    if let Some(c) = &console {
        let url = c.info.url.as_deref().unwrap_or_default();
        tracing::info!(url, read_only = c.info.read_only, "console at {url}");
    }
    let security = crate::api::Security {
        tls,
        auth,
        access_log: opts.access_log,
    };
    crate::api::serve(namespaces, security, listener, console, crate::api::termination()).await?;
    for task in background {
        task.abort();
    }
    if let Some(task) = metrics_task {
        task.abort();
    }
    tracing::info!("waymark server stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_or_auth_with_tls_or_insecure_may_listen() {
        let open: std::net::SocketAddr = "0.0.0.0:7450".parse().unwrap();
        let local: std::net::SocketAddr = "127.0.0.1:7450".parse().unwrap();
        let six: std::net::SocketAddr = "[::1]:7450".parse().unwrap();
        let none = SecurityOptions::default();
        assert!(none.check_exposure(local).is_ok() && none.check_exposure(six).is_ok());
        let e = none.check_exposure(open).unwrap_err().to_string();
        assert!(
            e.contains("without authentication and TLS") && e.contains("--insecure"),
            "{e}"
        );
        let auth_only = SecurityOptions {
            auth: true,
            ..Default::default()
        };
        assert!(auth_only
            .check_exposure(open)
            .unwrap_err()
            .to_string()
            .contains("without TLS"));
        let tls_only = SecurityOptions {
            tls_cert: Some("c".into()),
            tls_key: Some("k".into()),
            ..Default::default()
        };
        assert!(tls_only
            .check_exposure(open)
            .unwrap_err()
            .to_string()
            .contains("without authentication:"));
        let both = SecurityOptions { auth: true, ..tls_only };
        assert!(both.check_exposure(open).is_ok());
        let insecure = SecurityOptions {
            insecure: true,
            ..Default::default()
        };
        assert!(insecure.check_exposure(open).is_ok());
    }
}
