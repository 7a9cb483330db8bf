//! The workflow service's lifecycle calls: delete, fork, re-pin, and the bulk form of these
//! and of cancel and resume. Each converts the request, calls the engine, maps the error.

use tonic::{Response, Status};
use waymark_proto::v1;

use super::{
    convert,
    observe::{note_workflow, note_workflow_id},
    status::to_status,
};
use crate::engine::{
    bulk::{BulkAction, BulkRequest},
    workflows::ListRequest,
    Engine,
};

pub async fn delete(
    engine: &Engine,
    r: v1::DeleteWorkflowRequest,
) -> Result<Response<v1::DeleteWorkflowResponse>, Status> {
    note_workflow_id(&r.workflow_id);
    let deleted_workflow_ids = engine
        .lifecycle()
        .delete_workflow(&r.workflow_id, r.cascade)
        .await
        .map_err(to_status)?;
    Ok(Response::new(v1::DeleteWorkflowResponse { deleted_workflow_ids }))
}

pub async fn fork(engine: &Engine, r: v1::ForkWorkflowRequest) -> Result<Response<v1::ForkWorkflowResponse>, Status> {
    let non_empty = |s: String| (!s.is_empty()).then_some(s);
    let fork = waymark_store::Fork {
        source: r.workflow_id,
        from_step: r.from_step,
        new_workflow_id: r.new_workflow_id,
        app_version: non_empty(r.app_version),
        queue_name: non_empty(r.queue_name),
    };
    let w = engine.lifecycle().fork_workflow(fork).await.map_err(to_status)?;
    note_workflow(&w);
    Ok(Response::new(v1::ForkWorkflowResponse {
        workflow: Some(convert::workflow(w)),
    }))
}

pub async fn set_version(
    engine: &Engine,
    r: v1::SetWorkflowVersionRequest,
) -> Result<Response<v1::SetWorkflowVersionResponse>, Status> {
    note_workflow_id(&r.workflow_id);
    let w = engine
        .lifecycle()
        .set_workflow_version(&r.workflow_id, &r.app_version, r.allow_unserved)
        .await
        .map_err(to_status)?;
    Ok(Response::new(v1::SetWorkflowVersionResponse {
        workflow: Some(convert::workflow(w)),
    }))
}

pub async fn bulk(engine: &Engine, r: v1::BulkWorkflowsRequest) -> Result<Response<v1::BulkWorkflowsResponse>, Status> {
    use v1::bulk_workflows_request::Action;
    let action = match r.action {
        Some(Action::Cancel(_)) => BulkAction::Cancel,
        Some(Action::Resume(_)) => BulkAction::Resume,
        Some(Action::Delete(_)) => BulkAction::Delete,
        Some(Action::SetVersion(v)) => BulkAction::SetVersion {
            app_version: v.app_version,
            allow_unserved: v.allow_unserved,
        },
        None => {
            return Err(to_status(crate::engine::EngineError::invalid(
                "action must be one of cancel, resume, delete, set_version",
            )))
        }
    };
    let f = r.filter.unwrap_or_default();
    let filter = ListRequest {
        statuses: convert::statuses_from_wire(&f.statuses)?,
        workflow_name: f.workflow_name,
        queue_name: f.queue_name,
        created_at_or_after: f.created_after.as_ref().map(convert::millis),
        created_before: f.created_before.as_ref().map(convert::millis),
        worker_id: f.worker_id,
        app_version: f.app_version,
        parent_workflow_id: f.parent_workflow_id,
        tags: f.tags.into_iter().collect(),
        workflow_id_prefix: f.workflow_id_prefix,
        page_size: r.batch_size,
        page_token: r.page_token,
        include_total: false,
    };
    let out = engine
        .workflows()
        .bulk_workflows(BulkRequest {
            filter,
            action,
            dry_run: r.dry_run,
        })
        .await
        .map_err(to_status)?;
    Ok(Response::new(v1::BulkWorkflowsResponse {
        matched: out.matched,
        applied: out.applied,
        skipped: out.skipped.into_iter().collect(),
        next_page_token: out.next_page_token,
        total: out.total,
    }))
}
