//! Property tests: random sequences of what workers and clients may send — valid, stale,
//! duplicated, out of order, forged, malformed — against a real engine on SQLite, with the
//! clock in the test's hand. After every operation and at the end, the guarantees hold:
//! nothing panics, no write is accepted under an epoch that is not the workflow's current one
//! (or from a stream that does not hold it), a recorded step never changes, a workflow gets at
//! most one outcome, and once every worker is gone and its lease has run out, no workflow is
//! left PENDING.

use std::{collections::HashMap, sync::Arc, time::Duration};

use proptest::prelude::*;
use tokio::sync::mpsc;
use waymark_store::{sqlite::SqliteStore, Fence, NewStep, Outcome, WorkflowStatus};

use super::{
    recovery, workflows::StartRequest, Engine, EngineConfig, Held, ManualClock, Registration, ToWorker, WorkerSession,
};

const WORKFLOWS: u8 = 4;
const WORKERS: u8 = 2;

#[derive(Debug, Clone, Copy)]
enum Epoch {
    Current,
    Stale,
    Guessed,
}

#[derive(Debug, Clone)]
enum Op {
    Start(u8),
    Attach(u8),
    Detach(u8),
    Credit(u8, u8),
    Dispatch,
    Record {
        worker: u8,
        wf: u8,
        epoch: Epoch,
        step: u8,
        out: u8,
    },
    Complete {
        worker: u8,
        wf: u8,
        epoch: Epoch,
        out: u8,
        fail: bool,
    },
    Heartbeat {
        worker: u8,
        held: u8,
        received: u8,
    },
    Cancel(u8),
    Resume(u8),
    Advance(u16),
    Recover,
    Malformed {
        worker: u8,
        which: u8,
    },
}

fn epoch() -> impl Strategy<Value = Epoch> {
    prop_oneof![Just(Epoch::Current), Just(Epoch::Stale), Just(Epoch::Guessed)]
}

fn op() -> impl Strategy<Value = Op> {
    let wf = 0..WORKFLOWS;
    let worker = 0..WORKERS;
    // Weighted so that workflows are started, workers attached with room, and dispatches made
    // often enough for the writes that follow to meet real, running workflows.
    prop_oneof![
        3 => wf.clone().prop_map(Op::Start),
        2 => worker.clone().prop_map(Op::Attach),
        1 => worker.clone().prop_map(Op::Detach),
        3 => (worker.clone(), 0u8..3).prop_map(|(w, n)| Op::Credit(w, n)),
        4 => Just(Op::Dispatch),
        5 => (worker.clone(), wf.clone(), epoch(), 0u8..3, 0u8..2).prop_map(|(worker, wf, epoch, step, out)| Op::Record {
            worker,
            wf,
            epoch,
            step,
            out
        }),
        4 => (worker.clone(), wf.clone(), epoch(), 0u8..2, any::<bool>()).prop_map(|(worker, wf, epoch, out, fail)| {
            Op::Complete {
                worker,
                wf,
                epoch,
                out,
                fail,
            }
        }),
        2 => (worker.clone(), 0u8..16, 0u8..4).prop_map(|(worker, held, received)| Op::Heartbeat { worker, held, received }),
        1 => wf.clone().prop_map(Op::Cancel),
        1 => wf.clone().prop_map(Op::Resume),
        1 => (0u16..4_000).prop_map(Op::Advance),
        1 => Just(Op::Recover),
        1 => (worker, 0u8..4).prop_map(|(worker, which)| Op::Malformed { worker, which }),
    ]
}

fn wf_id(i: u8) -> String {
    format!("wf-{i}")
}

/// One worker's stream as the test drives it: the session, and the dispatches it has taken off
/// its channel (numbered as the transport would).
struct Stream {
    session: Arc<WorkerSession>,
    rx: mpsc::Receiver<ToWorker>,
    received: u64,
}

struct World {
    engine: Arc<Engine>,
    clock: ManualClock,
    streams: HashMap<u8, Stream>,
    /// The first outcome accepted for each (workflow, step): a later accepted write must match.
    steps: HashMap<(String, u32), String>,
    /// Outcomes a completion wrote (not adopted), per workflow, since it was last resumed.
    outcomes: HashMap<String, u32>,
}

impl World {
    async fn new() -> World {
        let path = std::env::temp_dir().join(format!("waymark-fuzz-{}.db", uuid::Uuid::new_v4().simple()));
        let store = SqliteStore::open(&format!("sqlite:{}", path.display())).await.unwrap();
        let clock = ManualClock::new(1_700_000_000_000);
        let config = EngineConfig {
            worker_lease: Duration::from_secs(10),
            recovery_grace: Duration::from_secs(2),
            max_recovery_attempts: 3,
            ..Default::default()
        };
        let engine = Engine::new(Arc::new(store), Arc::new(clock.clone()), config);
        World {
            engine,
            clock,
            streams: HashMap::new(),
            steps: HashMap::new(),
            outcomes: HashMap::new(),
        }
    }

    fn registration(worker: u8) -> Registration {
        Registration {
            worker_id: format!("worker-{worker}"),
            app_version: "v1".into(),
            workflow_names: vec!["wf".into()],
            step_names: vec![],
            queues: vec![],
            key_id: None,
            name_patterns: Vec::new(),
            ..Default::default()
        }
    }

    /// Takes what was pushed to a stream off its channel, numbering dispatches as the transport
    /// does.
    fn drain(&mut self) {
        for s in self.streams.values_mut() {
            while let Ok(m) = s.rx.try_recv() {
                if let ToWorker::Dispatch(w) = m {
                    s.session.note_dispatched(&w.workflow.workflow_id, w.workflow.epoch);
                    s.received += 1;
                }
            }
        }
    }

    async fn fence(&self, wf: u8, pick: Epoch) -> Fence {
        let current = self
            .engine
            .workflows
            .get_workflow(&wf_id(wf))
            .await
            .map(|w| w.epoch)
            .unwrap_or(0);
        let epoch = match pick {
            Epoch::Current => current,
            Epoch::Stale => current.saturating_sub(1),
            Epoch::Guessed => 1,
        };
        Fence {
            workflow_id: wf_id(wf),
            epoch,
        }
    }

    /// A write was accepted: it must have come under the workflow's current epoch, while
    /// PENDING, from the worker it was dispatched to.
    fn check_accepted(
        &self,
        what: &str,
        fence: &Fence,
        writer: u8,
        before: Option<(WorkflowStatus, u64, Option<String>)>,
    ) {
        assert_eq!(
            before,
            Some((WorkflowStatus::Pending, fence.epoch, Some(format!("worker-{writer}")))),
            "{what} by worker-{writer} accepted for {} at epoch {} while the workflow was {before:?}",
            fence.workflow_id,
            fence.epoch
        );
    }

    async fn state(&self, wf: u8) -> Option<(WorkflowStatus, u64, Option<String>)> {
        self.engine
            .workflows
            .get_workflow(&wf_id(wf))
            .await
            .ok()
            .map(|w| (w.status, w.epoch, w.worker_id))
    }

    /// What a write by `worker` for `wf` needs: the worker's session (None when it is not
    /// attached), the fence it presents, and the workflow's state just before.
    async fn writer(
        &self,
        worker: u8,
        wf: u8,
        epoch: Epoch,
    ) -> Option<(Arc<WorkerSession>, Fence, Option<(WorkflowStatus, u64, Option<String>)>)> {
        let session = self.streams.get(&worker)?.session.clone();
        Some((session, self.fence(wf, epoch).await, self.state(wf).await))
    }

    async fn apply(&mut self, op: Op) {
        match op {
            Op::Start(i) => {
                let _ = self
                    .engine
                    .workflows
                    .start_workflow(StartRequest {
                        workflow_name: "wf".into(),
                        workflow_id: wf_id(i),
                        input: "1".into(),
                        ..Default::default()
                    })
                    .await;
            }
            Op::Attach(w) => {
                if self.streams.contains_key(&w) {
                    return;
                }
                let (tx, rx) = mpsc::channel(1_000);
                if let Ok(session) = self.engine.workers.attach_worker(Self::registration(w), tx).await {
                    self.streams.insert(
                        w,
                        Stream {
                            session,
                            rx,
                            received: 0,
                        },
                    );
                }
            }
            Op::Detach(w) => {
                if let Some(s) = self.streams.remove(&w) {
                    self.engine.workers.detach_worker(&s.session).await;
                }
            }
            Op::Credit(w, n) => {
                if let Some(s) = self.streams.get(&w) {
                    self.engine.workers.grant_credits(&s.session, n as u32, 0);
                }
            }
            Op::Dispatch => {
                super::dispatch::dispatch_once(&self.engine).await;
                self.drain();
            }
            Op::Record {
                worker,
                wf,
                epoch,
                step,
                out,
            } => {
                let Some((session, fence, before)) = self.writer(worker, wf, epoch).await else {
                    return;
                };
                let output = format!("{out}");
                let step = NewStep {
                    step_id: step as u32,
                    name: format!("s{step}"),
                    outcome: Outcome::Output(output.clone()),
                    attempts: 1,
                    started_at: None,
                };
                if self
                    .engine
                    .workers
                    .record_step(&session, fence.clone(), step.clone())
                    .await
                    .is_ok()
                {
                    self.check_accepted("a step record", &fence, worker, before);
                    let first = self
                        .steps
                        .entry((fence.workflow_id.clone(), step.step_id))
                        .or_insert(output.clone());
                    assert_eq!(
                        *first, output,
                        "step {} of {} was accepted with another result",
                        step.step_id, fence.workflow_id
                    );
                }
            }
            Op::Complete {
                worker,
                wf,
                epoch,
                out,
                fail,
            } => {
                let Some((session, fence, before)) = self.writer(worker, wf, epoch).await else {
                    return;
                };
                let outcome = if fail {
                    Outcome::Failure(waymark_store::Failure {
                        kind: "Boom".into(),
                        message: "failed".into(),
                    })
                } else {
                    Outcome::Output(format!("{out}"))
                };
                if let Ok(done) = self
                    .engine
                    .workers
                    .complete_workflow(&session, fence.clone(), vec![], outcome)
                    .await
                {
                    if !done.adopted {
                        self.check_accepted("a completion", &fence, worker, before);
                        *self.outcomes.entry(fence.workflow_id.clone()).or_default() += 1;
                    }
                }
            }
            Op::Heartbeat { worker, held, received } => {
                let Some(s) = self.streams.get(&worker) else { return };
                let ids = (0..WORKFLOWS).filter(|i| held & (1 << i) != 0).map(wf_id).collect();
                // A worker never reports more dispatches than it took off the stream.
                let dispatches_received = (received as u64).min(s.received);
                let _ = self
                    .engine
                    .workers
                    .heartbeat(
                        &s.session,
                        Some(Held {
                            workflow_ids: ids,
                            dispatches_received,
                        }),
                    )
                    .await;
            }
            Op::Cancel(i) => {
                let _ = self.engine.workflows.cancel_workflow(&wf_id(i)).await;
            }
            Op::Resume(i) => {
                // A resumed workflow runs again, so it may reach an outcome again: one outcome
                // per run, not per workflow.
                if self.engine.workflows.resume_workflow(&wf_id(i)).await.is_ok() {
                    self.outcomes.remove(&wf_id(i));
                }
            }
            Op::Advance(ms) => self.clock.advance(ms as i64),
            Op::Recover => recovery::recover_once(&self.engine).await,
            Op::Malformed { worker, which } => {
                let Some(s) = self.streams.get(&worker) else { return };
                let session = s.session.clone();
                let (fence, name) = match which {
                    0 => (
                        Fence {
                            workflow_id: String::new(),
                            epoch: 1,
                        },
                        "s".to_string(),
                    ),
                    1 => (
                        Fence {
                            workflow_id: "x\u{202E}y".into(),
                            epoch: 1,
                        },
                        "s".to_string(),
                    ),
                    2 => (
                        Fence {
                            workflow_id: wf_id(0),
                            epoch: u64::MAX,
                        },
                        "s".to_string(),
                    ),
                    _ => (
                        Fence {
                            workflow_id: wf_id(0),
                            epoch: 1,
                        },
                        "n".repeat(10_000),
                    ),
                };
                let step = NewStep {
                    step_id: u32::MAX,
                    name,
                    outcome: Outcome::Output("0".into()),
                    attempts: 0,
                    started_at: None,
                };
                assert!(
                    self.engine.workers.record_step(&session, fence, step).await.is_err(),
                    "a malformed write was accepted"
                );
            }
        }
    }

    /// Every worker gone and its lease run out: nothing may be left PENDING.
    async fn settle(&mut self) {
        for (_, s) in self.streams.drain() {
            self.engine.workers.detach_worker(&s.session).await;
        }
        self.clock.advance(60_000);
        recovery::recover_once(&self.engine).await;
        for i in 0..WORKFLOWS {
            if let Ok(w) = self.engine.workflows.get_workflow(&wf_id(i)).await {
                assert_ne!(
                    w.status,
                    WorkflowStatus::Pending,
                    "{} left PENDING with no worker: {w:?}",
                    w.workflow_id
                );
            }
        }
        for (id, n) in &self.outcomes {
            assert!(*n <= 1, "{id} got {n} outcomes");
        }
        // What the store holds is what was first accepted.
        for i in 0..WORKFLOWS {
            for s in self.engine.workflows.list_steps(&wf_id(i)).await.unwrap_or_default() {
                if let (Some(first), Outcome::Output(o)) = (self.steps.get(&(wf_id(i), s.step_id)), &s.outcome) {
                    assert_eq!(first, o, "step {} of wf-{i} changed", s.step_id);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn worker_and_client_sequences_keep_every_guarantee(ops in proptest::collection::vec(op(), 10..80)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut world = World::new().await;
            for op in ops {
                world.apply(op).await;
            }
            world.settle().await;
        });
    }
}
