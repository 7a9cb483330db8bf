//! Workflow updates, the workflow's side: take the next update a client sent
//! ([`Client::update_workflow`](crate::Client::update_workflow)) and answer it. An update
//! arrives as a message on topic `waymark.update/<name>`, and the answer is the workflow's
//! event `waymark.update/<update id>`, which the client's call waits for; both are recorded like
//! any receive and event, so a replay takes the same update and answers it once.

use std::{future::Future, time::Duration};

use serde::{de::DeserializeOwned, Deserialize, Serialize};

use super::WorkflowContext;
use crate::WorkflowError;

use waymark_journal::updates::{answer_key, topic};

/// An update a client sent: its id (what the answer is for) and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Update<A> {
    pub id: String,
    pub args: A,
}

/// An update as the server delivers it.
#[derive(Deserialize)]
struct Delivered {
    update_id: String,
    args: serde_json::Value,
}

impl WorkflowContext {
    /// Waits up to `timeout` for the next update named `name`; `None` when none came. Answer it
    /// with [`answer_update`](Self::answer_update) or [`reject_update`](Self::reject_update):
    /// the client's call waits for that. Whatever runs between is ordinary workflow code (steps,
    /// waits, sends), recorded as always. An update whose arguments are not an `A` is rejected
    /// here, saying so, and the wait goes on for the next: a client cannot fail the workflow by
    /// sending the wrong shape.
    pub fn recv_update<A: DeserializeOwned + Send>(
        &self,
        name: &str,
        timeout: Duration,
    ) -> impl Future<Output = Result<Option<Update<A>>, WorkflowError>> + Send + '_ {
        let topic = topic(name);
        // Its place in the history is taken now, in call order, as every operation's is.
        let mut receive = self.recv::<serde_json::Value>(&topic, timeout);
        async move {
            loop {
                let Some(m) = receive.await? else {
                    return Ok(None);
                };
                // The server sends nothing else on an update topic; from an older one, a message
                // that is no update has no id to answer, and is passed over.
                let Ok(delivered) = serde_json::from_value::<Delivered>(m) else {
                    receive = self.recv::<serde_json::Value>(&topic, timeout);
                    continue;
                };
                match serde_json::from_value::<A>(delivered.args) {
                    Ok(args) => {
                        return Ok(Some(Update {
                            id: delivered.update_id,
                            args,
                        }))
                    }
                    Err(e) => {
                        self.reject_update(&delivered.update_id, &format!("its arguments do not fit: {e}"))
                            .await?;
                        receive = self.recv::<serde_json::Value>(&topic, timeout);
                    }
                }
            }
        }
    }

    /// Answers update `update_id`: the client's call returns `result`. Recorded as the event
    /// `waymark.update/<update_id>`; a replay does not answer again.
    pub fn answer_update<R: Serialize>(
        &self,
        update_id: &str,
        result: &R,
    ) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        let answer = serde_json::to_value(result).map(|r| serde_json::json!({ "result": r }));
        let key = answer_key(update_id);
        let set = answer.map(|a| self.set_event(&key, &a));
        async move { set?.await }
    }

    /// Refuses update `update_id`: the client's call fails with UPDATE_REJECTED and `why`.
    pub fn reject_update(&self, update_id: &str, why: &str) -> impl Future<Output = Result<(), WorkflowError>> + Send {
        self.set_event(&answer_key(update_id), &serde_json::json!({ "rejected": why }))
    }
}
