//! `WriteStream`: append to (or close) one of the workflow's streams, recorded as its step.

use waymark_proto::v1::{self, reply};

use super::command::{payload_text, Answer, Fenced};
use crate::engine::{Engine, WorkerSession};

pub async fn apply(engine: &Engine, session: &WorkerSession, mut w: v1::WriteStream) -> Answer {
    let fence = w.fence();
    let value = if w.close {
        None
    } else {
        Some(payload_text("stream value", w.value.as_ref())?)
    };
    let offset = engine.write_stream(session, fence, w.step_id, w.key, value).await?;
    Ok(reply::Result::StreamWritten(v1::StreamWritten { offset }))
}
