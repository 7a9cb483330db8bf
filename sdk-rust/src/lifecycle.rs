//! A workflow's records after its run: deleting finished workflows, forking one into a new
//! workflow that replays part of its history.

use waymark_proto::v1;

use crate::{Client, Error, WorkflowInfo};

/// What a fork takes (see [`Client::fork`]). All optional but the source.
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Copy the source's steps before this position; `None`: all of them.
    pub from_step: Option<u32>,
    /// The fork's id; generated when `None`.
    pub workflow_id: Option<String>,
    /// Run it on workers of this application version (the fixed code); the source's when `None`.
    pub app_version: Option<String>,
    /// Its queue; the source's when `None`.
    pub queue: Option<String>,
}

impl Client {
    /// Deletes a finished workflow and everything recorded for it (steps, messages to it,
    /// events, stream values); with `cascade`, its child workflows and theirs too. Returns the
    /// ids deleted, `workflow_id` first. A workflow that has not finished is refused
    /// (`WORKFLOW_NOT_FINISHED`: cancel it first); so is a child whose parent has not
    /// (`PARENT_NOT_FINISHED`). Sent once: repeated after a lost reply it would find the
    /// workflow gone (`NotFound`).
    pub async fn delete(&self, workflow_id: &str, cascade: bool) -> Result<Vec<String>, Error> {
        let req = v1::DeleteWorkflowRequest {
            workflow_id: workflow_id.into(),
            cascade,
        };
        let r = self.rpc.clone().delete_workflow(req).await?;
        Ok(r.into_inner().deleted_workflow_ids)
    }

    /// Starts a new workflow from `workflow_id`'s history: the same name and input, its
    /// recorded steps before `options.from_step` copied (with the events and stream values it
    /// had by then), so the fork replays up to there and runs on — on `options.app_version`'s
    /// workers if given. Returns the fork (ENQUEUED, its lineage in `forked_from_*`). The id is
    /// chosen here when not given, so a resend after a lost reply returns the same fork.
    pub async fn fork(&self, workflow_id: &str, options: ForkOptions) -> Result<WorkflowInfo, Error> {
        let req = v1::ForkWorkflowRequest {
            workflow_id: workflow_id.into(),
            from_step: options.from_step,
            new_workflow_id: options.workflow_id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            app_version: options.app_version.unwrap_or_default(),
            queue_name: options.queue.unwrap_or_default(),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.fork_workflow(req).await }
        })
        .await?;
        r.into_inner()
            .workflow
            .map(WorkflowInfo::from)
            .ok_or_else(|| Error::Serialization("the server's answer carried no workflow".into()))
    }
}
