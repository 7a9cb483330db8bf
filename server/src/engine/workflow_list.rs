//! Listing workflows, newest first, filtered, a page at a time: keyset pages whose opaque
//! token is the last row's (created_at, workflow_id), and a byte budget so a page of large
//! inputs still fits a response.

use base64::Engine as _;
use waymark_store::{ListQuery, Millis, WorkflowRecord, WorkflowStatus};

use super::{workflows::Workflows, EngineError, EngineResult, ErrorCode};

const DEFAULT_PAGE_SIZE: u32 = 100;
const MAX_PAGE_SIZE: u32 = 1000;
/// The longest id prefix a listing may filter by (ids are at most 256 characters too).
const MAX_PREFIX_BYTES: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct ListRequest {
    pub statuses: Vec<WorkflowStatus>,
    pub workflow_name: String,
    pub queue_name: String,
    pub created_at_or_after: Option<Millis>,
    pub created_before: Option<Millis>,
    pub worker_id: String,
    pub app_version: String,
    pub parent_workflow_id: String,
    pub page_size: i32,
    pub page_token: String,
    /// Count every match too (first page only).
    pub include_total: bool,
    /// Only workflows carrying every one of these tags.
    pub tags: waymark_store::Tags,
    /// Only workflows whose id starts with this.
    pub workflow_id_prefix: String,
}

#[derive(Debug)]
pub struct Page {
    pub workflows: Vec<WorkflowRecord>,
    pub next_page_token: String,
    /// Every workflow the filters match, when asked for on the first page.
    pub total: Option<u64>,
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Page tokens are opaque to clients: the (created_at, workflow_id) of the last row, encoded.
fn encode_token(w: &WorkflowRecord) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{}:{}", w.created_at, w.workflow_id))
}

fn decode_token(token: &str) -> EngineResult<(Millis, String)> {
    let bad = || {
        EngineError::new(
            ErrorCode::InvalidArgument,
            "INVALID_PAGE_TOKEN",
            "page_token is not one this server issued",
        )
    };
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (at, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((at.parse().map_err(|_| bad())?, id.to_string()))
}

impl Workflows {
    pub async fn list_workflows(&self, req: ListRequest) -> EngineResult<Page> {
        let limit = super::pages::page_size(req.page_size, DEFAULT_PAGE_SIZE as usize, MAX_PAGE_SIZE as usize)? as u32;
        let after = if req.page_token.is_empty() {
            None
        } else {
            Some(decode_token(&req.page_token)?)
        };
        let query = ListQuery {
            statuses: req.statuses,
            workflow_name: non_empty(&req.workflow_name),
            queue_name: non_empty(&req.queue_name),
            created_at_or_after: req.created_at_or_after,
            created_before: req.created_before,
            worker_id: non_empty(&req.worker_id),
            app_version: non_empty(&req.app_version),
            parent_workflow_id: non_empty(&req.parent_workflow_id),
            tags: req.tags,
            id_prefix: non_empty(&req.workflow_id_prefix),
            after,
            limit: limit + 1,
        };
        super::tags::validate("tags filter", &query.tags)?;
        if req.workflow_id_prefix.len() > MAX_PREFIX_BYTES {
            return Err(EngineError::invalid(format!(
                "workflow_id_prefix is at most {MAX_PREFIX_BYTES} bytes"
            )));
        }
        for (field, value) in [
            ("worker_id", &req.worker_id),
            ("app_version", &req.app_version),
            ("parent_workflow_id", &req.parent_workflow_id),
        ] {
            if !value.is_empty() {
                super::validate::name(field, value)?;
            }
        }
        let total = match req.include_total && query.after.is_none() {
            true => Some(self.core.store.count_workflows(&query).await?),
            false => None,
        };
        let mut workflows = self.core.store.list_workflows(&query).await?;
        // Inputs and outputs can be large: the page also ends before its payloads pass the
        // budget (at least one workflow, which always fits a response).
        let budget = self.core.page_budget();
        let mut used = 0usize;
        let fits = workflows
            .iter()
            .take(limit as usize)
            .position(|w| {
                let size = w.input.len()
                    + match &w.outcome {
                        Some(waymark_store::Outcome::Output(o)) => o.len(),
                        Some(waymark_store::Outcome::Failure(f)) => f.message.len(),
                        None => 0,
                    };
                used += size;
                used > budget
            })
            .map(|i| i.max(1))
            .unwrap_or(limit as usize);
        let next_page_token = if workflows.len() > fits {
            workflows.truncate(fits);
            workflows.last().map(encode_token).unwrap_or_default()
        } else {
            String::new()
        };
        Ok(Page {
            workflows,
            total,
            next_page_token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip_and_garbage_is_refused() {
        let w = WorkflowRecord {
            workflow_id: "a:b".into(),
            workflow_name: "n".into(),
            status: WorkflowStatus::Enqueued,
            queue_name: "default".into(),
            app_version: None,
            input: "null".into(),
            outcome: None,
            created_at: 1234,
            updated_at: 1234,
            recovery_attempts: 0,
            epoch: 0,
            worker_id: None,
            parent_workflow_id: None,
            deadline_at: None,
            priority: 0,
            partition_key: String::new(),
            dedup_id: None,
            started_at: None,
            wake_at: None,
            parked_on: None,
            trace: None,
            forked_from: None,
            tags: Default::default(),
            run: 0,
            continued_as: None,
        };
        assert_eq!(decode_token(&encode_token(&w)).unwrap(), (1234, "a:b".to_string()));
        assert_eq!(decode_token("not a token!").unwrap_err().reason, "INVALID_PAGE_TOKEN");
        assert_eq!(decode_token("eHl6").unwrap_err().reason, "INVALID_PAGE_TOKEN");
    }
}
