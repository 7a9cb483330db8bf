//! Streams: a workflow appends values under a key (and closes it); readers follow from an
//! offset as values are written. A reader registers before it reads (no lost wakeups); appends
//! and completions through this replica wake it at once, others are seen at the next poll.

use std::time::Duration;

use waymark_store::StreamEntry;

use super::waits::wait_map::{Wait, WaitMap};
use super::{messaging::Messaging, validate, EngineError, EngineResult};

/// Most entries handed to a reader at once.
const READ_BATCH: u32 = 256;
/// Most streams a listing names.
const MAX_LISTED: u32 = 1000;

/// (workflow, stream key).
type StreamKey = (String, String);

/// Stream readers waiting on this replica, by (workflow, key).
#[derive(Default)]
pub struct StreamWaits {
    readers: WaitMap<StreamKey, ()>,
}

impl StreamWaits {
    fn add(&self, workflow_id: &str, key: &str) -> Wait<'_, StreamKey, ()> {
        self.readers.wait((workflow_id.to_string(), key.to_string()))
    }

    /// Wakes the readers of one stream, or with `key` None of every stream of the workflow.
    pub(crate) fn wake(&self, workflow_id: &str, key: Option<&str>) {
        self.readers
            .wake_matching(|(w, k)| w == workflow_id && key.is_none_or(|key| key == k), ());
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.readers.len()
    }
}

/// What a reader gets next.
pub enum StreamNext {
    Entries(Vec<StreamEntry>),
    /// Closed, or the workflow finished and everything written was read.
    End,
}

impl Messaging {
    /// Checks that a reader may follow the stream (the workflow exists) and takes its place
    /// among the server's waits, held for as long as the reader follows.
    /// A workflow's streams, by key (at most [`MAX_LISTED`]).
    pub async fn list_streams(&self, workflow_id: &str) -> EngineResult<Vec<waymark_store::StreamSummary>> {
        validate::name("workflow_id", workflow_id)?;
        Ok(self.core.store.list_streams(workflow_id, MAX_LISTED).await?)
    }

    pub async fn open_stream_reader(&self, workflow_id: &str, key: &str) -> EngineResult<super::waits::WaitPermit> {
        validate::name("key", key)?;
        self.workflow(workflow_id).await?;
        self.core.begin_wait()
    }

    /// The next entries of a stream from `from`, waiting until there are some, the stream is
    /// closed, or the workflow has finished.
    pub async fn next_stream_entries(&self, workflow_id: &str, key: &str, from: u64) -> EngineResult<StreamNext> {
        validate::name("workflow_id", workflow_id)?;
        validate::name("key", key)?;
        let mut shutdown = self.core.shutdown_signal();
        loop {
            let woken = self.waits.streams.add(workflow_id, key);
            let entries = self.core.store.read_stream(workflow_id, key, from, READ_BATCH).await?;
            if entries.first().is_some_and(|e| e.closed) {
                return Ok(StreamNext::End);
            }
            if !entries.is_empty() {
                return Ok(StreamNext::Entries(entries));
            }
            if self.workflow(workflow_id).await?.status.is_terminal() {
                // Anything written before the finish is visible now: read once more.
                let last = self.core.store.read_stream(workflow_id, key, from, READ_BATCH).await?;
                return Ok(if last.is_empty() || last[0].closed {
                    StreamNext::End
                } else {
                    StreamNext::Entries(last)
                });
            }
            let poll = tokio::time::sleep(self.core.poll_interval().max(Duration::from_millis(200)));
            tokio::select! {
                _ = woken => {}
                _ = poll => {}
                _ = shutdown.wait_for(|v| *v) => return Err(EngineError::shutting_down()),
            }
        }
    }
}
