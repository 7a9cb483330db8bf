//! `WriteStream`: a workflow appends a value to one of its streams (or closes it), recorded as
//! its step with the entry's offset; readers following the stream here are woken at once.

use std::sync::Arc;

use waymark_proto::v1::{self, reply};
use waymark_store::changes::Change;
use waymark_store::recorded as journal;
use waymark_store::{Fence, FenceLock, Millis, Store, StoreResult, CLOSE_STREAM_STEP, WRITE_STREAM_STEP};

use super::command::{payload_text, take_fence, About, Answer, Command};
use super::compose::{record, settle, End, Tx};
use crate::engine::{events::BUILTIN_STEP_BYTES, validate, Engine, WorkerSession};

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
        // The step records the offset ({"offset": N}); the value lives with the stream.
        let adds = BUILTIN_STEP_BYTES + self.key.len();
        engine.workers.worker_write(session, &fence, adds).await?;
        validate::name("key", &self.key)?;
        if let Some(v) = &value {
            validate::payload("stream value", v, engine.config().max_payload_bytes)?;
        }
        let (store, now) = (engine.store(), engine.core.now());
        let offset = write_stream(store, &fence, self.step_id, &self.key, value.as_deref(), now).await?;
        session.grow_history(&fence.workflow_id, adds);
        engine.waits.streams.wake(&fence.workflow_id, Some(&self.key));
        Ok(reply::Result::StreamWritten(v1::StreamWritten { offset }))
    }
}

/// Appends `value` to the fenced workflow's stream `key` (or with `None` closes it), recorded
/// as its step; returns the entry's offset. A replay returns the recorded offset.
pub(crate) async fn write_stream(
    store: &dyn Store,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: Option<&str>,
    now: Millis,
) -> StoreResult<u64> {
    let mut tx = store.begin(now).await?;
    let body = write_stream_in(&mut tx, fence, step_id, key, value).await;
    settle(tx, body).await
}

async fn write_stream_in(
    tx: Tx<'_, '_>,
    fence: &Fence,
    step_id: u32,
    key: &str,
    value: Option<&str>,
) -> StoreResult<End<u64>> {
    let name = if value.is_some() {
        WRITE_STREAM_STEP
    } else {
        CLOSE_STREAM_STEP
    };
    // Appends of one workflow take turns, so two cannot take one offset.
    if let Some(done) = tx.fence(fence, step_id, FenceLock::Alone).await? {
        return journal::replay_stream(&fence.workflow_id, &done, name).map(End::Release);
    }
    let offset = tx.append_stream(&fence.workflow_id, key, value).await?;
    record(tx, fence, step_id, name, &journal::stream_output(offset)).await?;
    let change = Change::Stream {
        workflow_id: fence.workflow_id.clone(),
        key: key.to_string(),
    };
    Ok(End::Commit(offset, vec![change]))
}

#[cfg(test)]
mod tests {
    //! Appended in order per key, closed, replayed from the record, fenced, and refused as
    //! non-determinism when another step is recorded at its position.

    use std::sync::Arc;

    use waymark_store::*;
    use waymark_store_conformance::{claim_one, fence, session, start, wf, T};

    use super::write_stream;
    use crate::ops::testing::on_both_stores;

    on_both_stores!(streams_append_in_order_and_close);

    async fn streams_append_in_order_and_close(s: Arc<dyn Store>) {
        let s = &*s;
        start(s, wf("st", "S", "q"), T).await;
        s.renew_session_lease(&session("A"), "A", T + 60_000, T).await.unwrap();
        claim_one(s, "A", "S", "st", T).await;
        let f = fence("st", 1);
        assert!(s.read_stream("st", "log", 0, 10).await.unwrap().is_empty());
        assert_eq!(write_stream(s, &f, 0, "log", Some(r#""a""#), T + 1).await.unwrap(), 0);
        assert_eq!(write_stream(s, &f, 1, "log", Some(r#""b""#), T + 2).await.unwrap(), 1);
        assert_eq!(
            write_stream(s, &f, 2, "other", Some("1"), T + 3).await.unwrap(),
            0,
            "offsets are per key"
        );
        // A replay writes nothing more and returns the recorded offset.
        assert_eq!(write_stream(s, &f, 1, "log", Some(r#""b""#), T + 4).await.unwrap(), 1);
        assert_eq!(write_stream(s, &f, 3, "log", None, T + 5).await.unwrap(), 2);
        let all = s.read_stream("st", "log", 0, 10).await.unwrap();
        let entries: Vec<(u64, Option<&str>, bool)> =
            all.iter().map(|e| (e.offset, e.value.as_deref(), e.closed)).collect();
        assert_eq!(
            entries,
            [(0, Some(r#""a""#), false), (1, Some(r#""b""#), false), (2, None, true)]
        );
        let names: Vec<String> = s.list_steps("st").await.unwrap().into_iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                WRITE_STREAM_STEP,
                WRITE_STREAM_STEP,
                WRITE_STREAM_STEP,
                CLOSE_STREAM_STEP
            ]
        );
        // Fenced, and unknown workflows are not found.
        assert!(matches!(
            write_stream(s, &fence("st", 5), 4, "log", Some("1"), T).await,
            Err(StoreError::StaleEpoch { .. })
        ));
        assert!(matches!(
            s.read_stream("nobody", "log", 0, 10).await,
            Err(StoreError::WorkflowNotFound(_))
        ));
        // A different step at a recorded write is non-determinism.
        assert!(matches!(
            write_stream(s, &f, 3, "log", Some("1"), T + 6).await,
            Err(StoreError::NonDeterminism { .. })
        ));
    }
}
