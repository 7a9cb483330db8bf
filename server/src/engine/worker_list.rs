//! Listing the workers connected to a namespace through any replica.
//!
//! Each stream's declaration is written once with its lease when it connects, and its load
//! (credits, work in flight) with every heartbeat — the write the heartbeat makes anyway — so
//! any replica can list the whole fleet from the database. For streams attached to the replica
//! that answers, the load is read live instead.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use serde::{Deserialize, Serialize};
use waymark_store::{Millis, SessionRecord};

use super::{worker::Workers, Core, EngineResult, Registration, WorkerSession};

/// Most workers one listing returns.
pub const MAX_LISTED_WORKERS: u32 = 10_000;

/// What a stream declared, as kept with its lease.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declared {
    pub app_name: String,
    pub app_version: String,
    pub sdk: String,
    pub queues: Vec<String>,
    pub workflow_names: Vec<String>,
    pub step_names: Vec<String>,
    pub connected_at: Millis,
}

/// A stream's load at a heartbeat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Load {
    pub workflow_credits: u32,
    pub step_credits: u32,
    pub workflows_in_flight: u32,
}

/// One connected worker stream, as `ListWorkers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerView {
    pub worker_id: String,
    pub declared: Declared,
    pub load: Load,
    pub last_heartbeat: Millis,
}

impl Declared {
    pub(crate) fn of(r: &Registration, connected_at: Millis) -> Declared {
        Declared {
            app_name: r.app_name.clone(),
            app_version: r.app_version.clone(),
            sdk: r.sdk.clone(),
            queues: r.queues.clone(),
            workflow_names: r.workflow_names.clone(),
            step_names: r.step_names.clone(),
            connected_at,
        }
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).expect("plain fields serialize")
    }
}

impl Load {
    pub(crate) fn of(s: &WorkerSession) -> Load {
        Load {
            workflow_credits: s.credits(),
            step_credits: s.step_credits(),
            workflows_in_flight: s.in_flight() as u32,
        }
    }

    pub(crate) fn json(&self) -> String {
        serde_json::to_string(self).expect("plain fields serialize")
    }
}

impl Workers {
    /// The live worker streams of this namespace (every replica's), those taking from `queue`
    /// when it is given.
    pub async fn list_workers(&self, queue: &str) -> EngineResult<Vec<WorkerView>> {
        let local: HashMap<String, Arc<WorkerSession>> = self
            .sessions
            .all()
            .into_iter()
            .map(|s| (s.lease_id.clone(), s))
            .collect();
        let stored = self
            .core
            .store
            .live_sessions(self.core.now(), MAX_LISTED_WORKERS)
            .await?;
        let views = stored
            .into_iter()
            .map(|s| view(s, &local))
            .filter(|v| queue.is_empty() || v.declared.queues.iter().any(|q| q == queue))
            .collect();
        Ok(views)
    }
}

/// The workflow names the connected workers of `app_version` register (any replica's).
pub(crate) async fn served_names(core: &Core, app_version: &str) -> EngineResult<HashSet<String>> {
    let stored = core.store.live_sessions(core.now(), MAX_LISTED_WORKERS).await?;
    Ok(stored
        .iter()
        .map(declared)
        .filter(|d| d.app_version == app_version)
        .flat_map(|d| d.workflow_names)
        .collect())
}

/// What a stream declared, as written with its lease.
fn declared(s: &SessionRecord) -> Declared {
    s.info
        .as_deref()
        .and_then(|i| serde_json::from_str(i).ok())
        .unwrap_or_default()
}

fn view(s: SessionRecord, local: &HashMap<String, Arc<WorkerSession>>) -> WorkerView {
    let here = local.get(&s.session_id);
    // A stream attached here is described from what it holds now; another replica's from what
    // it wrote last (its declaration, its last heartbeat's load).
    let declared = declared(&s);
    let load = match here {
        Some(l) => Load::of(l),
        None => s
            .load
            .as_deref()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_default(),
    };
    WorkerView {
        worker_id: s.worker_id,
        declared,
        load,
        last_heartbeat: here.map_or(s.updated_at, |l| l.last_seen().max(s.updated_at)),
    }
}
