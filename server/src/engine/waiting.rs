//! What a workflow waits for, for operators (`GetWorkflow`'s `waiting_on`).
//!
//! A parked workflow's wait is in its row, so every replica can tell. A workflow waiting on its
//! worker is known only to the replica holding that wait (in its registries): another replica
//! answers nothing rather than guess.

use waymark_store::{Millis, ParkedOn, WorkflowRecord, WorkflowStatus};

use super::{workflows::Workflows, EngineResult};

/// What a waiting workflow waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// A durable sleep, or a delayed start.
    Timer,
    Message {
        topic: String,
    },
    Event {
        workflow_id: String,
        key: String,
    },
    /// Another workflow (a child) to finish.
    Workflow {
        workflow_id: String,
    },
    /// A remote step's result; `attempt` 0 when not started yet.
    RemoteStep {
        step_id: u32,
        step_name: String,
        attempt: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingOn {
    pub wait: Wait,
    /// When the wait ends if nothing comes (or the sleep's end).
    pub until: Option<Millis>,
}

impl Workflows {
    pub async fn waiting_on(&self, w: &WorkflowRecord) -> EngineResult<Option<WaitingOn>> {
        let id = w.workflow_id.as_str();
        let wait = match w.status {
            WorkflowStatus::Delayed => {
                let wait = match &w.parked_on {
                    None | Some(ParkedOn::Timer) => Wait::Timer,
                    Some(ParkedOn::Message(topic)) => Wait::Message { topic: topic.clone() },
                    Some(ParkedOn::Event { workflow_id, key }) => Wait::Event {
                        workflow_id: workflow_id.clone(),
                        key: key.clone(),
                    },
                    Some(ParkedOn::Workflow(child)) => Wait::Workflow {
                        workflow_id: child.clone(),
                    },
                    Some(ParkedOn::Step(step_id)) => self.remote_step(id, *step_id).await?,
                };
                return Ok(Some(WaitingOn { wait, until: w.wake_at }));
            }
            WorkflowStatus::Pending => {
                if let Some((topic, deadline)) = self.waits.recv.waited_by(id) {
                    return Ok(Some(WaitingOn {
                        wait: Wait::Message { topic },
                        until: Some(deadline),
                    }));
                }
                if let Some(((_, step_id), _)) = self.waits.steps.waited_by(id) {
                    self.remote_step(id, step_id).await?
                } else if let Some((child, _)) = self.waits.children.waited_by(id) {
                    Wait::Workflow { workflow_id: child }
                } else if let Some(((workflow_id, key), _)) = self.waits.events.waited_by(id) {
                    Wait::Event { workflow_id, key }
                } else {
                    return Ok(None);
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(WaitingOn { wait, until: None }))
    }

    async fn remote_step(&self, workflow_id: &str, step_id: u32) -> EngineResult<Wait> {
        let (step_name, attempt) = self
            .core
            .store
            .step_call(workflow_id, step_id)
            .await?
            .unwrap_or_default();
        Ok(Wait::RemoteStep {
            step_id,
            step_name,
            attempt,
        })
    }
}
