//! The built-in steps: the names every SDK and the server record for durable operations other
//! than a user's own `step`. Worker.proto documents them for other languages; the table below is
//! the same list, with who writes each (the worker with RecordStep, or the server inside the
//! request that performs the operation).

pub const SLEEP: &str = "waymark.sleep";
pub const RECV_DEADLINE: &str = "waymark.recv.deadline";
pub const RECV: &str = "waymark.recv";
pub const SEND: &str = "waymark.send";
pub const SET_EVENT: &str = "waymark.set_event";
pub const GET_EVENT_DEADLINE: &str = "waymark.get_event.deadline";
pub const GET_EVENT: &str = "waymark.get_event";
pub const WRITE_STREAM: &str = "waymark.write_stream";
pub const CLOSE_STREAM: &str = "waymark.close_stream";
pub const START_CHILD: &str = "waymark.start_child";
pub const AWAIT_CHILD: &str = "waymark.await_child";
pub const SELECT: &str = "waymark.select";
pub const WAIT_ALL: &str = "waymark.wait_all";
pub const NOW: &str = "waymark.now";
pub const UUID: &str = "waymark.uuid";
pub const PATCH: &str = "waymark.patch";

/// Who writes a built-in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordedBy {
    /// The worker, with RecordStep (or in its completion).
    Worker,
    /// The server, in the transaction of the request that performs the operation.
    Server,
}

/// Every built-in step, its shape (as worker.proto writes it) and who records it.
pub const BUILTIN: [(&str, &str, RecordedBy); 16] = [
    (SLEEP, r#"{"wake_at_ms": N}"#, RecordedBy::Worker),
    (RECV_DEADLINE, r#"{"deadline_ms": N}"#, RecordedBy::Worker),
    (RECV, r#"{"message": V} | null"#, RecordedBy::Server),
    (SEND, r#"{"message_id": "…"}"#, RecordedBy::Server),
    (SET_EVENT, r#"{"key": "…"}"#, RecordedBy::Server),
    (GET_EVENT_DEADLINE, r#"{"deadline_ms": N}"#, RecordedBy::Worker),
    (GET_EVENT, r#"{"value": V} | null"#, RecordedBy::Server),
    (WRITE_STREAM, r#"{"offset": N}"#, RecordedBy::Server),
    (CLOSE_STREAM, r#"{"offset": N}"#, RecordedBy::Server),
    (START_CHILD, r#"{"workflow_id": "…"}"#, RecordedBy::Server),
    (
        AWAIT_CHILD,
        r#"{"status": "…", "output": V} | {"status": "…", "failure": {…}}"#,
        RecordedBy::Server,
    ),
    (SELECT, r#"{"index": N}"#, RecordedBy::Server),
    (WAIT_ALL, r#"{"index": N}"#, RecordedBy::Server),
    (NOW, r#"{"now_ms": N}"#, RecordedBy::Worker),
    (UUID, r#"{"uuid": "…"}"#, RecordedBy::Worker),
    (PATCH, r#"{"patch_id": "…"}"#, RecordedBy::Worker),
];

#[cfg(test)]
mod tests {
    use super::{RecordedBy, BUILTIN};

    /// The names worker.proto lists, each with who records it (`*`: the server).
    fn listed() -> Vec<(String, RecordedBy)> {
        let proto = include_str!("../../proto/waymark/v1/worker.proto");
        let mut out = Vec::new();
        for line in proto.lines().filter(|l| l.starts_with("//   waymark.")) {
            let words: Vec<&str> = line.trim_start_matches("//").split_whitespace().collect();
            for (i, w) in words.iter().enumerate() {
                if w.starts_with("waymark.") {
                    let by = if words.get(i + 1) == Some(&"*") {
                        RecordedBy::Server
                    } else {
                        RecordedBy::Worker
                    };
                    out.push((w.to_string(), by));
                }
            }
        }
        out
    }

    /// The wire contract lists the same names, recorded by the same side: a name added here and
    /// not there (or the other way round) fails.
    #[test]
    fn every_name_is_in_the_wire_contract_and_back() {
        let listed = listed();
        assert_eq!(listed.len(), BUILTIN.len(), "{listed:?}");
        for (name, _, by) in BUILTIN {
            assert!(
                listed.iter().any(|(n, b)| n == name && *b == by),
                "{name} ({by:?}) is not in worker.proto's list"
            );
        }
    }
}
