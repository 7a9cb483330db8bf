//! Bulk operations: cancel, resume, delete or re-pin the workflows a listing filter matches,
//! one batch per call. Each workflow goes through the same engine call as a single-workflow
//! request (so its checks, metrics and wakeups are the same), and one the action does not apply
//! to is skipped and counted by the reason that call gives — a repeated batch finds nothing
//! left to change, which is what makes a bulk operation safe to run again after a failure.

use std::collections::{BTreeMap, HashSet};

use waymark_store::{WorkflowRecord, WorkflowStatus};

use super::{workflow_list::ListRequest, workflows::Workflows, EngineResult};

/// What a bulk operation does to each workflow it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BulkAction {
    Cancel,
    Resume,
    Delete,
    SetVersion { app_version: String, allow_unserved: bool },
}

#[derive(Debug, Clone)]
pub struct BulkRequest {
    /// The filters (its page fields are this request's batch).
    pub filter: ListRequest,
    pub action: BulkAction,
    /// Count the matches and change nothing.
    pub dry_run: bool,
}

/// One batch's tally.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkOutcome {
    pub matched: u32,
    pub applied: u32,
    /// Workflows left as they were, by the reason the single-workflow call gives.
    pub skipped: BTreeMap<String, u32>,
    pub next_page_token: String,
    /// With a dry run: how many workflows the filter matches.
    pub total: Option<u64>,
}

impl Workflows {
    pub async fn bulk_workflows(&self, req: BulkRequest) -> EngineResult<BulkOutcome> {
        if let BulkAction::SetVersion { app_version, .. } = &req.action {
            super::validate::name("app_version", app_version)?;
        }
        if req.dry_run {
            let page = self
                .list_workflows(ListRequest {
                    page_size: 1,
                    page_token: String::new(),
                    include_total: true,
                    ..req.filter
                })
                .await?;
            return Ok(BulkOutcome {
                total: page.total,
                ..Default::default()
            });
        }
        let page = self
            .list_workflows(ListRequest {
                include_total: false,
                ..req.filter
            })
            .await?;
        let served = match &req.action {
            BulkAction::SetVersion {
                app_version,
                allow_unserved: false,
            } => Some(super::worker_list::served_names(&self.core, app_version).await?),
            _ => None,
        };
        let mut out = BulkOutcome {
            matched: page.workflows.len() as u32,
            next_page_token: page.next_page_token,
            ..Default::default()
        };
        for w in page.workflows {
            match self.act(&req.action, &w, served.as_ref()).await {
                Ok(None) => out.applied += 1,
                Ok(Some(reason)) => *out.skipped.entry(reason.to_string()).or_default() += 1,
                Err(e) if e.is_refusal() => *out.skipped.entry(e.reason.to_string()).or_default() += 1,
                Err(e) => return Err(e),
            }
        }
        tracing::info!(action = ?req.action, matched = out.matched, applied = out.applied, skipped = ?out.skipped, "bulk batch");
        Ok(out)
    }

    /// Applies `action` to `w`: `None` when it changed it, else why it did not.
    async fn act(
        &self,
        action: &BulkAction,
        w: &WorkflowRecord,
        served: Option<&HashSet<String>>,
    ) -> EngineResult<Option<&'static str>> {
        let id = w.workflow_id.as_str();
        match action {
            BulkAction::Cancel if w.status.is_terminal() => Ok(Some("WORKFLOW_FINISHED")),
            BulkAction::Cancel => {
                let after = self.cancel_workflow(id).await?;
                Ok((after.status != WorkflowStatus::Cancelled).then_some("WORKFLOW_FINISHED"))
            }
            BulkAction::Resume => self.resume_workflow(id).await.map(|_| None),
            BulkAction::Delete => self.lifecycle.delete_workflow(id, false).await.map(|_| None),
            BulkAction::SetVersion { app_version, .. } => {
                if w.app_version.as_deref() == Some(app_version.as_str()) {
                    return Ok(Some("UNCHANGED"));
                }
                if served.is_some_and(|names| !names.contains(&w.workflow_name)) {
                    return Ok(Some("VERSION_NOT_SERVED"));
                }
                self.core
                    .store
                    .set_app_version(id, app_version, self.core.now())
                    .await?;
                self.core.work_enqueued();
                Ok(None)
            }
        }
    }
}
