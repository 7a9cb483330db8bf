//! Wire types to engine types and back.

use prost_types::Timestamp;
use tonic::Status;
use waymark_proto::{json, v1};
use waymark_store::{
    EventRecord, Failure, MessageRecord, Millis, Outcome, StepRecord, TraceContext, WorkflowRecord, WorkflowStatus,
};

use super::status::invalid;

pub fn timestamp(ms: Millis) -> Option<Timestamp> {
    Some(Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: (ms.rem_euclid(1000) * 1_000_000) as i32,
    })
}

pub fn millis(ts: &Timestamp) -> Millis {
    ts.seconds * 1000 + (ts.nanos as i64) / 1_000_000
}

pub fn status_to_wire(s: WorkflowStatus) -> v1::WorkflowStatus {
    use v1::WorkflowStatus as W;
    match s {
        WorkflowStatus::Enqueued => W::Enqueued,
        WorkflowStatus::Delayed => W::Delayed,
        WorkflowStatus::Pending => W::Pending,
        WorkflowStatus::Success => W::Success,
        WorkflowStatus::Error => W::Error,
        WorkflowStatus::Cancelled => W::Cancelled,
        WorkflowStatus::MaxRecoveryAttemptsExceeded => W::MaxRecoveryAttemptsExceeded,
        WorkflowStatus::ContinuedAsNew => W::ContinuedAsNew,
    }
}

/// A filter's statuses; an unknown one is INVALID_ARGUMENT.
pub fn statuses_from_wire(statuses: &[i32]) -> Result<Vec<WorkflowStatus>, Status> {
    statuses.iter().map(|s| status_from_wire(*s)).collect()
}

pub fn status_from_wire(n: i32) -> Result<WorkflowStatus, Status> {
    use v1::WorkflowStatus as W;
    Ok(
        match W::try_from(n).map_err(|_| invalid(format!("unknown workflow status {n}")))? {
            W::Unspecified => return Err(invalid("status filter must not be WORKFLOW_STATUS_UNSPECIFIED")),
            W::Enqueued => WorkflowStatus::Enqueued,
            W::Delayed => WorkflowStatus::Delayed,
            W::Pending => WorkflowStatus::Pending,
            W::Success => WorkflowStatus::Success,
            W::Error => WorkflowStatus::Error,
            W::Cancelled => WorkflowStatus::Cancelled,
            W::MaxRecoveryAttemptsExceeded => WorkflowStatus::MaxRecoveryAttemptsExceeded,
            W::ContinuedAsNew => WorkflowStatus::ContinuedAsNew,
        },
    )
}

/// Stored JSON text as a wire payload. Stored text was validated on the way in.
pub fn payload(text: &str) -> Option<v1::Payload> {
    let value: serde_json::Value = serde_json::from_str(text).unwrap_or(serde_json::Value::Null);
    Some(json::to_payload(&value))
}

/// A wire payload as JSON text for the store.
pub fn payload_text(field: &str, p: Option<&v1::Payload>) -> Result<String, Status> {
    let value = json::from_payload(p).map_err(|e| invalid(format!("{field}: {e}")))?;
    Ok(value.to_string())
}

pub fn failure_to_wire(f: &Failure) -> v1::Failure {
    v1::Failure {
        kind: f.kind.clone(),
        message: f.message.clone(),
    }
}

pub fn failure_from_wire(f: &v1::Failure) -> Failure {
    Failure {
        kind: f.kind.clone(),
        message: f.message.clone(),
    }
}

pub fn workflow(w: WorkflowRecord) -> v1::Workflow {
    let (output, failure) = match &w.outcome {
        Some(Outcome::Output(o)) => (payload(o), None),
        Some(Outcome::Failure(f)) => (None, Some(failure_to_wire(f))),
        None => (None, None),
    };
    v1::Workflow {
        status: status_to_wire(w.status) as i32,
        input: payload(&w.input),
        output,
        failure,
        created_at: timestamp(w.created_at),
        updated_at: timestamp(w.updated_at),
        recovery_attempts: w.recovery_attempts,
        epoch: w.epoch,
        worker_id: w.worker_id.unwrap_or_default(),
        parent_workflow_id: w.parent_workflow_id.unwrap_or_default(),
        deadline: w.deadline_at.and_then(timestamp),
        priority: w.priority,
        partition_key: w.partition_key,
        dedup_id: w.dedup_id.unwrap_or_default(),
        started_at: w.started_at.and_then(timestamp),
        wake_at: w.wake_at.and_then(timestamp),
        trace_context: trace_to_wire(w.trace),
        waiting_on: None,
        forked_from_step: w.forked_from.as_ref().map_or(0, |l| l.from_step),
        forked_from_workflow_id: w.forked_from.map(|l| l.workflow_id).unwrap_or_default(),
        tags: w.tags.into_iter().collect(),
        run: w.run,
        continued_as_workflow_id: w.continued_as.unwrap_or_default(),
        app_version: w.app_version.unwrap_or_default(),
        workflow_id: w.workflow_id,
        workflow_name: w.workflow_name,
        queue_name: w.queue_name,
    }
}

/// What a workflow waits for, as the wire has it.
pub fn waiting_on(w: crate::engine::waiting::WaitingOn) -> v1::WaitingOn {
    use crate::engine::waiting::Wait;
    use v1::waiting_on::What;
    let what = match w.wait {
        Wait::Timer => What::Timer(true),
        Wait::Message { topic } => What::MessageTopic(topic),
        Wait::Event { workflow_id, key } => What::Event(v1::WaitedEvent { workflow_id, key }),
        Wait::Workflow { workflow_id } => What::WorkflowId(workflow_id),
        Wait::RemoteStep {
            step_id,
            step_name,
            attempt,
        } => What::RemoteStep(v1::WaitedStep {
            step_id,
            step_name,
            attempt,
        }),
    };
    v1::WaitingOn {
        what: Some(what),
        until: w.until.and_then(timestamp),
    }
}

/// A stored trace context as the wire has it.
pub fn trace_to_wire(t: Option<TraceContext>) -> Option<v1::TraceContext> {
    t.map(|t| v1::TraceContext {
        traceparent: t.traceparent,
        tracestate: t.tracestate,
    })
}

/// A worker's trace context, kept only when it is well-formed (a malformed one is dropped, as
/// W3C Trace Context says of a bad header; it never fails the request).
pub fn trace_from_wire(t: Option<&v1::TraceContext>) -> Option<TraceContext> {
    t.and_then(|t| crate::telemetry::context::checked(&t.traceparent, &t.tracestate))
}

pub fn step(s: StepRecord) -> v1::Step {
    let (output, failure) = match &s.outcome {
        Outcome::Output(o) => (payload(o), None),
        Outcome::Failure(f) => (None, Some(failure_to_wire(f))),
    };
    v1::Step {
        step_id: s.step_id,
        name: s.name,
        output,
        failure,
        attempts: s.attempts,
        epoch: s.epoch,
        recorded_at: timestamp(s.recorded_at),
        started_at: s.started_at.and_then(timestamp),
    }
}

pub fn message(m: MessageRecord) -> v1::Message {
    v1::Message {
        payload: payload(&m.payload),
        sent_at: timestamp(m.sent_at),
        consumed_at: m.consumed_at.and_then(timestamp),
        consumed: m.consumed_at.is_some(),
        consumed_by_step: m.consumed_by_step.unwrap_or_default(),
        idempotency_key: m.idempotency_key.unwrap_or_default(),
        message_id: m.message_id,
        workflow_id: m.workflow_id,
        topic: m.topic,
    }
}

pub fn event(e: EventRecord) -> v1::Event {
    v1::Event {
        value: payload(&e.value),
        updated_at: timestamp(e.updated_at),
        history: e
            .history
            .into_iter()
            .map(|h| v1::EventValue {
                value: payload(&h.value),
                step_id: h.step_id,
                set_at: timestamp(h.set_at),
            })
            .collect(),
        key: e.key,
    }
}

/// A wire duration in milliseconds; negative durations are refused.
pub fn duration_ms(field: &str, d: Option<&prost_types::Duration>) -> Result<Option<Millis>, Status> {
    match d {
        None => Ok(None),
        Some(d) if d.seconds < 0 || d.nanos < 0 => Err(super::status::invalid(format!("{field} must not be negative"))),
        Some(d) => Ok(Some(
            d.seconds
                .saturating_mul(1000)
                .saturating_add(d.nanos as i64 / 1_000_000),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_including_before_1970() {
        for ms in [0, 1, 999, 1_700_000_000_123, -1, -1001] {
            assert_eq!(millis(&timestamp(ms).unwrap()), ms, "{ms}");
        }
    }

    #[test]
    fn statuses_round_trip_and_unspecified_is_refused() {
        for s in WorkflowStatus::ALL {
            assert_eq!(status_from_wire(status_to_wire(s) as i32).unwrap(), s);
        }
        assert!(status_from_wire(0).is_err());
        assert!(status_from_wire(99).is_err());
    }
}
