//! Values a workflow draws from the world — the time, a random UUID — recorded the first time
//! so every replay sees the same. Workflow code that read `SystemTime::now()` or drew a random
//! number itself would see another value on each replay and could take another branch.

use std::{
    future::Future,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use waymark_journal::{names, shapes, shapes::Shape};

use super::{shape_payload, unix_ms, WorkflowContext};
use crate::WorkflowError;

impl WorkflowContext {
    /// The time, read from this worker's clock the first time the workflow gets here and
    /// recorded (`waymark.now`, one step position): a replay returns the same time. Costs no
    /// round trip: the record travels with the workflow's next request or its completion.
    pub fn now(&self) -> impl Future<Output = Result<SystemTime, WorkflowError>> + Send {
        let read = self.drawn(names::NOW, || shapes::Now { now_ms: unix_ms() });
        async move {
            let ms = read.await?.now_ms;
            Ok(UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64))
        }
    }

    /// A random UUID (v4), drawn the first time the workflow gets here and recorded
    /// (`waymark.uuid`, one step position): a replay returns the same one — use it for ids the
    /// workflow hands to the outside world, such as idempotency keys.
    pub fn uuid(&self) -> impl Future<Output = Result<uuid::Uuid, WorkflowError>> + Send {
        let drawn = self.drawn(names::UUID, || shapes::Uuid {
            uuid: uuid::Uuid::new_v4().to_string(),
        });
        async move {
            let recorded = drawn.await?.uuid;
            uuid::Uuid::parse_str(&recorded)
                .map_err(|_| WorkflowError::Serialization(format!("the recorded {} is not a UUID", names::UUID)))
        }
    }

    /// Takes a step position now; replays what is recorded there, else draws and records it.
    fn drawn<S: Shape + Send + 'static>(
        &self,
        name: &'static str,
        draw: impl FnOnce() -> S + Send + 'static,
    ) -> impl Future<Output = Result<S, WorkflowError>> + Send {
        let step_id = self.inner.history.take(1);
        let inner = self.inner.clone();
        async move {
            if let Some(s) = inner.builtin::<S>(step_id, name)? {
                return Ok(s);
            }
            inner.live(step_id)?;
            inner.check_cancelled()?;
            let s = draw();
            inner.defer(step_id, name, shape_payload(&s), 1, None);
            Ok(s)
        }
    }
}
