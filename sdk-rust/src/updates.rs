//! A client's workflow updates: ask a running workflow something and get its answer in the
//! same call. The workflow takes the update with
//! [`WorkflowContext::recv_update`](crate::WorkflowContext::recv_update) and answers it.

use std::time::Duration;

use serde::{de::DeserializeOwned, Serialize};
use waymark_proto::{json, v1};

use crate::{Client, Error};

/// How to send an update.
#[derive(Debug, Clone, Default)]
pub struct UpdateOptions {
    /// The same id is the same update: delivered once, answered once. Generated when not given
    /// (then kept for the call's own resends).
    pub update_id: Option<String>,
    /// How long to wait for the answer (the server's default, 60 s, when not given).
    pub timeout: Option<Duration>,
}

impl Client {
    /// Sends update `name` with `args` to workflow `workflow_id` and waits for its answer.
    /// Refused with UPDATE_REJECTED when the workflow rejects it, UPDATE_PENDING when it has
    /// not answered within the timeout (call again with the same update id to keep waiting),
    /// UPDATE_NOT_ANSWERED when it ended without answering.
    pub async fn update_workflow<A: Serialize, R: DeserializeOwned>(
        &self,
        workflow_id: &str,
        name: &str,
        args: &A,
        options: UpdateOptions,
    ) -> Result<R, Error> {
        let req = v1::UpdateWorkflowRequest {
            workflow_id: workflow_id.into(),
            name: name.into(),
            args: Some(json::to_payload(&serde_json::to_value(args)?)),
            // Chosen here, so a resend is the same update.
            update_id: options.update_id.unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            timeout: options.timeout.map(crate::client::duration),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.update_workflow(req).await }
        })
        .await?
        .into_inner();
        let result = json::from_payload(r.result.as_ref()).unwrap_or(serde_json::Value::Null);
        Ok(serde_json::from_value(result)?)
    }
}
