//! `WorkerService/ListWorkers`: the workers connected to the namespace, for operators.

use tonic::{Request, Response, Status};
use waymark_proto::v1;

use crate::api::{convert, status::to_status};
use crate::engine::worker_list::WorkerView;

pub async fn list_workers(
    namespaces: &crate::namespaces::Namespaces,
    req: Request<v1::ListWorkersRequest>,
) -> Result<Response<v1::ListWorkersResponse>, Status> {
    let engine = crate::api::engine_for(namespaces, &req).await?;
    let queue = req.into_inner().queue_name;
    let workers = engine.workers().list_workers(&queue).await.map_err(to_status)?;
    let namespace = engine.namespace().to_string();
    Ok(Response::new(v1::ListWorkersResponse {
        workers: workers.into_iter().map(|w| info(w, &namespace)).collect(),
    }))
}

fn info(w: WorkerView, namespace: &str) -> v1::WorkerInfo {
    let d = w.declared;
    v1::WorkerInfo {
        worker_id: w.worker_id,
        app_name: d.app_name,
        app_version: d.app_version,
        sdk: d.sdk,
        namespace: namespace.to_string(),
        queues: d.queues,
        workflow_names: d.workflow_names,
        step_names: d.step_names,
        workflow_credits: w.load.workflow_credits,
        step_credits: w.load.step_credits,
        workflows_in_flight: w.load.workflows_in_flight,
        connected_at: convert::timestamp(d.connected_at),
        last_heartbeat: convert::timestamp(w.last_heartbeat),
    }
}
