//! `Recv`: a workflow takes the oldest unread message on a topic of its inbox, waiting until
//! one arrives or its deadline passes; what it took (or the timeout) is recorded as its step,
//! so a replay receives the same message. While it waits nothing is written: the wait is
//! registered here before the store is asked, so a send landing in between still wakes it.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::{Fence, Millis, Received};

use super::command::{take_fence, wait_outcome, About, Answer, Command};
use crate::engine::{validate, Engine, EngineResult, WorkerSession};

impl Command for v1::Recv {
    fn about(&self) -> About<'_> {
        About::step(&self.workflow_id, self.epoch, self.step_id)
    }

    async fn apply(mut self, engine: &Engine, session: &Arc<WorkerSession>) -> Answer {
        let fence = take_fence(&mut self.workflow_id, self.epoch);
        let received = run(engine, session, fence, self.step_id, self.topic, self.deadline_ms).await?;
        let (outcome, message) = wait_outcome(received);
        Ok(reply::Result::RecvResult(v1::RecvResult {
            outcome: outcome as i32,
            message,
            server_now_ms: engine.now_ms(),
        }))
    }
}

/// Tries to receive on `topic` for the fenced workflow as its step `step_id`; on `Waiting` the
/// worker is woken when a message may have arrived.
pub(crate) async fn run(
    engine: &Engine,
    session: &Arc<WorkerSession>,
    fence: Fence,
    step_id: u32,
    topic: String,
    deadline: Millis,
) -> EngineResult<Received> {
    let now = engine.core.now();
    engine.workers.worker_write(session, &fence, 0).await?;
    validate::optional_name("topic", &topic)?;
    validate::wait_deadline("recv", deadline, now)?;
    let waits = &engine.waits.recv;
    waits.register(&fence, &topic, session, step_id, deadline);
    let result = engine.store().recv(&fence, step_id, &topic, deadline, now).await;
    if !matches!(result, Ok(Received::Waiting)) {
        waits.forget(&fence.workflow_id, &topic, step_id);
    }
    if let Ok(Received::Delivered(m)) = &result {
        // Known only now: the next write finds the cap if this passed it.
        session.grow_history(&fence.workflow_id, m.len());
    }
    Ok(result?)
}
