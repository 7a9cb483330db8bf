//! The messaging service: what passes between workflows and from the outside in, and the
//! waits on it — messages to a workflow's inbox (`messages.rs`), events a workflow sets and
//! others read (`events.rs`), streams a workflow writes and readers follow (`streams.rs`).
//! Its calls are the clients' (send, read an event, follow a stream, list); a workflow's own
//! sends, receives, sets and writes are operations of the worker stream (`crate::ops`), which
//! come here to wake what waits.

use std::sync::Arc;

use waymark_store::WorkflowRecord;

use super::{validate, waits::Waits, Core, EngineError, EngineResult};

pub struct Messaging {
    pub(super) core: Arc<Core>,
    /// Everything waiting on this replica; messaging wakes the receives, event reads and
    /// stream readers among it.
    pub(super) waits: Arc<Waits>,
}

impl Messaging {
    pub(crate) fn new(core: Arc<Core>, waits: Arc<Waits>) -> Messaging {
        Messaging { core, waits }
    }

    /// The workflow a call names, or WORKFLOW_NOT_FOUND.
    pub(super) async fn workflow(&self, workflow_id: &str) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        self.core
            .store
            .get_workflow(workflow_id)
            .await?
            .ok_or_else(|| EngineError::not_found(workflow_id))
    }
}
