//! Workers connected to this replica: what each can run, how much room it has (credits), and
//! the channel to its stream.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering},
        Arc, Mutex,
    },
};

use tokio::sync::mpsc;
use waymark_store::{ClaimedWorkflow, Fence, Millis, StepTask, TraceContext};

use super::stream_traces::ServedSteps;

/// What the engine sends down a worker's stream (besides replies, which the API layer sends).
#[derive(Debug)]
pub enum ToWorker {
    Dispatch(Box<ClaimedWorkflow>),
    /// Run an attempt of a remote step.
    DispatchStep(Box<StepTask>),
    Cancel(String),
    /// What the workflow's step `step_id` waits for may have happened: ask again.
    Wakeup {
        workflow_id: String,
        step_id: u32,
    },
    /// The receive waiting as step `step_id` got `message` (JSON text), already consumed and
    /// recorded: the worker can go on without asking.
    Delivered {
        workflow_id: String,
        step_id: u32,
        message: String,
    },
    Drain,
}

/// What a worker declared in its hello.
#[derive(Debug, Clone, Default)]
pub struct Registration {
    pub worker_id: String,
    pub app_name: String,
    pub app_version: String,
    /// Language and version of its SDK ("rust/0.1.0"), for operators.
    pub sdk: String,
    pub workflow_names: Vec<String>,
    /// Remote steps it runs.
    pub step_names: Vec<String>,
    pub queues: Vec<String>,
    /// The API key the stream authenticated with (`None` with authentication off). A worker id
    /// is bound to the key that holds it: another key cannot take it over.
    pub key_id: Option<String>,
    /// The name patterns of that key: the workflow and step names this worker may register and
    /// the workflows it may reach (await, read events of, send to, start as children). Empty:
    /// every name in its namespace.
    pub name_patterns: Vec<String>,
}

impl Registration {
    /// Whether this worker's key covers `name` (see [`super::validate::pattern_matches`]).
    pub fn reaches(&self, name: &str) -> bool {
        self.name_patterns.is_empty()
            || self
                .name_patterns
                .iter()
                .any(|p| super::validate::pattern_matches(p, name))
    }
}

/// One worker stream attached to this replica.
pub struct WorkerSession {
    /// Local number, for logs.
    pub session_id: u64,
    /// Globally unique id of this stream: the key of its lease in the store.
    pub lease_id: String,
    pub registration: Registration,
    /// Workflows the server may still dispatch to this worker.
    credits: AtomicU32,
    /// Remote step attempts the server may still dispatch to this worker.
    step_credits: AtomicU32,
    /// When the worker last said anything (engine clock).
    last_seen: AtomicI64,
    /// Work this worker might take may have been enqueued since its last claim came back short.
    /// New credits alone do not make a claim worth a database round trip: only this does (or
    /// the dispatcher's poll, which sets it). See [`Engine::work_enqueued`](super::Engine::work_enqueued).
    claim_wanted: AtomicBool,
    /// The same for remote step attempts.
    step_claim_wanted: AtomicBool,
    /// Workflows sent down this stream that the worker has not let go of as far as this replica
    /// knows, each with its epoch and the number of its dispatch on the stream. Checked against
    /// the worker's heartbeats (see [`lost`](Self::lost)); never larger than the credits granted.
    dispatched: Mutex<HashMap<String, Dispatched>>,
    /// Dispatches sent down this stream so far.
    dispatches_sent: AtomicU64,
    /// A write that may have given this stream workflows failed without saying whether it
    /// committed (a claim, or a start dispatching here, whose connection broke mid-commit). Until
    /// the dispatcher settles it (see `in_doubt.rs`), the stream may own workflows it was never
    /// sent, which its live heartbeats would keep from recovery for ever.
    in_doubt: AtomicBool,
    /// Starts dispatching straight to this stream right now, from choosing it to sending the
    /// dispatch: their rows are not lost, so settling waits until there are none.
    placing: AtomicU32,
    /// The trace contexts of the remote step attempts this worker serves, so the server's span
    /// for each result joins the caller's trace (kept only while spans are exported).
    pub(crate) served_steps: ServedSteps,
    outbound: mpsc::Sender<ToWorker>,
}

#[derive(Debug, Clone)]
struct Dispatched {
    epoch: u64,
    /// Bytes of history the workflow has as far as this stream knows: what its dispatch
    /// carried, plus what the worker recorded since. Checked against the history cap as each
    /// write arrives.
    history_bytes: usize,
    /// Its place among the dispatches the stream carried, once the transport took it (the
    /// order the worker receives them in); `None` while it is still queued for the stream.
    number: Option<u64>,
    /// The trace the workflow's dispatch carried, while spans are exported: the server's spans
    /// for this run's messages (a step recorded, the completion) join it.
    trace: Option<Box<TraceContext>>,
}

impl WorkerSession {
    pub fn grant_steps(&self, n: u32) {
        add_capped(&self.step_credits, n);
    }
    /// Like [`reserve`](Self::reserve), for remote step attempts.
    pub(crate) fn reserve_steps(&self, max: u32) -> u32 {
        take(&self.step_credits, max)
    }
    pub fn step_credits(&self) -> u32 {
        self.step_credits.load(Ordering::SeqCst)
    }
    pub fn credits(&self) -> u32 {
        self.credits.load(Ordering::SeqCst)
    }
    /// Workflows dispatched on this stream that the worker still holds.
    pub fn in_flight(&self) -> usize {
        self.dispatched.lock().unwrap().len()
    }
    /// Adds room for `n` more workflows, up to [`MAX_CREDITS`] in all: a worker cannot make
    /// the server dispatch (and track) without bound.
    pub fn grant(&self, n: u32) {
        add_capped(&self.credits, n);
    }
    /// Takes up to `max` credits for a dispatch about to happen; what is not used goes back
    /// with [`grant`](Self::grant). Atomic, so the dispatcher and direct dispatch at start never
    /// spend the same credit.
    pub(crate) fn reserve(&self, max: u32) -> u32 {
        take(&self.credits, max)
    }

    /// Whether this worker can run `workflow_name` from `queue`, pinned to `app_version` (empty:
    /// not pinned).
    pub fn serves(&self, workflow_name: &str, queue: &str, app_version: &str) -> bool {
        self.registration.workflow_names.iter().any(|n| n == workflow_name) && self.serves_queue(queue, app_version)
    }
    /// Whether this worker takes work from `queue` at `app_version` (empty: not pinned), for
    /// some workflow name.
    pub fn serves_queue(&self, queue: &str, app_version: &str) -> bool {
        let r = &self.registration;
        r.queues.iter().any(|q| q == queue) && (app_version.is_empty() || app_version == r.app_version)
    }
    /// Marks that a claim may find something for this worker.
    pub(crate) fn want_claims(&self) {
        self.claim_wanted.store(true, Ordering::SeqCst);
        self.step_claim_wanted.store(true, Ordering::SeqCst);
    }
    /// Whether a workflow claim is wanted, clearing the mark: set it again with
    /// [`want_claims`](Self::want_claims) when the claim comes back full or fails. Cleared
    /// before the claim reads, so whatever is enqueued (and marked, after its commit) while it
    /// runs is looked for by the next one.
    pub(crate) fn take_claim_wanted(&self) -> bool {
        self.claim_wanted.swap(false, Ordering::SeqCst)
    }
    pub(crate) fn take_step_claim_wanted(&self) -> bool {
        self.step_claim_wanted.swap(false, Ordering::SeqCst)
    }
    pub(crate) fn want_step_claims(&self) {
        self.step_claim_wanted.store(true, Ordering::SeqCst);
    }
    pub fn touch(&self, now: Millis) {
        self.last_seen.store(now, Ordering::SeqCst);
    }
    pub fn last_seen(&self) -> Millis {
        self.last_seen.load(Ordering::SeqCst)
    }
    /// A dispatch of `workflow_id` at `epoch` is going down the stream now (called in stream
    /// order, as the transport takes it).
    pub fn note_dispatched(&self, workflow_id: &str, epoch: u64) {
        let number = Some(self.dispatches_sent.fetch_add(1, Ordering::SeqCst) + 1);
        let mut dispatched = self.dispatched.lock().unwrap();
        match dispatched.get_mut(workflow_id).filter(|d| d.epoch == epoch) {
            Some(d) => d.number = number,
            None => {
                dispatched.insert(
                    workflow_id.to_string(),
                    Dispatched {
                        epoch,
                        history_bytes: 0,
                        number,
                        trace: None,
                    },
                );
            }
        }
    }

    /// The trace context of the run of `workflow_id` this stream holds, when its dispatch
    /// carried one and spans are exported.
    pub(crate) fn trace_of(&self, workflow_id: &str) -> Option<TraceContext> {
        let dispatched = self.dispatched.lock().unwrap();
        dispatched.get(workflow_id)?.trace.as_deref().cloned()
    }

    /// Whether this stream holds `workflow_id` at `epoch`: it was dispatched here, under that
    /// epoch, and not let go of since. A worker's writes count only from the stream that holds
    /// the workflow — epochs are small numbers anyone could guess.
    pub(crate) fn holds(&self, workflow_id: &str, epoch: u64) -> bool {
        self.dispatched
            .lock()
            .unwrap()
            .get(workflow_id)
            .is_some_and(|d| d.epoch == epoch)
    }

    /// The history of `workflow_id` as this stream counts it (0 when it does not hold it).
    pub(crate) fn history_bytes(&self, workflow_id: &str) -> usize {
        self.dispatched
            .lock()
            .unwrap()
            .get(workflow_id)
            .map_or(0, |d| d.history_bytes)
    }

    /// Adds `bytes`, durably recorded, to the history of `workflow_id` as this stream counts it.
    pub(crate) fn grow_history(&self, workflow_id: &str, bytes: usize) {
        if let Some(d) = self.dispatched.lock().unwrap().get_mut(workflow_id) {
            d.history_bytes = d.history_bytes.saturating_add(bytes);
        }
    }

    /// The worker let go of the run `fence` names in a way the server saw (completed, parked,
    /// refused). Only that run: a refusal that reaches an older run after the workflow was
    /// dispatched here again (cancelled, resumed, re-dispatched) must not drop the newer one,
    /// or its writes would be refused and nothing would ever take it back.
    pub(crate) fn let_go(&self, fence: &Fence) {
        let mut dispatched = self.dispatched.lock().unwrap();
        if dispatched
            .get(&fence.workflow_id)
            .is_some_and(|d| d.epoch == fence.epoch)
        {
            dispatched.remove(&fence.workflow_id);
        }
    }

    /// What the worker lost, judging by a heartbeat that lists what it `held` after taking
    /// `dispatches_received` dispatches off the stream: every workflow dispatched before that
    /// which it no longer lists, and which the server did not see it let go of. They are
    /// forgotten here; the caller takes them back (fenced by epoch, so one that finished or
    /// moved on meanwhile is left alone). Dispatches still on their way are not judged.
    pub(crate) fn lost(&self, held: &[String], dispatches_received: u64) -> Vec<Fence> {
        let held: std::collections::HashSet<&str> = held.iter().map(String::as_str).collect();
        let mut dispatched = self.dispatched.lock().unwrap();
        let lost: Vec<Fence> = dispatched
            .iter()
            .filter(|(id, d)| d.number.is_some_and(|n| n <= dispatches_received) && !held.contains(id.as_str()))
            .map(|(id, d)| Fence {
                workflow_id: id.clone(),
                epoch: d.epoch,
            })
            .collect();
        for f in &lost {
            dispatched.remove(&f.workflow_id);
        }
        lost
    }

    /// Every workflow sent down this stream and not let go of, at the epoch it was sent.
    pub(crate) fn sent(&self) -> Vec<Fence> {
        let dispatched = self.dispatched.lock().unwrap();
        dispatched
            .iter()
            .map(|(id, d)| Fence {
                workflow_id: id.clone(),
                epoch: d.epoch,
            })
            .collect()
    }

    /// A write that may have given this stream workflows ended in an error: whether it
    /// committed is unknown.
    pub(crate) fn doubt(&self) {
        self.in_doubt.store(true, Ordering::SeqCst);
    }
    pub(crate) fn in_doubt(&self) -> bool {
        self.in_doubt.load(Ordering::SeqCst)
    }
    pub(crate) fn settled(&self) {
        self.in_doubt.store(false, Ordering::SeqCst);
    }
    /// Starts dispatching straight here right now.
    pub(crate) fn placing(&self) -> u32 {
        self.placing.load(Ordering::SeqCst)
    }
    /// Counts a start that is about to dispatch straight to this stream, until the returned
    /// guard is dropped; `None` while the stream is in doubt. Counted before the doubt is read
    /// (and the settling reads the count after setting the doubt), so a start and a settling
    /// never both go ahead.
    pub(crate) fn begin_placing(self: &Arc<Self>) -> Option<Placing> {
        self.placing.fetch_add(1, Ordering::SeqCst);
        let placing = Placing(self.clone());
        (!self.in_doubt()).then_some(placing)
    }

    pub async fn send(&self, msg: ToWorker) -> bool {
        if let ToWorker::Dispatch(w) = &msg {
            // Held from now on (numbered when the transport sends it).
            self.dispatched.lock().unwrap().insert(
                w.workflow.workflow_id.clone(),
                Dispatched {
                    epoch: w.workflow.epoch,
                    history_bytes: super::dispatch::history_bytes(w),
                    number: None,
                    trace: w
                        .workflow
                        .trace
                        .as_ref()
                        .filter(|_| crate::telemetry::exporting())
                        .map(|t| Box::new(t.clone())),
                },
            );
        }
        self.outbound.send(msg).await.is_ok()
    }
}

/// A start dispatching straight to a stream, counted there while it lasts (see
/// [`WorkerSession::begin_placing`]).
pub(crate) struct Placing(Arc<WorkerSession>);

impl Placing {
    pub(crate) fn session(&self) -> &Arc<WorkerSession> {
        &self.0
    }
}

impl Drop for Placing {
    fn drop(&mut self) {
        self.0.placing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Most credits (workflows, and apart, remote step attempts) one stream can hold.
pub const MAX_CREDITS: u32 = 100_000;

fn add_capped(credits: &AtomicU32, n: u32) {
    let _ = credits.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
        Some(c.saturating_add(n).min(MAX_CREDITS))
    });
}

/// Takes up to `max` from a credit counter, atomically.
fn take(credits: &AtomicU32, max: u32) -> u32 {
    let mut taken = 0;
    let _ = credits.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
        taken = c.min(max);
        Some(c - taken)
    });
    taken
}

#[derive(Default)]
pub struct Sessions {
    next_id: AtomicU64,
    by_id: Mutex<HashMap<u64, Arc<WorkerSession>>>,
    /// Each attached stream's place under the namespace's and the replica's caps, given back
    /// when it is detached.
    places: Mutex<HashMap<u64, super::quota::Place>>,
}

impl Sessions {
    pub fn attach(
        &self,
        registration: Registration,
        lease_id: String,
        now: Millis,
        outbound: mpsc::Sender<ToWorker>,
    ) -> Arc<WorkerSession> {
        let session = Arc::new(WorkerSession {
            session_id: self.next_id.fetch_add(1, Ordering::SeqCst) + 1,
            lease_id,
            registration,
            credits: AtomicU32::new(0),
            step_credits: AtomicU32::new(0),
            last_seen: AtomicI64::new(now),
            claim_wanted: AtomicBool::new(true),
            step_claim_wanted: AtomicBool::new(true),
            dispatched: Mutex::new(HashMap::new()),
            dispatches_sent: AtomicU64::new(0),
            in_doubt: AtomicBool::new(false),
            placing: AtomicU32::new(0),
            served_steps: ServedSteps::default(),
            outbound,
        });
        self.by_id.lock().unwrap().insert(session.session_id, session.clone());
        session
    }

    pub fn detach(&self, session_id: u64) {
        self.by_id.lock().unwrap().remove(&session_id);
        self.places.lock().unwrap().remove(&session_id);
    }

    /// Keeps `place` while stream `session_id` is attached.
    pub(crate) fn hold(&self, session_id: u64, place: super::quota::Place) {
        self.places.lock().unwrap().insert(session_id, place);
    }

    /// Marks every attached worker as having a claim to make (see `WorkerSession::want_claims`).
    pub(crate) fn want_claims_everywhere(&self) {
        for s in self.by_id.lock().unwrap().values() {
            s.want_claims();
        }
    }

    /// Marks the attached workers that can run `workflow_name` (any name when `None`) from
    /// `queue` at `app_version` (any when empty) as having a claim to make; whether there was one.
    pub(crate) fn want_claims_serving(&self, workflow_name: Option<&str>, queue: &str, app_version: &str) -> bool {
        let mut any = false;
        for s in self.by_id.lock().unwrap().values() {
            let serves = match workflow_name {
                Some(name) => s.serves(name, queue, app_version),
                None => s.serves_queue(queue, app_version),
            };
            if serves {
                s.want_claims();
                any = true;
            }
        }
        any
    }

    pub fn count(&self) -> usize {
        self.by_id.lock().unwrap().len()
    }

    pub fn all(&self) -> Vec<Arc<WorkerSession>> {
        self.by_id.lock().unwrap().values().cloned().collect()
    }

    pub fn by_worker(&self, worker_id: &str) -> Vec<Arc<WorkerSession>> {
        self.by_id
            .lock()
            .unwrap()
            .values()
            .filter(|s| s.registration.worker_id == worker_id)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
#[path = "sessions_tests.rs"]
mod tests;
