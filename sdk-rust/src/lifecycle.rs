//! The end of a workflow's records: deleting finished workflows.

use waymark_proto::v1;

use crate::{Client, Error};

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
}
