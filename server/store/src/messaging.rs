//! What both stores record for the messaging steps, and how a recorded step is read back on
//! replay. A recv step records `{"message": <payload>}` or `null` (timed out), so a message
//! whose payload is JSON `null` is not mistaken for a timeout; a send step records
//! `{"message_id": "…"}`.

use crate::{
    Outcome, Received, StepRecord, StoreError, StoreResult, GET_EVENT_STEP, RECV_STEP, SEND_STEP, SET_EVENT_STEP,
};

/// What a stream write step records.
pub(crate) fn stream_output(offset: u64) -> String {
    serde_json::json!({ "offset": offset }).to_string()
}

/// A recorded stream write (or close) step, as the offset it wrote.
pub(crate) fn replay_stream(workflow_id: &str, step: &StepRecord, name: &str) -> StoreResult<u64> {
    expect_name(workflow_id, step, name)?;
    output_json(step)?
        .get("offset")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| StoreError::Unavailable("recorded stream step is malformed".into()))
}

#[derive(sqlx::FromRow)]
pub(crate) struct StreamRow {
    pub position: i64,
    pub value: Option<String>,
    pub closed: bool,
}

impl From<StreamRow> for crate::StreamEntry {
    fn from(r: StreamRow) -> Self {
        crate::StreamEntry {
            offset: r.position as u64,
            value: r.value,
            closed: r.closed,
        }
    }
}

pub(crate) fn child_started_output(child_id: &str) -> String {
    serde_json::json!({ "workflow_id": child_id }).to_string()
}

pub(crate) fn replay_start_child(workflow_id: &str, step: &StepRecord) -> StoreResult<String> {
    expect_name(workflow_id, step, crate::START_CHILD_STEP)?;
    output_json(step)?
        .get("workflow_id")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| StoreError::Unavailable("recorded start_child step is malformed".into()))
}

/// A finished workflow's outcome, as an awaiting step records it.
pub(crate) fn child_outcome(w: &crate::WorkflowRecord) -> crate::ChildOutcome {
    let (output, failure) = match &w.outcome {
        Some(Outcome::Output(o)) => (Some(o.clone()), None),
        Some(Outcome::Failure(f)) => (None, Some(f.clone())),
        None => (None, None),
    };
    crate::ChildOutcome {
        status: w.status,
        output,
        failure,
    }
}

/// What an await_child step records, in the form every SDK reads on replay:
/// `{"status": "SUCCESS", "output": <value>}` or `{"status": "ERROR", "failure": {"kind", "message"}}`.
pub(crate) fn await_child_output(o: &crate::ChildOutcome) -> String {
    let mut m = serde_json::json!({ "status": o.status.as_str() });
    if let Some(out) = &o.output {
        m["output"] = serde_json::from_str(out).unwrap_or(serde_json::Value::Null);
    }
    if let Some(f) = &o.failure {
        m["failure"] = serde_json::json!({ "kind": f.kind, "message": f.message });
    }
    m.to_string()
}

pub(crate) fn replay_await_child(workflow_id: &str, step: &StepRecord) -> StoreResult<crate::ChildOutcome> {
    expect_name(workflow_id, step, crate::AWAIT_CHILD_STEP)?;
    let malformed = || StoreError::Unavailable("recorded await_child step is malformed".into());
    let v = output_json(step)?;
    let status = v
        .get("status")
        .and_then(|s| s.as_str())
        .and_then(crate::WorkflowStatus::parse)
        .ok_or_else(malformed)?;
    let failure = match v.get("failure") {
        Some(f) => Some(serde_json::from_value::<crate::Failure>(f.clone()).map_err(|_| malformed())?),
        None => None,
    };
    Ok(crate::ChildOutcome {
        status,
        output: v.get("output").map(|o| o.to_string()),
        failure,
    })
}

pub(crate) fn recv_output(payload: Option<&str>) -> String {
    match payload {
        Some(p) => format!("{{\"message\":{p}}}"),
        None => "null".to_string(),
    }
}

pub(crate) fn send_output(message_id: &str) -> String {
    serde_json::json!({ "message_id": message_id }).to_string()
}

fn expect_name(workflow_id: &str, step: &StepRecord, name: &str) -> StoreResult<()> {
    if step.name != name {
        return Err(StoreError::NonDeterminism {
            workflow_id: workflow_id.to_string(),
            step_id: step.step_id,
            recorded: step.name.clone(),
            presented: name.to_string(),
        });
    }
    Ok(())
}

fn output_json(step: &StepRecord) -> StoreResult<serde_json::Value> {
    match &step.outcome {
        Outcome::Output(o) => {
            serde_json::from_str(o).map_err(|_| StoreError::Unavailable("recorded step is not JSON".into()))
        }
        Outcome::Failure(_) => Err(StoreError::Unavailable("messaging step recorded as a failure".into())),
    }
}

/// A recorded recv step, as the result it stands for.
pub(crate) fn replay_recv(workflow_id: &str, step: &StepRecord) -> StoreResult<Received> {
    expect_name(workflow_id, step, RECV_STEP)?;
    match output_json(step)? {
        serde_json::Value::Null => Ok(Received::TimedOut),
        serde_json::Value::Object(mut m) => {
            Ok(Received::Delivered(m.remove("message").unwrap_or_default().to_string()))
        }
        _ => Err(StoreError::Unavailable("recorded recv step is malformed".into())),
    }
}

/// A recorded send step, as the message id it sent.
pub(crate) fn replay_send(workflow_id: &str, step: &StepRecord) -> StoreResult<String> {
    expect_name(workflow_id, step, SEND_STEP)?;
    output_json(step)?
        .get("message_id")
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| StoreError::Unavailable("recorded send step is malformed".into()))
}

/// What a get_event step records: `{"value": <value>}`, or `null` when it timed out.
pub(crate) fn get_event_output(value: Option<&str>) -> String {
    match value {
        Some(v) => format!("{{\"value\":{v}}}"),
        None => "null".to_string(),
    }
}

pub(crate) fn set_event_output(key: &str) -> String {
    serde_json::json!({ "key": key }).to_string()
}

/// A recorded get_event step, as the result it stands for.
pub(crate) fn replay_get_event(workflow_id: &str, step: &StepRecord) -> StoreResult<Received> {
    expect_name(workflow_id, step, GET_EVENT_STEP)?;
    match output_json(step)? {
        serde_json::Value::Null => Ok(Received::TimedOut),
        serde_json::Value::Object(mut m) => Ok(Received::Delivered(m.remove("value").unwrap_or_default().to_string())),
        _ => Err(StoreError::Unavailable("recorded get_event step is malformed".into())),
    }
}

/// A recorded set_event step: only its name is checked.
pub(crate) fn replay_set_event(workflow_id: &str, step: &StepRecord) -> StoreResult<()> {
    expect_name(workflow_id, step, SET_EVENT_STEP)
}

#[derive(sqlx::FromRow)]
pub(crate) struct MessageRow {
    pub message_id: String,
    pub workflow_id: String,
    pub topic: String,
    pub payload: String,
    pub idempotency_key: Option<String>,
    pub sent_at: i64,
    pub consumed_at: Option<i64>,
    pub consumed_by_step: Option<i64>,
}

impl From<MessageRow> for crate::MessageRecord {
    fn from(r: MessageRow) -> Self {
        crate::MessageRecord {
            message_id: r.message_id,
            workflow_id: r.workflow_id,
            topic: r.topic,
            payload: r.payload,
            idempotency_key: r.idempotency_key,
            sent_at: r.sent_at,
            consumed_at: r.consumed_at,
            consumed_by_step: r.consumed_by_step.map(|s| s as u32),
        }
    }
}

#[derive(sqlx::FromRow)]
pub(crate) struct EventRow {
    pub event_key: String,
    pub value: String,
    pub updated_at: i64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct EventHistoryRow {
    pub event_key: String,
    pub value: String,
    pub step_id: i64,
    pub set_at: i64,
}

/// Current values and history rows (both ordered) as event records.
pub(crate) fn events(current: Vec<EventRow>, history: Vec<EventHistoryRow>) -> Vec<crate::EventRecord> {
    let mut out: Vec<crate::EventRecord> = current
        .into_iter()
        .map(|e| crate::EventRecord {
            key: e.event_key,
            value: e.value,
            updated_at: e.updated_at,
            history: Vec::new(),
        })
        .collect();
    for h in history {
        if let Some(e) = out.iter_mut().find(|e| e.key == h.event_key) {
            e.history.push(crate::EventValue {
                value: h.value,
                step_id: h.step_id as u32,
                set_at: h.set_at,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, output: &str) -> StepRecord {
        StepRecord {
            step_id: 3,
            name: name.into(),
            outcome: Outcome::Output(output.into()),
            attempts: 1,
            epoch: 1,
            recorded_at: 0,
        }
    }

    #[test]
    fn recv_records_round_trip_and_null_messages_are_not_timeouts() {
        assert_eq!(
            replay_recv("w", &step(RECV_STEP, &recv_output(Some("null")))).unwrap(),
            Received::Delivered("null".into())
        );
        assert_eq!(
            replay_recv("w", &step(RECV_STEP, &recv_output(Some("{\"a\":1}")))).unwrap(),
            Received::Delivered("{\"a\":1}".into())
        );
        assert_eq!(
            replay_recv("w", &step(RECV_STEP, &recv_output(None))).unwrap(),
            Received::TimedOut
        );
        assert!(matches!(
            replay_recv("w", &step("other", "null")),
            Err(StoreError::NonDeterminism { .. })
        ));
        assert_eq!(replay_send("w", &step(SEND_STEP, &send_output("m-1"))).unwrap(), "m-1");
    }
}
