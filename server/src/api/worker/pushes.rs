//! What the engine pushes down a worker's stream (dispatches, wakeups, cancels, drain), as the
//! messages the worker gets.

use waymark_proto::v1::{self, server_message};
use waymark_store::{ClaimedWorkflow, StepTask};

use crate::{api::convert, engine::ToWorker};

fn dispatch(w: ClaimedWorkflow) -> server_message::Kind {
    let wf = w.workflow;
    server_message::Kind::DispatchWorkflow(v1::DispatchWorkflow {
        input: convert::payload(&wf.input),
        steps: w.steps.into_iter().map(convert::step).collect(),
        app_version: wf.app_version.unwrap_or_default(),
        recovery_attempts: wf.recovery_attempts,
        created_at: convert::timestamp(wf.created_at),
        trace_context: convert::trace_to_wire(wf.trace),
        epoch: wf.epoch,
        workflow_id: wf.workflow_id,
        workflow_name: wf.workflow_name,
    })
}

fn dispatch_step(t: StepTask) -> server_message::Kind {
    server_message::Kind::DispatchStep(v1::DispatchStep {
        input: convert::payload(&t.input),
        deadline: convert::timestamp(t.deadline_at),
        trace_context: convert::trace_to_wire(t.trace),
        workflow_id: t.workflow_id,
        step_id: t.step_id,
        step_name: t.step_name,
        attempt: t.attempt,
    })
}

/// The message for one push; `now_ms` is the server's clock, which a delivered receive carries.
pub fn pushed(p: ToWorker, now_ms: i64) -> server_message::Kind {
    match p {
        ToWorker::Dispatch(w) => dispatch(*w),
        ToWorker::DispatchStep(t) => dispatch_step(*t),
        ToWorker::Cancel(id) => server_message::Kind::Cancel(v1::Cancel { workflow_id: id }),
        ToWorker::Drain => server_message::Kind::Drain(v1::Drain {}),
        ToWorker::Wakeup { workflow_id, step_id } => server_message::Kind::Wakeup(v1::Wakeup {
            workflow_id,
            step_id,
            recv: None,
        }),
        ToWorker::Delivered {
            workflow_id,
            step_id,
            message,
        } => server_message::Kind::Wakeup(v1::Wakeup {
            workflow_id,
            step_id,
            recv: Some(v1::RecvResult {
                outcome: v1::recv_result::Outcome::Delivered as i32,
                message: convert::payload(&message),
                server_now_ms: now_ms,
            }),
        }),
    }
}
