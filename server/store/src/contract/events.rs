//! A workflow's events, read from outside. (Setting one and a workflow's recorded read are
//! composed by the engine from [`crate::Transaction`]'s table operations.)

use async_trait::async_trait;

use crate::*;

/// An event of a workflow: its current value and the values it was set to, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub key: String,
    /// JSON text.
    pub value: String,
    pub updated_at: Millis,
    pub history: Vec<EventValue>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventValue {
    pub value: String,
    pub step_id: u32,
    pub set_at: Millis,
}

/// A workflow's events, read from outside.
#[async_trait]
pub trait Events: Send + Sync {
    /// The current value of an event; `WorkflowNotFound` when the workflow does not exist.
    async fn get_event(&self, workflow_id: &str, key: &str) -> StoreResult<Option<String>>;

    /// Every event of a workflow with its history; `WorkflowNotFound` when it does not exist.
    async fn list_events(&self, workflow_id: &str) -> StoreResult<Vec<EventRecord>>;

    /// Which of these (workflow, key) events are set now.
    async fn events_set(&self, keys: &[(String, String)]) -> StoreResult<Vec<(String, String)>>;
}
