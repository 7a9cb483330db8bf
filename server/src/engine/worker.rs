//! The workers service: the worker streams attached to this replica — attach, credits,
//! heartbeats, the checks every write a worker makes goes through, step checkpoints,
//! completions, and what happens when a stream ends. It owns the attached streams
//! ([`Sessions`]); the dispatcher pairs them with enqueued work.

use std::sync::Arc;

use tokio::sync::mpsc;
use waymark_store::{Completed, Failure, Fence, NewStep, Outcome, Recorded, StoreError};

use super::{
    sessions::Sessions, validate, waits::Waits, workflows::DEFAULT_QUEUE, Core, Engine, EngineError, EngineResult,
    Registration, ToWorker, WorkerSession,
};

/// Most workflow names (and, apart, remote step names) one worker may register.
pub const MAX_REGISTERED_NAMES: usize = 1_000;
/// Most queues one worker may take work from.
pub const MAX_WORKER_QUEUES: usize = 100;

/// Most workflow ids one heartbeat may list.
pub const MAX_HELD_IDS: usize = 100_000;

/// What a heartbeat says the worker holds (see `Heartbeat` in worker.proto).
#[derive(Debug, Default)]
pub struct Held {
    pub workflow_ids: Vec<String>,
    /// Dispatches the worker had taken off the stream when it listed them.
    pub dispatches_received: u64,
}

fn worker_id_in_use(worker_id: &str) -> EngineError {
    EngineError::new(
        super::ErrorCode::AlreadyExists,
        "WORKER_ID_IN_USE",
        format!("worker id {worker_id:?} is held by another live stream; reconnect later or use another id"),
    )
}

pub struct Workers {
    pub(super) core: Arc<Core>,
    /// The streams attached here.
    pub(super) sessions: Arc<Sessions>,
    /// What a finished or lost workflow wakes.
    pub(super) waits: Arc<Waits>,
}

impl Workers {
    pub(crate) fn new(core: Arc<Core>, sessions: Arc<Sessions>, waits: Arc<Waits>) -> Workers {
        Workers { core, sessions, waits }
    }

    /// Attaches a worker's stream. Whatever an earlier stream of the same worker still owned goes
    /// back to its queue at once: the worker dropped it when that stream broke.
    pub async fn attach_worker(
        &self,
        mut registration: Registration,
        outbound: mpsc::Sender<ToWorker>,
    ) -> EngineResult<Arc<WorkerSession>> {
        if self.core.is_shutting_down() {
            return Err(EngineError::shutting_down());
        }
        validate::name("worker_id", &registration.worker_id)?;
        validate::optional_name("app_version", &registration.app_version)?;
        let r = &registration;
        for (what, n, max) in [
            ("workflow names", r.workflow_names.len(), MAX_REGISTERED_NAMES),
            ("step names", r.step_names.len(), MAX_REGISTERED_NAMES),
            ("queues", r.queues.len(), MAX_WORKER_QUEUES),
        ] {
            if n > max {
                return Err(EngineError::invalid(format!(
                    "a worker may register at most {max} {what}; this hello has {n}"
                )));
            }
        }
        // A place under the namespace's limit and the replica's cap, held while attached.
        let place = self.core.quota.stream_place(&self.core.shared, self.core.namespace())?;
        // A worker id belongs to one live stream. A stream that has spoken within two heartbeat
        // intervals is live: a second hello with its id (another process, or an impostor) is
        // refused rather than handed its workflows. One that has gone quiet is presumed dead (a
        // reconnect after a network break the server had not noticed yet) and is replaced.
        let live_after = self.core.now() - 2 * Engine::ms(self.core.config.heartbeat_interval);
        for old in self.sessions.by_worker(&registration.worker_id) {
            // Another key never takes a worker id over, live or quiet: the id's workflows and
            // their histories would go to whoever guessed it.
            let other_key = old.registration.key_id != registration.key_id;
            if other_key || old.last_seen() >= live_after {
                return Err(worker_id_in_use(&registration.worker_id));
            }
            tracing::info!(worker_id = %registration.worker_id, session = old.session_id, "a quiet stream of this worker is replaced by its new one");
            self.sessions.detach(old.session_id);
        }
        for n in &registration.workflow_names {
            validate::name("workflow_names", n)?;
        }
        for n in &registration.step_names {
            validate::name("step_names", n)?;
        }
        for q in &registration.queues {
            validate::name("queues", q)?;
        }
        if registration.queues.is_empty() {
            registration.queues.push(DEFAULT_QUEUE.to_string());
        }
        let now = self.core.now();
        let lease_id = uuid::Uuid::new_v4().to_string();
        let until = now + Engine::ms(self.core.config.worker_lease);
        let held = self
            .core
            .store
            .hold_worker_id(
                &lease_id,
                &registration.worker_id,
                registration.key_id.as_deref(),
                until,
                now,
            )
            .await?;
        if !held {
            // A live stream on another replica holds the id with another key.
            return Err(worker_id_in_use(&registration.worker_id));
        }
        let declared = super::worker_list::Declared::of(&registration, now);
        self.core.store.describe_session(&lease_id, &declared.json()).await?;
        self.core
            .store
            .register_workflow_names(&registration.workflow_names, now)
            .await?;
        self.core.store.ensure_queues(&registration.queues, now).await?;
        let released = self
            .core
            .store
            .release_worker(&registration.worker_id, self.core.config.max_recovery_attempts, now)
            .await?;
        self.core
            .counters
            .recovered(released.requeued.len(), released.dead_lettered.len());
        if !released.requeued.is_empty() || !released.dead_lettered.is_empty() {
            tracing::info!(worker_id = %registration.worker_id, requeued = released.requeued.len(),
                dead_lettered = released.dead_lettered.len(), "worker reconnected; took back what its earlier stream held");
        }
        let session = self.sessions.attach(registration, lease_id, now, outbound);
        self.sessions.hold(session.session_id, place);
        tracing::info!(worker_id = %session.registration.worker_id, session = session.session_id,
            app_version = %session.registration.app_version, workflows = ?session.registration.workflow_names, "worker attached");
        self.core.work_enqueued();
        Ok(session)
    }

    /// The stream ended. Its workflows stay with it for the recovery grace period (the worker
    /// may reconnect and take them back at once), then go back to their queue.
    pub async fn detach_worker(&self, session: &WorkerSession) {
        self.sessions.detach(session.session_id);
        let worker_id = &session.registration.worker_id;
        tracing::info!(%worker_id, session = session.session_id, "worker detached");
        let now = self.core.now();
        let until = now + Engine::ms(self.core.config.recovery_grace);
        if let Err(e) = self
            .core
            .store
            .renew_session_lease(&session.lease_id, worker_id, until, now)
            .await
        {
            tracing::warn!(%worker_id, error = %e, "could not shorten the lease of a detached worker; it expires on its own");
        }
    }

    /// The worker has room for `workflows` more workflows and `steps` more remote step attempts.
    pub fn grant_credits(&self, session: &WorkerSession, workflows: u32, steps: u32) {
        session.touch(self.core.now());
        session.grant(workflows);
        session.grant_steps(steps);
        if workflows > 0 || steps > 0 {
            self.core.work.wake_dispatcher();
        }
    }

    /// Renews the worker's lease and, when the heartbeat says what the worker holds, takes back
    /// what it lost: a workflow dispatched to it that it no longer lists would otherwise stay
    /// PENDING for as long as the worker stays healthy.
    pub async fn heartbeat(&self, session: &WorkerSession, held: Option<Held>) -> EngineResult<()> {
        let now = self.core.now();
        session.touch(now);
        let until = now + Engine::ms(self.core.config.worker_lease);
        let load = super::worker_list::Load::of(session).json();
        self.core
            .store
            .heartbeat_session(&session.lease_id, &session.registration.worker_id, until, &load, now)
            .await?;
        let Some(held) = held else { return Ok(()) };
        if held.workflow_ids.len() > MAX_HELD_IDS {
            return Err(EngineError::invalid(format!(
                "a heartbeat lists at most {MAX_HELD_IDS} held workflows"
            )));
        }
        let lost = session.lost(&held.workflow_ids, held.dispatches_received);
        if lost.is_empty() {
            return Ok(());
        }
        let released = self
            .core
            .store
            .release_lost(&lost, self.core.config.max_recovery_attempts, self.core.now())
            .await?;
        self.core
            .counters
            .recovered(released.requeued.len(), released.dead_lettered.len());
        let worker_id = &session.registration.worker_id;
        for id in &released.requeued {
            tracing::warn!(%worker_id, workflow_id = %id, "worker no longer holds a workflow dispatched to it; put back in its queue");
        }
        for id in &released.dead_lettered {
            tracing::warn!(%worker_id, workflow_id = %id, "workflow lost by its worker too often; dead-lettered");
            self.waits.announce_finished(id, None);
        }
        if !released.requeued.is_empty() {
            self.core.work_enqueued();
        }
        Ok(())
    }

    /// What every write a worker makes for a workflow checks first: the id is well formed, and
    /// the stream making it holds the workflow at the epoch it presents — it was dispatched
    /// there and not let go of. Another stream that knows or guesses the epoch (it is 1 for
    /// most workflows) is refused as a stale writer would be.
    ///
    /// `adds` is what the write would record into the workflow's history (bytes of JSON). A
    /// write that would take the history past `max_history_bytes` fails the workflow with
    /// HISTORY_TOO_LARGE at once, while the error can still reach its worker: past the cap it
    /// could never be dispatched again. Nothing is counted here: the caller counts the bytes
    /// once its write is durable (`grow_history`), so a write refused by a database that is
    /// away, and resent, is not counted once per attempt.
    pub(crate) async fn worker_write(&self, session: &WorkerSession, fence: &Fence, adds: usize) -> EngineResult<()> {
        session.touch(self.core.now());
        validate::name("workflow_id", &fence.workflow_id)?;
        if !session.holds(&fence.workflow_id, fence.epoch) {
            return Err(EngineError::new(
                super::ErrorCode::Aborted,
                "STALE_EPOCH",
                format!(
                    "this stream does not hold workflow {:?} at epoch {}; the write is refused",
                    fence.workflow_id, fence.epoch
                ),
            ));
        }
        let history = session.history_bytes(&fence.workflow_id).saturating_add(adds);
        if history > self.core.config.max_history_bytes {
            return Err(self.fail_history_too_large(session, fence, history).await);
        }
        Ok(())
    }

    /// Refuses a worker whose key's name patterns do not cover workflow `target` (which it would
    /// await, read an event of, send to or select on): PERMISSION_DENIED. A key without patterns
    /// reaches its whole namespace and costs no read. A workflow that does not exist is let
    /// through to the operation, which answers as it would anyone; each ask checks again, so
    /// a workflow made later under a name outside the key is refused then.
    pub(crate) async fn check_reach(&self, session: &WorkerSession, target: &str) -> EngineResult<()> {
        if session.registration.name_patterns.is_empty() {
            return Ok(());
        }
        match self.core.store.get_workflow(target).await? {
            Some(w) if !session.registration.reaches(&w.workflow_name) => Err(out_of_reach(&w.workflow_name)),
            _ => Ok(()),
        }
    }

    /// Fails a workflow whose history a write would take past `max_history_bytes`, and says so
    /// to its worker.
    async fn fail_history_too_large(&self, session: &WorkerSession, fence: &Fence, history: usize) -> EngineError {
        let most = self.core.config.max_history_bytes;
        let message = format!(
            "this write would take the workflow's recorded history to {history} bytes; a workflow may record at most {most}"
        );
        let failure = Failure {
            kind: "HISTORY_TOO_LARGE".into(),
            message: message.clone(),
        };
        tracing::warn!(workflow_id = %fence.workflow_id, history, "history cap reached; workflow failed");
        session.let_go(fence);
        if let Ok(done) = self
            .core
            .store
            .complete_workflow(fence, Outcome::Failure(failure), self.core.now())
            .await
        {
            self.waits.finished_here(done.workflow);
        }
        // (Had the database not answered, the workflow is recovered and fails at dispatch.)
        EngineError::new(super::ErrorCode::ResourceExhausted, "HISTORY_TOO_LARGE", message)
    }

    /// The bytes a step adds to its workflow's history (what `dispatch::history_bytes` counts).
    pub(crate) fn step_bytes(step: &NewStep) -> usize {
        step.name.len()
            + match &step.outcome {
                Outcome::Output(o) => o.len(),
                Outcome::Failure(f) => f.kind.len() + f.message.len(),
            }
    }

    /// Checkpoints a step. A different step at a recorded position fails the workflow: the code
    /// that is running is not the code that ran, and carrying on would corrupt its history.
    pub async fn record_step(&self, session: &WorkerSession, fence: Fence, step: NewStep) -> EngineResult<Recorded> {
        self.worker_write(session, &fence, 0).await?;
        let adds = Workers::step_bytes(&step);
        let history = session.history_bytes(&fence.workflow_id).saturating_add(adds);
        // Past the cap, unless this is a resend of a step already recorded (and counted): a
        // reply lost, or a database that was away, is never the workflow's failure.
        if history > self.core.config.max_history_bytes {
            let recorded = self.core.store.list_steps(&fence.workflow_id).await?;
            if !recorded.iter().any(|s| s.step_id == step.step_id) {
                return Err(self.fail_history_too_large(session, &fence, history).await);
            }
        }
        validate::name("step name", &step.name)?;
        if let Outcome::Output(o) = &step.outcome {
            validate::payload("step output", o, self.core.config.max_payload_bytes)?;
        }
        let step_id = step.step_id;
        match self.core.store.record_step(&fence, step, self.core.now()).await {
            Ok(r) => {
                tracing::debug!(workflow_id = %fence.workflow_id, step_id, "step recorded");
                // A resend of a step already recorded adds nothing.
                if r == Recorded::New {
                    session.grow_history(&fence.workflow_id, adds);
                    self.core.counters.steps(1);
                }
                Ok(r)
            }
            Err(e) => Err(self.refused_step(session, &fence, e).await),
        }
    }

    /// A refused ending (completion or continue-as-new) as the caller's error. Refused for any
    /// reason but the database's absence, it ends the run on this stream.
    pub(crate) async fn refused_ending(&self, session: &WorkerSession, fence: &Fence, e: StoreError) -> EngineError {
        if !matches!(e, StoreError::Unavailable(_)) {
            session.let_go(fence);
        }
        self.refused_step(session, fence, e).await
    }

    /// A refused step write as the caller's error. Non-determinism also fails the workflow.
    /// When the run is over for good (fenced, finished, cancelled, gone, non-deterministic) it
    /// stops counting as held by this stream. Unavailable is not that: the worker resends, or
    /// gives up and its heartbeat stops listing the workflow, which then goes back to its queue.
    pub(crate) async fn refused_step(&self, session: &WorkerSession, fence: &Fence, e: StoreError) -> EngineError {
        if matches!(
            e,
            StoreError::StaleEpoch { .. }
                | StoreError::NotRunning { .. }
                | StoreError::WorkflowNotFound(_)
                | StoreError::NonDeterminism { .. }
        ) {
            session.let_go(fence);
        }
        let nondeterministic = matches!(e, StoreError::NonDeterminism { .. });
        let err = EngineError::from(e);
        if nondeterministic {
            let failure = Failure {
                kind: "NonDeterminism".into(),
                message: err.message.clone(),
            };
            tracing::warn!(workflow_id = %fence.workflow_id, "{}", err.message);
            let failed = self
                .core
                .store
                .complete_workflow(fence, Outcome::Failure(failure), self.core.now())
                .await;
            if let Ok(done) = failed {
                self.waits.finished_here(done.workflow);
            }
        }
        err
    }

    /// Finishes a workflow, checkpointing `steps` (its last, whose records the worker held
    /// back) with it; the second finisher adopts the first's outcome.
    pub async fn complete_workflow(
        &self,
        session: &WorkerSession,
        fence: Fence,
        steps: Vec<NewStep>,
        outcome: Outcome,
    ) -> EngineResult<Completed> {
        self.worker_write(session, &fence, steps.iter().map(Workers::step_bytes).sum())
            .await?;
        // An output over the limit is the workflow's own doing and will not shrink on a retry:
        // the workflow fails with PAYLOAD_TOO_LARGE rather than being refused and run again.
        let outcome = match outcome {
            Outcome::Output(o) => {
                match validate::payload("the workflow's output", &o, self.core.config.max_payload_bytes) {
                    Ok(()) => Outcome::Output(o),
                    Err(e) => Outcome::Failure(Failure {
                        kind: e.reason.to_string(),
                        message: e.message,
                    }),
                }
            }
            failed => failed,
        };
        validate::held_steps(&steps, self.core.config.max_payload_bytes)?;
        let steps_sent = steps.len();
        let done = match self
            .core
            .store
            .complete_with_steps(&fence, steps, outcome, self.core.now())
            .await
        {
            Ok(done) => done,
            Err(e) => return Err(self.refused_ending(session, &fence, e).await),
        };
        session.let_go(&fence);
        tracing::debug!(workflow_id = %fence.workflow_id, adopted = done.adopted, "complete");
        if done.adopted {
            // A resend of a completion already made: counted the first time.
            self.waits
                .announce_finished(&fence.workflow_id, Some(Arc::new(done.workflow.clone())));
        } else {
            self.core.counters.steps(steps_sent);
            self.waits.finished_here(done.workflow.clone());
        }
        Ok(done)
    }
}

/// A worker key reaching for a workflow its patterns do not cover.
pub(crate) fn out_of_reach(workflow_name: &str) -> EngineError {
    super::error::permission_denied(format!(
        "this worker's key does not reach workflows named {workflow_name:?}"
    ))
}
