//! The JSON each built-in step records, one type per shape: how it is written, and how a
//! replay reads it back. Reading is strict: a recorded step without the fields its name
//! promises is [`Malformed`], never a silent zero.

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;

use crate::{names, Malformed};

/// A shape recorded as a JSON object with named fields.
pub trait Shape: Serialize + DeserializeOwned {
    /// The JSON text to record.
    fn record(&self) -> String {
        serde_json::to_string(self).expect("shapes serialize")
    }

    /// Reads a recorded step's output (`step_name` is for the error).
    fn read(step_name: &str, output: &Value) -> Result<Self, Malformed> {
        Self::deserialize(output).map_err(|_| Malformed {
            step_name: step_name.to_string(),
        })
    }
}

/// `waymark.sleep`: when the sleep ends, recorded before it starts so a recovery sleeps only
/// what is left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sleep {
    pub wake_at_ms: i64,
}
impl Shape for Sleep {}

/// `waymark.recv.deadline` and `waymark.get_event.deadline`: when a wait gives up, recorded
/// before it starts so a recovery keeps the original timeout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deadline {
    pub deadline_ms: i64,
}
impl Shape for Deadline {}

/// `waymark.send`: the id of the message sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    pub message_id: String,
}
impl Shape for Sent {}

/// `waymark.set_event`: the key set (the value lives with the event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventSet {
    pub key: String,
}
impl Shape for EventSet {}

/// `waymark.write_stream` and `waymark.close_stream`: the offset written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamWritten {
    pub offset: u64,
}
impl Shape for StreamWritten {}

/// `waymark.start_child`: the child's id, so a replay re-joins the same child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildStarted {
    pub workflow_id: String,
}
impl Shape for ChildStarted {}

/// `waymark.select` and `waymark.wait_all`: the index of the target that decided the wait.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Selected {
    pub index: u32,
}
impl Shape for Selected {}

/// `waymark.now`: the worker's clock when the workflow first read it, so a replay reads the
/// same time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Now {
    pub now_ms: i64,
}
impl Shape for Now {}

/// `waymark.uuid`: a random UUID (v4, lowercase, hyphenated) drawn when the workflow first asked,
/// so a replay gets the same one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uuid {
    pub uuid: String,
}
impl Shape for Uuid {}

/// `waymark.patch`: the marker a run of new code leaves where it first asked whether a change
/// applies (`patched`), so a replay of that run takes the new branch again. See
/// [`History::patched`](crate::History::patched).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    pub patch_id: String,
}
impl Shape for Patch {}

/// A failure as an awaited child's record carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildFailure {
    pub kind: String,
    pub message: String,
}

/// `waymark.await_child`: how the awaited workflow ended — its status name (`SUCCESS`,
/// `ERROR`, `CANCELLED`, `MAX_RECOVERY_ATTEMPTS_EXCEEDED`) and its output or failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildOutcome {
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<ChildFailure>,
}
impl Shape for ChildOutcome {}

/// What a wait over a message or an event recorded: `{"<field>": V}` when it got one (so a
/// delivered JSON `null` is not mistaken for a timeout), `null` when it timed out.
#[derive(Debug, Clone, PartialEq)]
pub enum Waited {
    Delivered(Value),
    TimedOut,
}

/// The two waits recorded this way, each over two positions: its deadline, then its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitKind {
    pub deadline_step: &'static str,
    pub result_step: &'static str,
    /// The field of the result object that holds what was delivered.
    pub field: &'static str,
}

pub const RECV: WaitKind = WaitKind {
    deadline_step: names::RECV_DEADLINE,
    result_step: names::RECV,
    field: "message",
};

pub const GET_EVENT: WaitKind = WaitKind {
    deadline_step: names::GET_EVENT_DEADLINE,
    result_step: names::GET_EVENT,
    field: "value",
};

impl WaitKind {
    /// The result to record, from what was delivered as JSON text (`None`: timed out). Built as
    /// text so the delivered value is recorded byte for byte as it was sent.
    pub fn record(&self, delivered: Option<&str>) -> String {
        match delivered {
            Some(v) => format!("{{\"{}\":{v}}}", self.field),
            None => "null".to_string(),
        }
    }

    /// Reads a recorded result.
    pub fn read(&self, output: &Value) -> Result<Waited, Malformed> {
        match output {
            Value::Null => Ok(Waited::TimedOut),
            Value::Object(m) => match m.get(self.field) {
                Some(v) => Ok(Waited::Delivered(v.clone())),
                None => Err(self.malformed()),
            },
            _ => Err(self.malformed()),
        }
    }

    fn malformed(&self) -> Malformed {
        Malformed {
            step_name: self.result_step.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip<S: Shape + PartialEq + std::fmt::Debug>(s: S, text: &str) {
        assert_eq!(s.record(), text);
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(S::read("x", &v).unwrap(), s);
    }

    #[test]
    fn each_shape_is_recorded_as_worker_proto_says_and_read_back() {
        round_trip(Sleep { wake_at_ms: 5 }, r#"{"wake_at_ms":5}"#);
        round_trip(Deadline { deadline_ms: 7 }, r#"{"deadline_ms":7}"#);
        round_trip(Sent { message_id: "m".into() }, r#"{"message_id":"m"}"#);
        round_trip(EventSet { key: "k".into() }, r#"{"key":"k"}"#);
        round_trip(StreamWritten { offset: 3 }, r#"{"offset":3}"#);
        round_trip(
            ChildStarted {
                workflow_id: "c".into(),
            },
            r#"{"workflow_id":"c"}"#,
        );
        round_trip(Selected { index: 2 }, r#"{"index":2}"#);
        round_trip(
            Now {
                now_ms: 1_700_000_000_000,
            },
            r#"{"now_ms":1700000000000}"#,
        );
        round_trip(
            Uuid {
                uuid: "0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20".into(),
            },
            r#"{"uuid":"0b8e4c1e-3f55-4c1a-9d3e-2a7f6d1c9b20"}"#,
        );
        round_trip(
            ChildOutcome {
                status: "SUCCESS".into(),
                output: Some(json!({"a": 1})),
                failure: None,
            },
            r#"{"status":"SUCCESS","output":{"a":1}}"#,
        );
        round_trip(
            ChildOutcome {
                status: "ERROR".into(),
                output: None,
                failure: Some(ChildFailure {
                    kind: "K".into(),
                    message: "m".into(),
                }),
            },
            r#"{"status":"ERROR","failure":{"kind":"K","message":"m"}}"#,
        );
    }

    #[test]
    fn a_shape_without_its_fields_is_malformed() {
        let e = Sleep::read(names::SLEEP, &json!({})).unwrap_err();
        assert_eq!(e.to_string(), "the recorded waymark.sleep step is malformed");
        assert!(Selected::read(names::SELECT, &json!({"index": "one"})).is_err());
        assert!(ChildOutcome::read(names::AWAIT_CHILD, &json!(null)).is_err());
    }

    #[test]
    fn waits_tell_a_delivered_null_from_a_timeout() {
        assert_eq!(RECV.record(Some("null")), r#"{"message":null}"#);
        assert_eq!(RECV.record(None), "null");
        assert_eq!(GET_EVENT.record(Some(r#"{"a":1}"#)), r#"{"value":{"a":1}}"#);
        assert_eq!(RECV.read(&json!({"message": null})), Ok(Waited::Delivered(Value::Null)));
        assert_eq!(RECV.read(&Value::Null), Ok(Waited::TimedOut));
        assert_eq!(GET_EVENT.read(&json!({"value": 4})), Ok(Waited::Delivered(json!(4))));
        assert!(RECV.read(&json!({"value": 4})).is_err(), "another wait's field");
        assert!(RECV.read(&json!(3)).is_err());
    }
}
