//! Continue-as-new: ending this run so the workflow goes on with a fresh history.

use serde::Serialize;

use super::WorkflowContext;
use crate::WorkflowError;

impl WorkflowContext {
    /// Ends this run and starts the workflow again under its id with `input` and an empty
    /// history — for a workflow that loops forever (polling, its own schedule), so its history
    /// stays short. Return it from the workflow: `return ctx.continue_as_new(&next);`. Steps
    /// already recorded in this run are kept with the ended run (`<id>/run-<n>`); awaiters,
    /// parents and senders keep using the workflow's id. Not a failure; nothing is recorded at a
    /// position, so a replay of this run reaches the same call and ends the same way.
    pub fn continue_as_new<T, I: Serialize>(&self, input: &I) -> Result<T, WorkflowError> {
        match serde_json::to_value(input) {
            Ok(v) => Err(WorkflowError::ContinueAsNew(v)),
            Err(e) => Err(WorkflowError::Serialization(e.to_string())),
        }
    }
}
