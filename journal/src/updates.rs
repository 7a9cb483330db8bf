//! Workflow updates on the wire: an update travels as a message on topic
//! `waymark.update/<name>` (`{"update_id": …, "args": …}`), and its answer is the workflow's
//! event `waymark.update/<update id>` (`{"result": …}` or `{"rejected": "…"}`). The server and
//! every SDK name them alike; in Rust, here.

/// What every update topic and answer key begins with.
pub const PREFIX: &str = "waymark.update/";

/// The topic updates named `name` arrive on.
pub fn topic(name: &str) -> String {
    format!("{PREFIX}{name}")
}

/// The event key a workflow answers update `update_id` with.
pub fn answer_key(update_id: &str) -> String {
    format!("{PREFIX}{update_id}")
}
