//! `WriteStream`: append to (or close) one of the workflow's streams, recorded as its step.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, take_fence, About, Answer, Command};
use crate::engine::{Engine, WorkerSession};

impl Command for v1::WriteStream {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let value = if self.close {
            None
        } else {
            Some(payload_text("stream value", self.value.as_ref())?)
        };
        let offset = engine
            .write_stream(session, fence, self.step_id, self.key, value)
            .await?;
        Ok(reply::Result::StreamWritten(v1::StreamWritten { offset }))
    }
}
