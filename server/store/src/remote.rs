//! Remote steps in the storage contract: a step a workflow calls by name and some other worker
//! runs. The call is a row keyed by the caller's step position (so a replaying caller finds it
//! again), dispatched to workers attempt by attempt, and its final result is recorded as the
//! caller's step at that position, in the same transaction that closes the row.

use waymark_journal::{shapes, shapes::Shape, NonDeterminism};

use crate::{Millis, TraceContext};

pub use waymark_journal::{retry::StepPolicy, select::WaitFor};

/// A remote step call, as the caller makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewStepTask {
    pub step_name: String,
    /// JSON text.
    pub input: String,
    pub policy: StepPolicy,
    /// The span the workflow called it from; every attempt's dispatch carries it.
    pub trace: Option<TraceContext>,
}

/// Which worker stream asks for remote steps, and which step names it runs.
#[derive(Debug, Clone)]
pub struct StepClaim {
    pub worker_id: String,
    pub session_id: String,
    pub step_names: Vec<String>,
    pub limit: u32,
}

/// One attempt of a remote step, dispatched to a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepTask {
    /// The calling workflow and the step position its result is recorded at.
    pub workflow_id: String,
    pub step_id: u32,
    pub step_name: String,
    /// JSON text.
    pub input: String,
    /// 1 for the first attempt; the result must carry it.
    pub attempt: u32,
    /// When this attempt times out.
    pub deadline_at: Millis,
    /// The calling span.
    pub trace: Option<TraceContext>,
}

/// Names an attempt, and the stream that reports it: a result is accepted only for the attempt
/// that is running, and only from the worker stream it was dispatched to — another stream of the
/// namespace, even one that runs the same step, cannot answer for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepAttempt {
    pub workflow_id: String,
    pub step_id: u32,
    pub attempt: u32,
    /// The lease id of the stream reporting the result ([`StepClaim::session_id`] of the claim
    /// that started the attempt).
    pub session_id: String,
}

/// What became of a finished attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepFinished {
    /// The result (success, or the last failure) is recorded as the caller's step.
    Recorded,
    /// It failed and will be dispatched again from `at`.
    Retrying { at: Millis },
}

/// What a pass over timed-out attempts did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpiredSteps {
    /// Out of attempts: the failure is recorded as the caller's step (workflow, step).
    pub recorded: Vec<(String, u32)>,
    /// Due again at these times.
    pub retrying: Vec<Millis>,
}

/// One thing a "wait for the first of" can wait on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitTarget {
    /// A workflow (usually a child) reaching a terminal status.
    Workflow(String),
    /// A step of the waiting workflow being recorded (a remote step's result).
    Step(u32),
}

/// Failure kinds the server records for attempts that did not report back.
pub const STEP_TIMED_OUT: &str = "StepTimedOut";

/// Step name recorded for "wait for the first of".
pub const SELECT_STEP: &str = waymark_journal::names::SELECT;
/// Step name recorded for "wait for all of".
pub const WAIT_ALL_STEP: &str = waymark_journal::names::WAIT_ALL;

/// Columns of `step_tasks` that decide what a finished attempt leads to, in [`TaskRow`] order.
macro_rules! task_columns {
    () => {
        "workflow_id, step_id, step_name, status, attempt, max_attempts, initial_backoff_ms, \
         backoff_coefficient, max_backoff_ms, timeout_ms, session_id"
    };
}
pub(crate) use task_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct TaskRow {
    pub workflow_id: String,
    pub step_id: i64,
    pub step_name: String,
    pub status: String,
    pub attempt: i64,
    pub max_attempts: i64,
    pub initial_backoff_ms: i64,
    pub backoff_coefficient: f64,
    pub max_backoff_ms: i64,
    pub timeout_ms: i64,
    /// The stream the running attempt was dispatched to.
    pub session_id: Option<String>,
}

/// A running attempt the timeout pass fails, and whether its worker's stream is gone (rather
/// than the attempt simply too slow).
#[derive(sqlx::FromRow)]
pub(crate) struct ExpiredRow {
    #[sqlx(flatten)]
    pub task: TaskRow,
    pub lost: bool,
}

/// Selects [`ExpiredRow`]s: attempts past their timeout or whose stream's lease ended before `$1`
/// (the placeholder is rewritten for SQLite).
macro_rules! expired_select {
    ($now:literal) => {
        concat!(
            "SELECT ",
            task_columns!(),
            ", NOT EXISTS (SELECT 1 FROM worker_sessions s WHERE s.session_id = t.session_id \
               AND s.lease_expires_at >= ",
            $now,
            ") AS lost \
             FROM step_tasks t WHERE t.status = 'RUNNING' AND (t.attempt_deadline_at < ",
            $now,
            " OR NOT EXISTS \
               (SELECT 1 FROM worker_sessions s WHERE s.session_id = t.session_id AND s.lease_expires_at >= ",
            $now,
            ")) \
             LIMIT 1000"
        )
    };
}
pub(crate) use expired_select;

/// Columns a claim returns, in [`ClaimedRow`] order; `claimed_columns!("t")` qualifies each
/// with the table alias `t`.
macro_rules! claimed_columns {
    () => {
        claimed_columns!("")
    };
    ($t:literal) => {
        concat!(
            $t,
            "workflow_id, ",
            $t,
            "step_id, ",
            $t,
            "step_name, ",
            $t,
            "input, ",
            $t,
            "attempt, ",
            $t,
            "attempt_deadline_at, ",
            $t,
            "traceparent, ",
            $t,
            "tracestate"
        )
    };
}
pub(crate) use claimed_columns;

#[derive(sqlx::FromRow)]
pub(crate) struct ClaimedRow {
    pub workflow_id: String,
    pub step_id: i64,
    pub step_name: String,
    pub input: String,
    pub attempt: i64,
    pub attempt_deadline_at: Option<i64>,
    pub traceparent: Option<String>,
    pub tracestate: Option<String>,
}

impl From<ClaimedRow> for StepTask {
    fn from(r: ClaimedRow) -> Self {
        StepTask {
            workflow_id: r.workflow_id,
            step_id: r.step_id as u32,
            step_name: r.step_name,
            input: r.input,
            attempt: r.attempt as u32,
            deadline_at: r.attempt_deadline_at.unwrap_or_default(),
            trace: crate::rows::trace(r.traceparent, r.tracestate),
        }
    }
}

/// What a finished (or expired) attempt leads to; both stores apply it the same way.
pub(crate) enum Next {
    /// Back to QUEUED until `at`, remembering the failure.
    Retry { at: Millis, failure: String },
    /// DONE, with this outcome recorded as the caller's step.
    Close { outcome: crate::Outcome, attempts: u32 },
}

impl TaskRow {
    pub(crate) fn policy(&self) -> StepPolicy {
        StepPolicy {
            max_attempts: self.max_attempts as u32,
            initial_backoff_ms: self.initial_backoff_ms,
            backoff_coefficient: self.backoff_coefficient,
            max_backoff_ms: self.max_backoff_ms,
            timeout_ms: self.timeout_ms,
        }
    }

    /// Whether `attempt` is the attempt running now on the stream `session_id` (its result may
    /// be taken from that stream).
    pub(crate) fn is_running(&self, attempt: u32, session_id: &str) -> bool {
        self.status == "RUNNING" && self.attempt == attempt as i64 && self.session_id.as_deref() == Some(session_id)
    }

    pub(crate) fn next(&self, outcome: crate::Outcome, now: Millis) -> Next {
        let attempt = self.attempt as u32;
        match (outcome, self.policy().retry_at(attempt, now)) {
            (crate::Outcome::Failure(f), Some(at)) => Next::Retry {
                at,
                failure: serde_json::to_string(&f).expect("failure serializes"),
            },
            (outcome, _) => Next::Close {
                outcome,
                attempts: attempt,
            },
        }
    }

    /// The failure recorded for an attempt that did not report back in time.
    pub(crate) fn timed_out(&self, worker_lost: bool) -> crate::Outcome {
        let message = if worker_lost {
            format!(
                "attempt {} of step {:?}: the worker running it was lost",
                self.attempt, self.step_name
            )
        } else {
            format!(
                "attempt {} of step {:?} did not finish within {} ms",
                self.attempt, self.step_name, self.timeout_ms
            )
        };
        crate::Outcome::Failure(crate::Failure {
            kind: STEP_TIMED_OUT.into(),
            message,
        })
    }

    pub(crate) fn stale(&self, attempt: u32) -> crate::StoreError {
        crate::StoreError::StepAttemptStale {
            workflow_id: self.workflow_id.clone(),
            step_id: self.step_id as u32,
            attempt,
        }
    }
}

/// What a select step records: the winner's index.
pub(crate) fn select_output(index: u32) -> String {
    shapes::Selected { index }.record()
}

pub(crate) fn replay_select(workflow_id: &str, step: &crate::StepRecord, mode: WaitFor) -> crate::StoreResult<u32> {
    let selected: shapes::Selected = crate::recorded::replay_builtin(workflow_id, step, mode.step_name())?;
    Ok(selected.index)
}

/// A recorded step at a remote step's position must be that step.
pub(crate) fn check_call(workflow_id: &str, step: &crate::StepRecord, step_name: &str) -> crate::StoreResult<()> {
    Ok(NonDeterminism::check(workflow_id, step.step_id, &step.name, step_name)?)
}
