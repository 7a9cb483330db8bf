//! The trace contexts a worker stream keeps for the remote step attempts it serves, so that the
//! server's span for a `StepResult` joins the trace of the workflow that called the step.
//!
//! A workflow's own trace rides with its dispatch in the stream's held set (see
//! [`WorkerSession::trace_of`](super::sessions::WorkerSession::trace_of)); a served attempt is
//! not held, so it is kept here, from its dispatch to its result. Only while spans are exported:
//! without an OTLP endpoint nothing is kept.

use std::{collections::HashMap, sync::Mutex};

use waymark_store::{StepTask, TraceContext};

/// Most attempts one stream keeps a context for. An attempt whose result never comes (the
/// worker died, the attempt timed out) leaves its entry until the stream ends; past the bound
/// a new attempt's result is handled without a span of its own, never refused.
pub const MAX_SERVED_TRACES: usize = 4_096;

/// Attempts by (caller's workflow id, step id), each with its attempt number and context.
#[derive(Default)]
pub struct ServedSteps {
    by_step: Mutex<HashMap<(String, u32), (u32, TraceContext)>>,
}

impl ServedSteps {
    /// An attempt of `task` is going down the stream (the caller asks only while spans are
    /// exported).
    pub fn note(&self, task: &StepTask) {
        let Some(trace) = &task.trace else { return };
        let mut by_step = self.by_step.lock().unwrap();
        let key = (task.workflow_id.clone(), task.step_id);
        if by_step.len() < MAX_SERVED_TRACES || by_step.contains_key(&key) {
            by_step.insert(key, (task.attempt, trace.clone()));
        }
    }

    /// The context of the attempt a result answers, forgotten now that it is answered.
    pub fn take(&self, workflow_id: &str, step_id: u32, attempt: u32) -> Option<TraceContext> {
        let mut by_step = self.by_step.lock().unwrap();
        let key = (workflow_id.to_string(), step_id);
        match by_step.get(&key) {
            Some((a, _)) if *a == attempt => by_step.remove(&key).map(|(_, t)| t),
            _ => None,
        }
    }

    pub fn len(&self) -> usize {
        self.by_step.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(workflow_id: &str, step_id: u32, attempt: u32) -> StepTask {
        StepTask {
            workflow_id: workflow_id.into(),
            step_id,
            step_name: "s".into(),
            input: "null".into(),
            attempt,
            deadline_at: 0,
            trace: Some(TraceContext {
                traceparent: format!("00-{:032x}-{:016x}-01", step_id + 1, attempt),
                tracestate: String::new(),
            }),
        }
    }

    #[test]
    fn a_result_takes_its_attempts_context_once_and_the_map_stays_bounded() {
        let served = ServedSteps::default();
        served.note(&task("w", 1, 1));
        served.note(&task("w", 1, 2));
        assert_eq!(
            served.take("w", 1, 1),
            None,
            "an older attempt's result gets no context"
        );
        let t = served.take("w", 1, 2).expect("the running attempt's context");
        assert!(t.traceparent.ends_with("0000000000000002-01"));
        assert_eq!(served.take("w", 1, 2), None, "taken once");
        for i in 0..(MAX_SERVED_TRACES as u32 + 100) {
            served.note(&task("x", i, 1));
        }
        assert_eq!(served.len(), MAX_SERVED_TRACES);
        assert!(served.take("x", MAX_SERVED_TRACES as u32 + 50, 1).is_none());
        assert!(served.take("x", 7, 1).is_some());
    }
}
