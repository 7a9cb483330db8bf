//! Listing the workers connected to the server, for operators (`waymark worker list`).

use serde::{Deserialize, Serialize};
use waymark_proto::v1::{self, worker_service_client::WorkerServiceClient};

use crate::types::ms;
use crate::{Client, Error};

/// One connected worker stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub worker_id: String,
    pub app_name: String,
    pub app_version: String,
    /// "python/0.1.0".
    pub sdk: String,
    pub namespace: String,
    pub queues: Vec<String>,
    pub workflow_names: Vec<String>,
    pub step_names: Vec<String>,
    /// Workflows and remote-step attempts the server may still send it.
    pub workflow_credits: u32,
    pub step_credits: u32,
    /// Workflows it holds.
    pub workflows_in_flight: u32,
    /// Unix ms.
    pub connected_at_ms: i64,
    pub last_heartbeat_ms: i64,
}

impl From<v1::WorkerInfo> for WorkerInfo {
    fn from(w: v1::WorkerInfo) -> Self {
        WorkerInfo {
            connected_at_ms: ms(w.connected_at.as_ref()),
            last_heartbeat_ms: ms(w.last_heartbeat.as_ref()),
            worker_id: w.worker_id,
            app_name: w.app_name,
            app_version: w.app_version,
            sdk: w.sdk,
            namespace: w.namespace,
            queues: w.queues,
            workflow_names: w.workflow_names,
            step_names: w.step_names,
            workflow_credits: w.workflow_credits,
            step_credits: w.step_credits,
            workflows_in_flight: w.workflows_in_flight,
        }
    }
}

impl Client {
    /// The workers connected through any replica (those taking from `queue` when given).
    pub async fn list_workers(&self, queue: Option<&str>) -> Result<Vec<WorkerInfo>, Error> {
        let req = v1::ListWorkersRequest {
            queue_name: queue.unwrap_or_default().to_string(),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (WorkerServiceClient::new(self.channel.clone()), req.clone());
            async move { c.list_workers(req).await }
        })
        .await?;
        Ok(r.into_inner().workers.into_iter().map(WorkerInfo::from).collect())
    }
}
