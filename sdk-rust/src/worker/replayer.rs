//! Replays recorded histories offline, against this worker's workflow code: no server, no
//! side effects. Every call the code makes is answered from the history; a call it does not
//! record ends the replay where a live run would go on. Use it in a test suite to check that a
//! change to workflow code still replays the histories of workflows already running (histories
//! come from `waymark workflow export` or `Client::history`, or the project's golden histories
//! in `contract/`).

use std::{collections::HashMap, time::Duration};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use waymark_proto::{json, v1};

use super::{
    conn::{Conn, Limits},
    context::WorkflowContext,
    Worker, WorkflowFn,
};
use crate::{Error, WorkflowError};

/// A workflow's recorded history: what it was started with and the steps it recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedHistory {
    #[serde(default = "default_id")]
    pub workflow_id: String,
    pub workflow_name: String,
    #[serde(default)]
    pub input: Value,
    #[serde(default)]
    pub steps: Vec<RecordedStep>,
}

fn default_id() -> String {
    "replay".into()
}

/// One recorded step: its position, name, and output or failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedStep {
    pub step_id: u32,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<RecordedFailure>,
}

impl From<crate::StepInfo> for RecordedStep {
    fn from(s: crate::StepInfo) -> Self {
        RecordedStep {
            step_id: s.step_id,
            name: s.name,
            output: if s.failure.is_some() {
                None
            } else {
                s.output.or(Some(Value::Null))
            },
            failure: s.failure.map(|f| RecordedFailure {
                kind: f.kind,
                message: f.message,
            }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedFailure {
    pub kind: String,
    pub message: String,
}

/// How a replay ended.
#[derive(Debug)]
pub enum Replayed {
    /// The code returned this, every call answered by the history.
    Returned(Value),
    /// The code failed: its own error, a recorded failure it did not handle, or
    /// [`WorkflowError::NonDeterminism`] when it called another step than the history records.
    Failed(WorkflowError),
    /// The code made a call at `step_id`, which the history does not record: a live run would
    /// go on from there.
    Suspended { step_id: u32 },
    /// The code continued as new with this input: a live run would end here and the workflow
    /// go on with a fresh history.
    ContinuedAsNew(Value),
}

/// Replays histories against the workflows a [`Worker`] registered.
pub struct Replayer {
    workflows: HashMap<String, WorkflowFn>,
}

impl Worker {
    /// A replayer for this worker's workflows (nothing connects).
    pub fn replayer(&self) -> Replayer {
        Replayer {
            workflows: self.config.workflows.clone(),
        }
    }
}

impl Replayer {
    /// Replays `history` with the workflow it names. Fails only when no such workflow is
    /// registered; how the code fared is in [`Replayed`].
    pub async fn replay(&self, history: &RecordedHistory) -> Result<Replayed, Error> {
        let f = self
            .workflows
            .get(&history.workflow_name)
            .ok_or_else(|| Error::UnknownWorkflow(history.workflow_name.clone()))?;
        let dispatch = v1::DispatchWorkflow {
            workflow_id: history.workflow_id.clone(),
            workflow_name: history.workflow_name.clone(),
            epoch: 1,
            input: Some(json::to_payload(&history.input)),
            steps: history.steps.iter().map(step).collect(),
            ..Default::default()
        };
        // Nothing is ever sent: the context ends the run before a request would go out.
        let (tx, _) = mpsc::channel(1);
        let conn = std::sync::Arc::new(Conn::new(tx, Duration::ZERO, Limits::default()));
        let ctx = WorkflowContext::offline(&dispatch, conn);
        Ok(match f(ctx, history.input.clone()).await {
            Ok(v) => Replayed::Returned(v),
            Err(WorkflowError::HistoryEnded { step_id }) => Replayed::Suspended { step_id },
            Err(WorkflowError::ContinueAsNew(input)) => Replayed::ContinuedAsNew(input),
            Err(e) => Replayed::Failed(e),
        })
    }
}

fn step(s: &RecordedStep) -> v1::Step {
    v1::Step {
        step_id: s.step_id,
        name: s.name.clone(),
        output: match (&s.failure, &s.output) {
            (None, Some(v)) => Some(json::to_payload(v)),
            (None, None) => Some(json::to_payload(&Value::Null)),
            (Some(_), _) => None,
        },
        failure: s.failure.as_ref().map(|f| v1::Failure {
            kind: f.kind.clone(),
            message: f.message.clone(),
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::WorkflowContext;

    async fn looper(ctx: WorkflowContext, n: u32) -> Result<u32, WorkflowError> {
        let tick = ctx.step("tick", move || async move { Ok::<_, String>(n) }).await?;
        if tick >= 2 {
            return Ok(tick);
        }
        ctx.continue_as_new(&(n + 1))
    }

    fn history(input: Value, steps: &[(&str, Value)]) -> RecordedHistory {
        RecordedHistory {
            workflow_id: "loop".into(),
            workflow_name: "looper".into(),
            input,
            steps: steps
                .iter()
                .enumerate()
                .map(|(i, (name, out))| RecordedStep {
                    step_id: i as u32,
                    name: name.to_string(),
                    output: Some(out.clone()),
                    failure: None,
                })
                .collect(),
        }
    }

    #[tokio::test]
    async fn a_run_that_continued_as_new_replays_to_the_same_next_input() {
        let replayer = Worker::builder().workflow("looper", looper).build().replayer();
        let first = replayer
            .replay(&history(json!(0), &[("tick", json!(0))]))
            .await
            .unwrap();
        assert!(
            matches!(&first, Replayed::ContinuedAsNew(v) if *v == json!(1)),
            "{first:?}"
        );
        let last = replayer
            .replay(&history(json!(2), &[("tick", json!(2))]))
            .await
            .unwrap();
        assert!(matches!(&last, Replayed::Returned(v) if *v == json!(2)), "{last:?}");
        // Each run's history is its own: another step at its first position is non-determinism.
        let other = replayer
            .replay(&history(json!(0), &[("tock", json!(0))]))
            .await
            .unwrap();
        assert!(
            matches!(&other, Replayed::Failed(WorkflowError::NonDeterminism(_))),
            "{other:?}"
        );
    }
}
