//! Namespaces: separate worlds on one server. Each namespace has a store of its own (on
//! PostgreSQL a schema, on SQLite a database file beside the main one) and an engine of its own
//! over it — its own dispatcher, worker sessions, waits and schedules — so the same workflow id,
//! queue or schedule name can exist in two namespaces, a worker attached in one is only ever
//! given that namespace's work, and no query of one can reach another's rows. `default` is the
//! store the server was started on, holding everything written before namespaces existed.
//!
//! Every call names its namespace (`waymark-namespace` metadata, `default` when absent); the
//! authentication layer checks the key may act there and the services ask [`Namespaces`] for
//! its engine. A namespace made through another replica is opened here on its first call.

mod storage;

use std::{collections::HashMap, sync::Arc};

use tokio::sync::{Mutex, RwLock};
use waymark_store::{ListQuery, NamespaceLimits, NamespaceRecord, Store, WorkflowStatus};

pub use storage::Storage;

use crate::engine::{Clock, Engine, EngineConfig, EngineError, EngineResult, ErrorCode};

/// The namespace every server has, which cannot be deleted.
pub const DEFAULT: &str = "default";

/// How a call names its namespace, carried in the request's extensions by the authentication
/// layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace(pub String);

/// One open namespace: its engine and the engine's background tasks.
struct Open {
    engine: Arc<Engine>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// The open namespaces of this replica.
pub struct Namespaces {
    default: Arc<Engine>,
    storage: Storage,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    max: usize,
    open: RwLock<HashMap<String, Open>>,
    /// Opening is one at a time: two calls naming a new namespace open it once.
    opening: Mutex<()>,
}

pub fn not_found(name: &str) -> EngineError {
    EngineError::new(
        ErrorCode::NotFound,
        "NAMESPACE_NOT_FOUND",
        format!("namespace {name:?} does not exist"),
    )
}

/// A namespace name: 1-40 of `a-z`, `0-9` and `-`, starting with a letter or digit. Kept
/// narrow because it names a schema and a file.
pub fn validate_name(name: &str) -> EngineResult<()> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-');
    if ok {
        Ok(())
    } else {
        Err(EngineError::invalid(format!(
            "namespace {name:?}: 1-40 characters of a-z, 0-9 and -, not starting with -"
        )))
    }
}

impl Namespaces {
    pub fn new(
        default: Arc<Engine>,
        storage: Storage,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
        max: usize,
    ) -> Arc<Namespaces> {
        Arc::new(Namespaces {
            default,
            storage,
            clock,
            config,
            max: max.max(1),
            open: RwLock::new(HashMap::new()),
            opening: Mutex::new(()),
        })
    }

    /// The `default` namespace's engine, whose store also holds the namespace list and keys.
    pub fn default_engine(&self) -> &Arc<Engine> {
        &self.default
    }

    fn list_store(&self) -> &Arc<dyn Store> {
        &self.default.core.store
    }

    /// The engine of namespace `name`, opening it here if another replica made it.
    pub async fn engine(&self, name: &str) -> EngineResult<Arc<Engine>> {
        if name == DEFAULT {
            return Ok(self.default.clone());
        }
        if let Some(o) = self.open.read().await.get(name) {
            return Ok(o.engine.clone());
        }
        validate_name(name).map_err(|_| not_found(name))?;
        let _turn = self.opening.lock().await;
        if let Some(o) = self.open.read().await.get(name) {
            return Ok(o.engine.clone());
        }
        if self.list_store().get_namespace(name).await?.is_none() {
            return Err(not_found(name));
        }
        self.open_here(name).await
    }

    async fn open_here(&self, name: &str) -> EngineResult<Arc<Engine>> {
        if self.open.read().await.len() + 1 >= self.max {
            return Err(EngineError::new(
                ErrorCode::ResourceExhausted,
                "TOO_MANY_NAMESPACES",
                format!("this server opens at most {} namespaces", self.max),
            ));
        }
        let store = self.storage.open(name).await?;
        let config = EngineConfig {
            namespace: name.to_string(),
            ..self.config.clone()
        };
        // Its places come from the replica's caps, shared with every other namespace.
        let engine = Engine::sharing(store, self.clock.clone(), config, self.default.core.shared.clone());
        if let Some(record) = self.list_store().get_namespace(name).await? {
            engine.core.quota.set(record.limits);
        }
        let tasks = engine.spawn_background();
        tracing::info!(namespace = name, "namespace opened");
        self.open.write().await.insert(
            name.to_string(),
            Open {
                engine: engine.clone(),
                tasks,
            },
        );
        Ok(engine)
    }

    /// Makes a namespace: on the list, and its store created and migrated.
    pub async fn create(&self, name: &str) -> EngineResult<NamespaceRecord> {
        validate_name(name)?;
        let _turn = self.opening.lock().await;
        let count = self.list_store().list_namespaces(self.max as u32 + 1).await?.len();
        if count >= self.max {
            return Err(EngineError::new(
                ErrorCode::ResourceExhausted,
                "TOO_MANY_NAMESPACES",
                format!("a server holds at most {} namespaces", self.max),
            ));
        }
        // The store first: a namespace on the list always has one.
        self.storage.open(name).await?;
        let record = self.list_store().add_namespace(name, self.clock.now()).await?;
        tracing::info!(namespace = name, "namespace created");
        Ok(record)
    }

    /// A namespace's record, if it is on the list.
    pub async fn record(&self, name: &str) -> EngineResult<Option<NamespaceRecord>> {
        Ok(self.list_store().get_namespace(name).await?)
    }

    pub async fn list(&self) -> EngineResult<Vec<NamespaceRecord>> {
        Ok(self.list_store().list_namespaces(self.max as u32 + 1).await?)
    }

    /// A namespace's record and whether it holds unfinished workflows.
    pub async fn describe(&self, name: &str) -> EngineResult<(NamespaceRecord, bool)> {
        let record = self
            .list_store()
            .get_namespace(name)
            .await?
            .ok_or_else(|| not_found(name))?;
        let engine = self.engine(name).await?;
        Ok((record, holds_unfinished(&engine.core.store).await?))
    }

    /// Deletes a namespace and everything in it. Refused for `default`, and while it holds
    /// workflows that have not finished unless `force`.
    pub async fn delete(&self, name: &str, force: bool) -> EngineResult<()> {
        if name == DEFAULT {
            return Err(EngineError::new(
                ErrorCode::FailedPrecondition,
                "NAMESPACE_PROTECTED",
                "the default namespace cannot be deleted",
            ));
        }
        let (_, unfinished) = self.describe(name).await?;
        if unfinished && !force {
            return Err(EngineError::new(
                ErrorCode::FailedPrecondition,
                "NAMESPACE_NOT_EMPTY",
                format!("namespace {name:?} holds workflows that have not finished; delete it with force to drop them"),
            ));
        }
        let _turn = self.opening.lock().await;
        self.list_store().remove_namespace(name).await?;
        self.close(name).await;
        self.storage.drop(name).await?;
        tracing::info!(namespace = name, force, "namespace deleted");
        Ok(())
    }

    /// Closes this replica's engine of `name`: its workers are told to drain, its tasks stop.
    async fn close(&self, name: &str) {
        let Some(o) = self.open.write().await.remove(name) else {
            return;
        };
        o.engine.begin_shutdown().await;
        for t in o.tasks {
            t.abort();
        }
    }

    /// Closes the namespaces another replica deleted (called now and then).
    pub async fn forget_deleted(&self) {
        let Ok(listed) = self.list().await else { return };
        let names: Vec<String> = self.open.read().await.keys().cloned().collect();
        for name in names {
            if !listed.iter().any(|n| n.name == name) {
                tracing::info!(namespace = %name, "namespace deleted elsewhere; closing it here");
                self.close(&name).await;
            }
        }
        // Limits set through another replica apply here from now on.
        for record in &listed {
            self.apply_limits(&record.name, record.limits).await;
        }
    }

    /// Sets a namespace's limits (an admin of every namespace's call): stored, and applied here at
    /// once; other replicas apply them within their refresh interval.
    pub async fn set_limits(&self, name: &str, limits: NamespaceLimits) -> EngineResult<NamespaceRecord> {
        if !self.list_store().set_namespace_limits(name, &limits).await? {
            return Err(not_found(name));
        }
        self.apply_limits(name, limits).await;
        self.list_store()
            .get_namespace(name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    async fn apply_limits(&self, name: &str, limits: NamespaceLimits) {
        if name == DEFAULT {
            self.default.core.quota.set(limits);
        } else if let Some(o) = self.open.read().await.get(name) {
            o.engine.core.quota.set(limits);
        }
    }

    /// Every open engine, `default` first: for draining the whole replica.
    pub async fn all(&self) -> Vec<Arc<Engine>> {
        let mut all = vec![self.default.clone()];
        all.extend(self.open.read().await.values().map(|o| o.engine.clone()));
        all
    }
}

async fn holds_unfinished(store: &Arc<dyn Store>) -> EngineResult<bool> {
    let found = store
        .list_workflows(&ListQuery {
            statuses: vec![
                WorkflowStatus::Enqueued,
                WorkflowStatus::Pending,
                WorkflowStatus::Delayed,
            ],
            limit: 1,
            ..Default::default()
        })
        .await?;
    Ok(!found.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_narrow() {
        for ok in ["billing", "a", "team-7", &"x".repeat(40)] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "Billing", "a_b", "a.b", "a/b", "ü", &"x".repeat(41), "a b"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }
}
