//! What the server records for each built-in step (in the journal's shapes), and how a recorded
//! step is read back when a call is repeated: a replay is answered from the record, and another
//! step at that position is non-determinism. Used by the store's whole operations and by the
//! engine's, which it composes from table operations. A recv step records `{"message":
//! <payload>}` or `null` (timed out), so a message whose payload is JSON `null` is not mistaken
//! for a timeout; a send step records `{"message_id": "…"}`.

use waymark_journal::{shapes, shapes::Shape, NonDeterminism};

use crate::{Outcome, Received, StepRecord, StoreError, StoreResult, SET_EVENT_STEP};

/// A recorded built-in step read as its shape: non-determinism when another step is recorded
/// there, and a shape that is not what the name promises is refused as unreadable.
pub fn replay_builtin<S: Shape>(workflow_id: &str, step: &StepRecord, name: &str) -> StoreResult<S> {
    expect_name(workflow_id, step, name)?;
    S::read(name, &output_json(step)?).map_err(|e| StoreError::Unavailable(e.to_string()))
}

/// What a stream write step records.
pub fn stream_output(offset: u64) -> String {
    shapes::StreamWritten { offset }.record()
}

/// A recorded stream write (or close) step, as the offset it wrote.
pub fn replay_stream(workflow_id: &str, step: &StepRecord, name: &str) -> StoreResult<u64> {
    Ok(replay_builtin::<shapes::StreamWritten>(workflow_id, step, name)?.offset)
}

pub fn child_started_output(child_id: &str) -> String {
    shapes::ChildStarted {
        workflow_id: child_id.to_string(),
    }
    .record()
}

pub fn replay_start_child(workflow_id: &str, step: &StepRecord) -> StoreResult<String> {
    Ok(replay_builtin::<shapes::ChildStarted>(workflow_id, step, crate::START_CHILD_STEP)?.workflow_id)
}

/// A finished workflow's outcome, as an awaiting step records it.
pub fn child_outcome(w: &crate::WorkflowRecord) -> crate::ChildOutcome {
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
pub fn await_child_output(o: &crate::ChildOutcome) -> String {
    shapes::ChildOutcome {
        status: o.status.as_str().to_string(),
        output: o
            .output
            .as_deref()
            .map(|out| serde_json::from_str(out).unwrap_or(serde_json::Value::Null)),
        failure: o.failure.as_ref().map(|f| shapes::ChildFailure {
            kind: f.kind.clone(),
            message: f.message.clone(),
        }),
    }
    .record()
}

pub fn replay_await_child(workflow_id: &str, step: &StepRecord) -> StoreResult<crate::ChildOutcome> {
    let o: shapes::ChildOutcome = replay_builtin(workflow_id, step, crate::AWAIT_CHILD_STEP)?;
    let status = crate::WorkflowStatus::parse(&o.status)
        .ok_or_else(|| StoreError::Unavailable("recorded await_child step is malformed".into()))?;
    Ok(crate::ChildOutcome {
        status,
        output: o.output.map(|v| v.to_string()),
        failure: o.failure.map(|f| crate::Failure {
            kind: f.kind,
            message: f.message,
        }),
    })
}

pub fn recv_output(payload: Option<&str>) -> String {
    shapes::RECV.record(payload)
}

pub fn send_output(message_id: &str) -> String {
    shapes::Sent {
        message_id: message_id.to_string(),
    }
    .record()
}

fn expect_name(workflow_id: &str, step: &StepRecord, name: &str) -> StoreResult<()> {
    Ok(NonDeterminism::check(workflow_id, step.step_id, &step.name, name)?)
}

fn output_json(step: &StepRecord) -> StoreResult<serde_json::Value> {
    match &step.outcome {
        Outcome::Output(o) => {
            serde_json::from_str(o).map_err(|_| StoreError::Unavailable("recorded step is not JSON".into()))
        }
        Outcome::Failure(_) => Err(StoreError::Unavailable("messaging step recorded as a failure".into())),
    }
}

/// A recorded wait (recv, get_event), as the result it stands for.
fn replay_wait(workflow_id: &str, step: &StepRecord, kind: &shapes::WaitKind) -> StoreResult<Received> {
    expect_name(workflow_id, step, kind.result_step)?;
    match kind.read(&output_json(step)?) {
        Ok(shapes::Waited::TimedOut) => Ok(Received::TimedOut),
        Ok(shapes::Waited::Delivered(v)) => Ok(Received::Delivered(v.to_string())),
        Err(e) => Err(StoreError::Unavailable(e.to_string())),
    }
}

/// A recorded recv step, as the result it stands for.
pub fn replay_recv(workflow_id: &str, step: &StepRecord) -> StoreResult<Received> {
    replay_wait(workflow_id, step, &shapes::RECV)
}

/// A recorded send step, as the message id it sent.
pub fn replay_send(workflow_id: &str, step: &StepRecord) -> StoreResult<String> {
    Ok(replay_builtin::<shapes::Sent>(workflow_id, step, crate::SEND_STEP)?.message_id)
}

/// What a get_event step records: `{"value": <value>}`, or `null` when it timed out.
pub fn get_event_output(value: Option<&str>) -> String {
    shapes::GET_EVENT.record(value)
}

pub fn set_event_output(key: &str) -> String {
    shapes::EventSet { key: key.to_string() }.record()
}

/// A recorded get_event step, as the result it stands for.
pub fn replay_get_event(workflow_id: &str, step: &StepRecord) -> StoreResult<Received> {
    replay_wait(workflow_id, step, &shapes::GET_EVENT)
}

/// A recorded set_event step: only its name is checked.
pub fn replay_set_event(workflow_id: &str, step: &StepRecord) -> StoreResult<()> {
    expect_name(workflow_id, step, SET_EVENT_STEP)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RECV_STEP, SEND_STEP};

    fn step(name: &str, output: &str) -> StepRecord {
        StepRecord {
            step_id: 3,
            name: name.into(),
            outcome: Outcome::Output(output.into()),
            attempts: 1,
            epoch: 1,
            recorded_at: 0,
            started_at: None,
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
