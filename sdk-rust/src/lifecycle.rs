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

/// Which workflows a bulk operation acts on (see [`Client::bulk`]): the filters of a listing,
/// all of which must match. The default matches every workflow.
#[derive(Debug, Clone, Default)]
pub struct WorkflowFilter {
    pub statuses: Vec<crate::WorkflowStatus>,
    pub workflow_name: Option<String>,
    pub queue: Option<String>,
    /// Milliseconds since the Unix epoch: created at or after.
    pub created_after_ms: Option<i64>,
    /// Created before.
    pub created_before_ms: Option<i64>,
    pub worker_id: Option<String>,
    pub app_version: Option<String>,
    pub parent_workflow_id: Option<String>,
    pub tags: std::collections::BTreeMap<String, String>,
    /// Whose id starts with this.
    pub workflow_id_prefix: Option<String>,
}

/// What a bulk operation does to each workflow its filter matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkAction {
    Cancel,
    Resume,
    Delete,
    /// Re-pin (see [`Client::set_version`]).
    SetVersion {
        app_version: String,
        allow_unserved: bool,
    },
}

/// What a bulk operation did: to one batch ([`Client::bulk_batch`]) or to all ([`Client::bulk`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct BulkOutcome {
    /// Workflows looked at.
    pub matched: u64,
    /// Of those, the ones the action changed.
    pub applied: u64,
    /// The others, by the reason the single-workflow call gives.
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// After one batch: the token of the next; `None` when it was the last.
    pub next_page_token: Option<String>,
}

impl WorkflowFilter {
    fn to_wire(&self) -> v1::WorkflowFilter {
        v1::WorkflowFilter {
            statuses: self.statuses.iter().map(|s| s.to_wire() as i32).collect(),
            workflow_name: self.workflow_name.clone().unwrap_or_default(),
            queue_name: self.queue.clone().unwrap_or_default(),
            created_after: self.created_after_ms.map(crate::client::timestamp),
            created_before: self.created_before_ms.map(crate::client::timestamp),
            worker_id: self.worker_id.clone().unwrap_or_default(),
            app_version: self.app_version.clone().unwrap_or_default(),
            parent_workflow_id: self.parent_workflow_id.clone().unwrap_or_default(),
            tags: self.tags.clone().into_iter().collect(),
            workflow_id_prefix: self.workflow_id_prefix.clone().unwrap_or_default(),
        }
    }
}

impl BulkAction {
    fn to_wire(&self) -> v1::bulk_workflows_request::Action {
        use v1::bulk_workflows_request::Action;
        match self {
            BulkAction::Cancel => Action::Cancel(v1::BulkCancel {}),
            BulkAction::Resume => Action::Resume(v1::BulkResume {}),
            BulkAction::Delete => Action::Delete(v1::BulkDelete {}),
            BulkAction::SetVersion {
                app_version,
                allow_unserved,
            } => Action::SetVersion(v1::BulkSetVersion {
                app_version: app_version.clone(),
                allow_unserved: *allow_unserved,
            }),
        }
    }
}

impl Client {
    /// Re-pins the unfinished `workflow_id` to `app_version`: its next dispatch goes to that
    /// version's workers, which replay its history. Refused (`VERSION_NOT_SERVED`) when no
    /// connected worker of that version registers its name, unless `allow_unserved`.
    pub async fn set_version(
        &self,
        workflow_id: &str,
        app_version: &str,
        allow_unserved: bool,
    ) -> Result<WorkflowInfo, Error> {
        let req = v1::SetWorkflowVersionRequest {
            workflow_id: workflow_id.into(),
            app_version: app_version.into(),
            allow_unserved,
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.set_workflow_version(req).await }
        })
        .await?;
        r.into_inner()
            .workflow
            .map(WorkflowInfo::from)
            .ok_or_else(|| Error::Serialization("the server's answer carried no workflow".into()))
    }

    /// How many workflows `filter` matches (a bulk operation's dry run).
    pub async fn count_matching(&self, filter: &WorkflowFilter) -> Result<u64, Error> {
        let req = v1::BulkWorkflowsRequest {
            filter: Some(filter.to_wire()),
            action: Some(BulkAction::Cancel.to_wire()),
            dry_run: true,
            ..Default::default()
        };
        let r = self.rpc.clone().bulk_workflows(req).await?.into_inner();
        Ok(r.total.unwrap_or(0))
    }

    /// Applies `action` to one batch (at most `batch_size`, 1-1000; 0 for 100) of the workflows
    /// `filter` matches, from `page_token` (`None`: the first). Resent after a lost reply: a
    /// repeated batch changes nothing twice.
    pub async fn bulk_batch(
        &self,
        filter: &WorkflowFilter,
        action: &BulkAction,
        batch_size: i32,
        page_token: Option<String>,
    ) -> Result<BulkOutcome, Error> {
        let req = v1::BulkWorkflowsRequest {
            filter: Some(filter.to_wire()),
            action: Some(action.to_wire()),
            dry_run: false,
            batch_size,
            page_token: page_token.unwrap_or_default(),
        };
        let r = crate::resend::retrying(self.resend_for, || {
            let (mut c, req) = (self.rpc.clone(), req.clone());
            async move { c.bulk_workflows(req).await }
        })
        .await?
        .into_inner();
        Ok(BulkOutcome {
            matched: r.matched.into(),
            applied: r.applied.into(),
            skipped: r.skipped.into_iter().map(|(k, v)| (k, v.into())).collect(),
            next_page_token: (!r.next_page_token.is_empty()).then_some(r.next_page_token),
        })
    }

    /// Applies `action` to every workflow `filter` matches, batch after batch; returns the sums.
    pub async fn bulk(
        &self,
        filter: &WorkflowFilter,
        action: &BulkAction,
        batch_size: i32,
    ) -> Result<BulkOutcome, Error> {
        let mut sum = BulkOutcome::default();
        let mut token = None;
        loop {
            let batch = self.bulk_batch(filter, action, batch_size, token).await?;
            sum.matched += batch.matched;
            sum.applied += batch.applied;
            for (reason, n) in batch.skipped {
                *sum.skipped.entry(reason).or_default() += n;
            }
            match batch.next_page_token {
                Some(t) => token = Some(t),
                None => return Ok(sum),
            }
        }
    }
}
