//! The history a run replays through. Each durable call takes the next position(s) in call
//! order — when it is called, not when it is awaited, so calls started together still number in
//! the order the code made them — and asks what is recorded there: nothing (the call runs live
//! and records), the same step (its recorded result is the answer), or another step
//! (non-determinism).

use std::{
    collections::HashMap,
    sync::atomic::{AtomicU32, Ordering},
};

use serde_json::Value;

use crate::{
    names,
    shapes::{self, Shape, WaitKind, Waited},
    Malformed, NonDeterminism,
};

/// How a recorded step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordedOutcome {
    Output(Value),
    Failure { kind: String, message: String },
}

/// One recorded step.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    pub name: String,
    pub outcome: RecordedOutcome,
}

/// Why a replay cannot go on.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayError {
    NonDeterminism(NonDeterminism),
    Malformed(Malformed),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::NonDeterminism(e) => e.fmt(f),
            ReplayError::Malformed(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReplayError {}

impl From<NonDeterminism> for ReplayError {
    fn from(e: NonDeterminism) -> Self {
        ReplayError::NonDeterminism(e)
    }
}

impl From<Malformed> for ReplayError {
    fn from(e: Malformed) -> Self {
        ReplayError::Malformed(e)
    }
}

/// What [`History::patched`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patched {
    /// Live: the new branch; record the patch's marker at this position.
    Record(u32),
    /// The marker is recorded at this position: the new branch, nothing to record.
    Replayed(u32),
    /// The run began before the change: the old branch; no position taken.
    Old,
}

impl Patched {
    /// Whether the run takes the new branch.
    pub fn applies(self) -> bool {
        !matches!(self, Patched::Old)
    }
}

/// A run's recorded steps and its position in them.
pub struct History {
    workflow_id: String,
    steps: HashMap<u32, Recorded>,
    next: AtomicU32,
}

impl History {
    /// The history of `workflow_id` as dispatched: its recorded steps by position (a position
    /// given twice keeps the last).
    pub fn new(workflow_id: impl Into<String>, steps: impl IntoIterator<Item = (u32, Recorded)>) -> Self {
        History {
            workflow_id: workflow_id.into(),
            steps: steps.into_iter().collect(),
            next: AtomicU32::new(0),
        }
    }

    pub fn workflow_id(&self) -> &str {
        &self.workflow_id
    }

    /// Takes `n` consecutive positions for one call; returns the first.
    pub fn take(&self, n: u32) -> u32 {
        self.next.fetch_add(n, Ordering::SeqCst)
    }

    /// The position the next call will take.
    pub fn next_position(&self) -> u32 {
        self.next.load(Ordering::SeqCst)
    }

    /// Whether the run takes the branch of the code change `patch_id` (see worker.proto's
    /// `patched`). Looks at the next position without taking it: nothing recorded there — the
    /// run is live; take it ([`Patched::Record`], the caller records the marker there); this
    /// patch's marker — take it ([`Patched::Replayed`]); anything else — a run begun before the
    /// change ([`Patched::Old`]), the position left to the next call.
    pub fn patched(&self, patch_id: &str) -> Result<Patched, ReplayError> {
        loop {
            let at = self.next.load(Ordering::SeqCst);
            let answer = match self.steps.get(&at) {
                None => Patched::Record(at),
                Some(rec) if rec.name == names::PATCH => {
                    let RecordedOutcome::Output(v) = &rec.outcome else {
                        return Err(Malformed {
                            step_name: names::PATCH.to_string(),
                        }
                        .into());
                    };
                    let marker = shapes::Patch::read(names::PATCH, v)?;
                    if marker.patch_id != patch_id {
                        return Ok(Patched::Old);
                    }
                    Patched::Replayed(at)
                }
                Some(_) => return Ok(Patched::Old),
            };
            // Taken only if no other call took it meanwhile; else look again.
            if self
                .next
                .compare_exchange(at, at + 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return Ok(answer);
            }
        }
    }

    /// What is recorded at `step_id` for a call named `name`: `None` when nothing is (the call
    /// runs live), non-determinism when another step is.
    pub fn at(&self, step_id: u32, name: &str) -> Result<Option<&Recorded>, NonDeterminism> {
        match self.steps.get(&step_id) {
            None => Ok(None),
            Some(rec) => {
                NonDeterminism::check(&self.workflow_id, step_id, &rec.name, name)?;
                Ok(Some(rec))
            }
        }
    }

    /// The recorded output of a built-in step at `step_id`, read as its shape.
    pub fn builtin<S: Shape>(&self, step_id: u32, name: &str) -> Result<Option<S>, ReplayError> {
        match self.builtin_json(step_id, name)? {
            None => Ok(None),
            Some(v) => Ok(Some(S::read(name, v)?)),
        }
    }

    /// The recorded result of a wait whose result position is `result_step`.
    pub fn waited(&self, kind: &WaitKind, result_step: u32) -> Result<Option<Waited>, ReplayError> {
        match self.builtin_json(result_step, kind.result_step)? {
            None => Ok(None),
            Some(v) => Ok(Some(kind.read(v)?)),
        }
    }

    fn builtin_json(&self, step_id: u32, name: &str) -> Result<Option<&Value>, ReplayError> {
        match self.at(step_id, name)? {
            None => Ok(None),
            Some(Recorded {
                outcome: RecordedOutcome::Output(v),
                ..
            }) => Ok(Some(v)),
            // Built-in steps never record failures; a history that says otherwise is not ours.
            Some(_) => Err(Malformed {
                step_name: name.to_string(),
            }
            .into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::{names, shapes};

    fn output(name: &str, v: Value) -> Recorded {
        Recorded {
            name: name.into(),
            outcome: RecordedOutcome::Output(v),
        }
    }

    fn history() -> History {
        History::new(
            "w",
            [
                (0, output("charge", json!({"ok": true}))),
                (
                    1,
                    Recorded {
                        name: "ship".into(),
                        outcome: RecordedOutcome::Failure {
                            kind: "StepFailed".into(),
                            message: "no stock".into(),
                        },
                    },
                ),
                (2, output(names::SLEEP, json!({"wake_at_ms": 9}))),
                (3, output(names::RECV_DEADLINE, json!({"deadline_ms": 10}))),
                (4, output(names::RECV, Value::Null)),
            ],
        )
    }

    #[test]
    fn positions_are_taken_in_call_order() {
        let h = history();
        assert_eq!(h.take(1), 0);
        assert_eq!(h.take(2), 1, "a wait takes two");
        assert_eq!(h.take(1), 3);
        assert_eq!(h.next_position(), 4);
    }

    #[test]
    fn recorded_steps_replay_and_the_rest_run_live() {
        let h = history();
        assert_eq!(h.at(0, "charge").unwrap(), Some(&output("charge", json!({"ok": true}))));
        let failed = h.at(1, "ship").unwrap().unwrap();
        assert!(matches!(&failed.outcome, RecordedOutcome::Failure { message, .. } if message == "no stock"));
        assert_eq!(h.at(5, "anything").unwrap(), None, "past the history: live");
        assert_eq!(
            h.builtin::<shapes::Sleep>(2, names::SLEEP).unwrap(),
            Some(shapes::Sleep { wake_at_ms: 9 })
        );
        assert_eq!(
            h.builtin::<shapes::Deadline>(3, names::RECV_DEADLINE).unwrap(),
            Some(shapes::Deadline { deadline_ms: 10 })
        );
        assert_eq!(h.waited(&shapes::RECV, 4).unwrap(), Some(shapes::Waited::TimedOut));
        assert_eq!(h.waited(&shapes::RECV, 6).unwrap(), None);
    }

    #[test]
    fn another_step_at_a_recorded_position_is_non_determinism() {
        let h = history();
        let e = h.at(0, "refund").unwrap_err();
        assert_eq!(
            (e.step_id, e.recorded.as_str(), e.presented.as_str()),
            (0, "charge", "refund")
        );
        let e = h.builtin::<shapes::Sleep>(0, names::SLEEP).unwrap_err();
        assert!(matches!(e, ReplayError::NonDeterminism(_)), "{e}");
        let e = h.waited(&shapes::GET_EVENT, 4).unwrap_err();
        assert!(matches!(e, ReplayError::NonDeterminism(_)), "a recv is not a get_event");
    }

    #[test]
    fn a_built_in_step_recorded_as_a_failure_or_another_shape_is_malformed() {
        let h = History::new(
            "w",
            [
                (
                    0,
                    Recorded {
                        name: names::SEND.into(),
                        outcome: RecordedOutcome::Failure {
                            kind: "K".into(),
                            message: "m".into(),
                        },
                    },
                ),
                (1, output(names::SEND, json!({"id": "m"}))),
            ],
        );
        assert!(matches!(
            h.builtin::<shapes::Sent>(0, names::SEND),
            Err(ReplayError::Malformed(_))
        ));
        assert!(matches!(
            h.builtin::<shapes::Sent>(1, names::SEND),
            Err(ReplayError::Malformed(_))
        ));
    }

    #[test]
    fn a_patch_takes_the_new_branch_live_and_on_its_own_replay_and_the_old_one_under_old_history() {
        let marker = |id: &str| output(names::PATCH, json!({ "patch_id": id }));
        // Live: nothing recorded at the next position.
        let h = History::new("w", [(0, output("charge", json!(1)))]);
        assert_eq!(h.take(1), 0);
        assert_eq!(h.patched("fix").unwrap(), Patched::Record(1));
        assert_eq!(h.next_position(), 2, "the marker's position is taken");
        // Its own replay: the marker is there.
        let h = History::new("w", [(0, marker("fix")), (1, output("ship", json!(2)))]);
        assert_eq!(h.patched("fix").unwrap(), Patched::Replayed(0));
        assert_eq!(h.at(h.take(1), "ship").unwrap().unwrap().name, "ship");
        // A run of old code: another step there, which the next call then takes.
        let h = History::new("w", [(0, output("ship", json!(2)))]);
        assert_eq!(h.patched("fix").unwrap(), Patched::Old);
        assert!(!h.patched("fix").unwrap().applies());
        assert_eq!(h.next_position(), 0, "nothing taken");
        assert_eq!(h.at(h.take(1), "ship").unwrap().unwrap().name, "ship");
        // Another patch's marker: this one did not apply when that run got here.
        let h = History::new("w", [(0, marker("older"))]);
        assert_eq!(h.patched("newer").unwrap(), Patched::Old);
        assert_eq!(h.patched("older").unwrap(), Patched::Replayed(0));
        // A marker without its field is not ours.
        let h = History::new("w", [(0, output(names::PATCH, json!({})))]);
        assert!(matches!(h.patched("fix"), Err(ReplayError::Malformed(_))));
    }

    #[test]
    fn calls_from_many_threads_each_get_their_own_positions() {
        let h = std::sync::Arc::new(History::new("w", []));
        let taken: Vec<u32> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| (0..100).map(|_| h.take(2)).collect::<Vec<_>>()))
                .collect();
            handles.into_iter().flat_map(|t| t.join().unwrap()).collect()
        });
        let mut sorted = taken.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 800);
        assert!(sorted.iter().all(|p| p % 2 == 0) && h.next_position() == 1600);
    }
}
