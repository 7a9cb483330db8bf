//! Workflow updates: a client asks a running workflow something and gets its answer in the same
//! call. Built from what is already durable: the update goes to the workflow as a message on
//! topic `waymark.update/<name>`, keyed by its update id (so it is delivered once however often
//! the call is repeated), the workflow takes it with a receive and answers by setting its event
//! `waymark.update/<update_id>`, which the call waits for. The message, the receive, the
//! handler's steps and the answer are each recorded, so a crash between any two loses nothing
//! and runs no step twice; a repeated call finds the answer already there.

use std::time::Duration;

use super::{
    events::{EventWait, MAX_CLIENT_WAIT},
    messages::SendRequest,
    validate,
    workflows::Workflows,
    EngineError, EngineResult, ErrorCode,
};

pub use waymark_journal::updates::PREFIX;
use waymark_journal::updates::{answer_key, topic};
/// How long a call waits for the answer when it does not say.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// Longest update name: its topic must stay a valid name.
const MAX_NAME: usize = 200;

#[derive(Debug, Clone, Default)]
pub struct UpdateRequest {
    pub workflow_id: String,
    pub name: String,
    /// JSON text.
    pub args: String,
    /// "" for one generated here.
    pub update_id: String,
    pub timeout: Option<Duration>,
}

/// The answer the workflow wrote, as its SDK writes it: `{"result": …}` or `{"rejected": "…"}`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
enum Answer {
    #[serde(rename = "result")]
    Result(Box<serde_json::value::RawValue>),
    #[serde(rename = "rejected")]
    Rejected(String),
}

impl Workflows {
    /// Sends the update and waits for the workflow's answer: its id and the result (JSON text).
    pub async fn update_workflow(&self, req: UpdateRequest) -> EngineResult<(String, String)> {
        validate::name("workflow_id", &req.workflow_id)?;
        validate::name("name", &req.name)?;
        if req.name.chars().count() > MAX_NAME {
            return Err(EngineError::invalid(format!(
                "an update name is at most {MAX_NAME} characters"
            )));
        }
        validate::optional_name("update_id", &req.update_id)?;
        validate::payload("args", &req.args, self.core.config.max_payload_bytes)?;
        let timeout = req.timeout.unwrap_or(DEFAULT_WAIT);
        if timeout.is_zero() || timeout > MAX_CLIENT_WAIT {
            return Err(EngineError::invalid(
                "timeout must be more than zero and at most 24 hours",
            ));
        }
        let update_id = if req.update_id.is_empty() {
            uuid::Uuid::now_v7().to_string()
        } else {
            req.update_id
        };
        let key = answer_key(&update_id);
        // A repeated call, once the workflow answered (it may have ended since).
        if let Some(answer) = self.core.store.get_event(&req.workflow_id, &key).await? {
            return answered(update_id, &answer);
        }
        // The place among the server's waits is taken before anything is written: an update
        // refused for want of one has sent nothing.
        let place = self.core.begin_wait()?;
        let message = format!(
            r#"{{"update_id":{},"args":{}}}"#,
            serde_json::Value::String(update_id.clone()),
            req.args
        );
        self.messaging
            .deliver(SendRequest {
                workflow_id: req.workflow_id.clone(),
                topic: topic(&req.name),
                message,
                idempotency_key: key.clone(),
            })
            .await?;
        match self.messaging.wait_for_event(&req.workflow_id, &key, timeout, Some(place), true).await? {
            EventWait::Set(answer) => answered(update_id, &answer),
            EventWait::Ended => Err(EngineError::new(
                ErrorCode::FailedPrecondition,
                "UPDATE_NOT_ANSWERED",
                format!("workflow {:?} ended without answering the update", req.workflow_id),
            )),
            EventWait::TimedOut => Err(EngineError::new(
                ErrorCode::DeadlineExceeded,
                "UPDATE_PENDING",
                format!(
                    "workflow {:?} has not answered update {update_id:?} yet; call again with the same update id to keep waiting",
                    req.workflow_id
                ),
            )
            .with("update_id", update_id)),
        }
    }
}

/// The workflow's answer as this call returns it.
fn answered(update_id: String, answer: &str) -> EngineResult<(String, String)> {
    match serde_json::from_str::<Answer>(answer) {
        Ok(Answer::Result(r)) => Ok((update_id, r.get().to_string())),
        Ok(Answer::Rejected(why)) => Err(EngineError::new(
            ErrorCode::FailedPrecondition,
            "UPDATE_REJECTED",
            format!("the workflow rejected the update: {why}"),
        )
        .with("update_id", update_id)),
        // Set by hand, not by an SDK's answer: handed back as the result it is.
        Err(_) => Ok((update_id, answer.to_string())),
    }
}
