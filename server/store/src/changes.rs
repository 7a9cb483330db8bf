//! Changes announced between server replicas. On PostgreSQL every replica LISTENs on one
//! channel and the writes that end a wait or enqueue work NOTIFY it right after they commit
//! (batched: see `postgres/announcer.rs`), so a send through one replica wakes a workflow whose
//! worker is attached to another at once. Without
//! notifications (SQLite, one process; or a PostgreSQL-compatible database without NOTIFY)
//! replicas fall back to polling.

use serde::{Deserialize, Serialize};

/// The PostgreSQL channel replicas listen on, for the `default` namespace (the public schema).
pub const CHANNEL: &str = "waymark_changes";

/// Changes a queue of them holds (announced by the other replicas and not yet applied here, or
/// made here and not yet announced). An announcement only makes a change known sooner than
/// polling would, so past this the newest are dropped rather than held in a list that grows.
pub const MAX_QUEUED: usize = 10_000;

/// Puts `change` on `tx` if there is room; drops it when the queue is full, saying so once per
/// run of drops (`dropping` remembers whether one is under way). False when nobody reads `tx`
/// any more.
pub fn offer(tx: &tokio::sync::mpsc::Sender<Change>, change: Change, dropping: &mut bool) -> bool {
    match tx.try_send(change) {
        Ok(()) => {
            if std::mem::take(dropping) {
                tracing::info!("changes are queued again; the dropped ones are found by polling");
            }
            true
        }
        Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {
            if !std::mem::replace(dropping, true) {
                tracing::warn!(
                    queued = MAX_QUEUED,
                    "changes arrive faster than they are applied: dropping the newest until there is room \
                     (polling finds them, later)"
                );
            }
            true
        }
        Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => false,
    }
}

/// The channel of the namespace whose data is in `schema` (`None`: the public schema). The
/// database's `waymark_channel()` (migration 0017) names the same one from inside a trigger.
pub fn channel(schema: Option<&str>) -> String {
    match schema {
        None => CHANNEL.to_string(),
        Some(s) => format!("{CHANNEL}_{s}"),
    }
}

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
    /// Work was enqueued (a start, a resume, a recovery): dispatchers should look. `queue`
    /// names the one queue it went to when that is known (a start): only workers that serve it
    /// need to claim. Left out of the payload when unknown, so `{"kind":"enqueued"}` (the wake
    /// trigger's, and older replicas') still reads as work anywhere; replicas older than the
    /// field read one that has it as that too (serde passes over a field it does not know).
    Enqueued {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        queue: Option<String>,
    },
    /// A queue was created, changed or deleted: replicas re-read their queues' limits.
    QueuesChanged,
}

impl Change {
    /// Work enqueued on a queue not named (a resume, a recovery, a wake, several at once).
    pub fn enqueued() -> Change {
        Change::Enqueued { queue: None }
    }

    /// A workflow started on `queue`: only workers that serve it need to claim.
    pub fn enqueued_on(queue: &str) -> Change {
        Change::Enqueued {
            queue: Some(queue.to_string()),
        }
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("changes serialize")
    }

    pub fn decode(payload: &str) -> Option<Change> {
        serde_json::from_str(payload).ok()
    }

    /// One payload for several changes: a lone change as itself, more as a JSON array.
    pub fn encode_batch(changes: &[Change]) -> String {
        match changes {
            [one] => one.encode(),
            many => serde_json::to_string(many).expect("changes serialize"),
        }
    }

    /// The changes in a payload of either shape; nothing for a payload that is neither.
    pub fn decode_all(payload: &str) -> Vec<Change> {
        if payload.starts_with('[') {
            serde_json::from_str(payload).unwrap_or_default()
        } else {
            Change::decode(payload).into_iter().collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Attempt: many more changes than the queue holds, nobody reading. Outcome: it holds its
    // bound, the rest are dropped without an error; read, there is room again; with no reader
    // left, the sender hears so.
    #[test]
    fn a_queue_of_changes_holds_its_bound_and_drops_past_it() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(MAX_QUEUED);
        let mut dropping = false;
        for i in 0..MAX_QUEUED + 500 {
            let c = Change::Finished {
                workflow_id: format!("w{i}"),
            };
            assert!(offer(&tx, c, &mut dropping));
        }
        assert!(dropping);
        assert_eq!(rx.len(), MAX_QUEUED);
        assert_eq!(
            rx.try_recv().unwrap(),
            Change::Finished {
                workflow_id: "w0".into()
            },
            "the oldest are kept"
        );
        assert!(offer(&tx, Change::enqueued(), &mut dropping));
        assert!(!dropping, "room again");
        assert_eq!(rx.len(), MAX_QUEUED);
        drop(rx);
        assert!(!offer(&tx, Change::enqueued(), &mut dropping));
    }

    /// The payload the PostgreSQL trigger that wakes awaiting workflows sends (migration 0017,
    /// on the schema's channel), and the channel names the trigger computes.
    #[test]
    fn the_wake_trigger_payload_is_the_enqueued_change() {
        let migration = include_str!("../migrations/postgres/0017_namespaces.sql");
        let payload = r#"{"kind":"enqueued"}"#;
        assert!(migration.contains(&format!("pg_notify(waymark_channel(), '{payload}')")));
        assert!(migration.contains(&format!("THEN '{CHANNEL}'")));
        assert!(migration.contains(&format!("ELSE '{CHANNEL}_' || current_schema()")));
        assert_eq!(channel(Some("wm_a")), "waymark_changes_wm_a");
        assert_eq!(Change::decode_all(payload), vec![Change::enqueued()]);
    }

    /// A replica of the build before `queue` was added reads a change that has it as plain
    /// `enqueued`, alone or in a batch (one unreadable element would drop the whole batch).
    #[test]
    fn an_enqueued_change_naming_its_queue_reads_as_before_on_an_older_replica() {
        #[derive(Debug, PartialEq, Deserialize)]
        #[serde(tag = "kind", rename_all = "snake_case")]
        enum Older {
            Finished { workflow_id: String },
            Enqueued,
        }
        let named = Change::Enqueued {
            queue: Some("emails".into()),
        };
        assert_eq!(named.encode(), r#"{"kind":"enqueued","queue":"emails"}"#);
        assert_eq!(Change::enqueued().encode(), r#"{"kind":"enqueued"}"#);
        let older: Older = serde_json::from_str(&named.encode()).unwrap();
        assert_eq!(older, Older::Enqueued);
        let batch = Change::encode_batch(&[
            named,
            Change::Finished {
                workflow_id: "w".into(),
            },
        ]);
        let older: Vec<Older> = serde_json::from_str(&batch).unwrap();
        assert_eq!(
            older,
            [
                Older::Enqueued,
                Older::Finished {
                    workflow_id: "w".into()
                }
            ]
        );
    }

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
            Change::enqueued(),
            Change::Enqueued {
                queue: Some("q".into()),
            },
            Change::QueuesChanged,
        ] {
            assert_eq!(Change::decode(&c.encode()), Some(c));
        }
        assert_eq!(Change::decode("garbage"), None);
        let batch = [
            Change::enqueued(),
            Change::Finished {
                workflow_id: "w".into(),
            },
        ];
        assert_eq!(Change::decode_all(&Change::encode_batch(&batch)), batch);
        assert_eq!(
            Change::decode_all(&Change::encode_batch(&batch[..1])),
            [Change::enqueued()]
        );
        assert!(Change::decode_all("[garbage").is_empty());
    }
}
