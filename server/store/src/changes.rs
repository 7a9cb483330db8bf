//! Changes announced between server replicas. On PostgreSQL every replica LISTENs on one
//! channel and the writes that end a wait NOTIFY it in the same transaction, so a send through
//! one replica wakes a workflow whose worker is attached to another at once. Without
//! notifications (SQLite, one process; or a PostgreSQL-compatible database without NOTIFY)
//! replicas fall back to polling.

use serde::{Deserialize, Serialize};

/// The PostgreSQL channel replicas listen on.
pub const CHANNEL: &str = "waymark_changes";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Change {
    /// A message was sent to `workflow_id` on `topic`.
    Message { workflow_id: String, topic: String },
    /// An event of `workflow_id` was set.
    Event { workflow_id: String, key: String },
    /// A stream of `workflow_id` grew or was closed.
    Stream { workflow_id: String, key: String },
    /// `workflow_id` reached a terminal status.
    Finished { workflow_id: String },
    /// Step `step_id` of `workflow_id` (a remote step's result) was recorded.
    StepDone { workflow_id: String, step_id: u32 },
    /// Work was enqueued (a start, a resume, a recovery): dispatchers should look.
    Enqueued,
    /// A queue was created, changed or deleted: replicas re-read their queues' limits.
    QueuesChanged,
}

impl Change {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("changes serialize")
    }

    pub fn decode(payload: &str) -> Option<Change> {
        serde_json::from_str(payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for c in [
            Change::Message {
                workflow_id: "w".into(),
                topic: "".into(),
            },
            Change::Event {
                workflow_id: "w".into(),
                key: "k".into(),
            },
            Change::Stream {
                workflow_id: "w".into(),
                key: "k".into(),
            },
            Change::Finished {
                workflow_id: "w".into(),
            },
            Change::StepDone {
                workflow_id: "w".into(),
                step_id: 3,
            },
            Change::Enqueued,
            Change::QueuesChanged,
        ] {
            assert_eq!(Change::decode(&c.encode()), Some(c));
        }
        assert_eq!(Change::decode("garbage"), None);
    }
}
