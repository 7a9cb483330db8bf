//! The workflows service: the client and operator API over workflows — start, read, list,
//! await, delay, cancel, resume, act on many at once (`bulk.rs`), start and send in one call
//! (`start_and_send.rs`), update a running one (`updates.rs`), and what one waits for
//! (`waiting.rs`). It owns what this replica knows of workflow names (the catalog).

use std::{sync::Arc, time::Duration};

use waymark_store::{
    Assignment, ClaimedWorkflow, Millis, NewWorkflow, StepRecord, TraceContext, WorkflowRecord, WorkflowStatus,
};

use super::{
    catalog::Catalog, dispatch, lifecycle::Lifecycle, messaging::Messaging, queues::Queues, sessions::Sessions,
    validate, waits::Waits, Core, Engine, EngineError, EngineResult, ErrorCode, ToWorker,
};

pub const DEFAULT_QUEUE: &str = "default";

pub use super::workflow_list::{ListRequest, Page};

#[derive(Debug, Clone, Default)]
pub struct StartRequest {
    pub workflow_name: String,
    /// Generated when empty.
    pub workflow_id: String,
    /// JSON text.
    pub input: String,
    pub queue_name: String,
    pub app_version: String,
    /// Cancel it if not finished this many milliseconds after the start.
    pub timeout_ms: Option<i64>,
    /// Lower is dispatched first within the queue.
    pub priority: i32,
    /// The partition of its queue ("" for none).
    pub partition_key: String,
    /// Unique among the queue's live workflows ("" for none).
    pub dedup_id: String,
    /// When the dedup id is taken, return the workflow holding it instead of ALREADY_EXISTS.
    pub return_existing: bool,
    /// Not dispatched before this many milliseconds from now.
    pub delay_ms: Option<i64>,
    /// Collapse onto the not-yet-started workflow of this name with this key ("" for none);
    /// needs a delay.
    pub debounce_key: String,
    /// How long a debounced workflow may be put off in all, from its first start. Default: ten
    /// times the delay.
    pub debounce_max_delay_ms: Option<i64>,
    /// The span the start belongs to, kept with the workflow for its dispatches.
    pub trace: Option<TraceContext>,
    /// Enqueue it even when no worker has registered its name yet (it waits ENQUEUED until
    /// one does); otherwise such a start is refused with WORKFLOW_NAME_UNKNOWN.
    pub allow_unregistered: bool,
    /// Labels to find it by (bounded: see [`super::tags`]).
    pub tags: waymark_store::Tags,
}

/// Longest workflow timeout: ten years.
const MAX_TIMEOUT_MS: i64 = 10 * 366 * 24 * 3600 * 1000;
/// Longest start delay (and debounce cap): a year.
const MAX_DELAY_MS: i64 = 366 * 24 * 3600 * 1000;

/// When a start may run, worked out from its delay and debounce options.
struct Flow {
    run_at: Option<Millis>,
    debounce: Option<waymark_store::Debounce>,
}

fn validate_flow(req: &StartRequest, now: Millis) -> EngineResult<Flow> {
    validate::optional_name("partition_key", &req.partition_key)?;
    validate::optional_name("dedup_id", &req.dedup_id)?;
    validate::optional_name("debounce key", &req.debounce_key)?;
    let delay = req.delay_ms.unwrap_or(0);
    if !(0..=MAX_DELAY_MS).contains(&delay) {
        return Err(EngineError::invalid("delay must be between 0 and a year"));
    }
    let run_at = (delay > 0).then_some(now + delay);
    if req.debounce_key.is_empty() {
        if req.debounce_max_delay_ms.is_some() {
            return Err(EngineError::invalid("debounce max_delay needs a debounce key"));
        }
        return Ok(Flow { run_at, debounce: None });
    }
    if delay == 0 {
        return Err(EngineError::invalid(
            "a debounced start needs a delay: the time to wait for more starts with its key",
        ));
    }
    if !req.dedup_id.is_empty() {
        return Err(EngineError::invalid(
            "dedup_id and debounce cannot be combined (a debounce key already collapses repeated starts)",
        ));
    }
    let max = req
        .debounce_max_delay_ms
        .unwrap_or(delay.saturating_mul(10).min(MAX_DELAY_MS));
    if !(delay..=MAX_DELAY_MS).contains(&max) {
        return Err(EngineError::invalid(
            "debounce max_delay must be at least the delay and at most a year",
        ));
    }
    Ok(Flow {
        run_at,
        debounce: Some(waymark_store::Debounce {
            key: req.debounce_key.clone(),
            until: now + max,
        }),
    })
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

pub struct Workflows {
    pub(super) core: Arc<Core>,
    /// Every start's queue must exist.
    pub(super) queues: Arc<Queues>,
    /// Start-and-send delivers its message, an update sends and waits for its answer.
    pub(super) messaging: Arc<Messaging>,
    /// A bulk delete deletes through it.
    pub(super) lifecycle: Arc<Lifecycle>,
    /// AwaitWorkflow waits; what a workflow waits on is read from here.
    pub(super) waits: Arc<Waits>,
    /// A start may go straight to an attached worker with room, and a cancel is pushed to the
    /// stream running the workflow.
    pub(super) sessions: Arc<Sessions>,
    /// Whether the dispatcher has a backlog (starts then queue behind it).
    pub(super) dispatch: Arc<dispatch::Signals>,
    /// Workflow names known here (see `catalog.rs`).
    pub(super) catalog: Catalog,
}

impl Workflows {
    pub async fn start_workflow(&self, req: StartRequest) -> EngineResult<waymark_store::Started> {
        Ok(self.start_workflow_reporting(req).await?.0)
    }

    /// Starts a workflow; also says whether any worker has registered its name (false only
    /// for a start that allowed an unregistered name: it waits until a worker registers it).
    pub async fn start_workflow_reporting(&self, req: StartRequest) -> EngineResult<(waymark_store::Started, bool)> {
        let (new, name_registered, direct) = self.prepare_start(req, true).await?;
        let started = match self.core.store.start_workflow(new, self.core.now()).await {
            Ok(started) => started,
            Err(e) => {
                if let Some(p) = &direct {
                    // The row may have been written PENDING for the stream all the same: the
                    // dispatcher settles that before it claims for the stream again.
                    p.session().doubt();
                    p.session().grant(1);
                }
                return Err(e.into());
            }
        };
        tracing::debug!(workflow_id = %started.workflow.workflow_id, created = started.created, direct = direct.is_some(), "start");
        self.core.counters.start(&started, name_registered);
        // The store refuses a direct dispatch on a queue that has limits by now (set through
        // another replica): the workflow is then ENQUEUED for its queue's claim.
        let dispatched = started.workflow.status == WorkflowStatus::Pending && started.workflow.epoch == 1;
        match (direct.as_ref().map(|p| p.session()), started.created && dispatched) {
            (Some(session), true) => {
                let claimed = ClaimedWorkflow {
                    workflow: started.workflow.clone(),
                    steps: Vec::new(),
                };
                // If the stream is gone, the workflow is recovered when its lease ends.
                self.core.counters.dispatched(&claimed.workflow);
                session.send(ToWorker::Dispatch(Box::new(claimed))).await;
            }
            (Some(session), false) => {
                session.grant(1);
                if started.created {
                    self.core.work_enqueued();
                }
            }
            (None, _) if started.created && started.workflow.status == WorkflowStatus::Enqueued => {
                self.core.workflow_enqueued(&started.workflow)
            }
            (None, _) => {}
        }
        Ok((started, name_registered))
    }

    /// A start checked and made ready for the store: the row to insert, whether a worker has
    /// registered its name, and the worker it goes straight to (only when `may_dispatch`, with a
    /// credit of that worker's reserved).
    pub(crate) async fn prepare_start(
        &self,
        req: StartRequest,
        may_dispatch: bool,
    ) -> EngineResult<(NewWorkflow, bool, Option<super::sessions::Placing>)> {
        if self.core.is_shutting_down() {
            return Err(EngineError::shutting_down());
        }
        validate::name("workflow_name", &req.workflow_name)?;
        validate::optional_name("workflow_id", &req.workflow_id)?;
        validate::optional_name("queue_name", &req.queue_name)?;
        validate::optional_name("app_version", &req.app_version)?;
        validate::payload("input", &req.input, self.core.config.max_payload_bytes)?;
        super::tags::validate("tags", &req.tags)?;
        if let Some(t) = req.timeout_ms {
            if !(1..=MAX_TIMEOUT_MS).contains(&t) {
                return Err(EngineError::invalid("timeout must be between 1 ms and ten years"));
            }
        }
        let flow = validate_flow(&req, self.core.now())?;
        let name_registered = self.is_known_name(&req.workflow_name).await?;
        if !name_registered && !req.allow_unregistered {
            return Err(EngineError::new(
                ErrorCode::NotFound,
                "WORKFLOW_NAME_UNKNOWN",
                format!(
                    "no worker has registered a workflow named {:?}; start a worker that registers it first, or allow an unregistered name to enqueue it for one that will",
                    req.workflow_name
                ),
            ));
        }
        let queue_name = non_empty(&req.queue_name).unwrap_or_else(|| DEFAULT_QUEUE.to_string());
        let limits = self.queues.check(&queue_name).await?;
        // A limited queue admits through its claim only; a delayed start waits first.
        let direct = if !may_dispatch || limits.any() || flow.run_at.is_some() {
            None
        } else {
            self.direct_dispatch_target(&req.workflow_name, &queue_name, &req.app_version)
        };
        let new = NewWorkflow {
            workflow_id: non_empty(&req.workflow_id).unwrap_or_else(|| uuid::Uuid::now_v7().to_string()),
            workflow_name: req.workflow_name,
            queue_name,
            app_version: non_empty(&req.app_version),
            input: req.input,
            parent_workflow_id: None,
            deadline_at: req.timeout_ms.map(|t| self.core.now() + t),
            priority: req.priority,
            assign: direct.as_ref().map(|p| p.session()).map(|s| Assignment {
                worker_id: s.registration.worker_id.clone(),
                session_id: s.lease_id.clone(),
                app_version: s.registration.app_version.clone(),
            }),
            partition_key: req.partition_key,
            dedup_id: non_empty(&req.dedup_id),
            return_existing: req.return_existing,
            run_at: flow.run_at,
            debounce: flow.debounce,
            trace: req.trace,
            tags: req.tags,
        };
        Ok((new, name_registered, direct))
    }

    /// A worker attached here with room for this workflow right now, with one of its credits
    /// reserved: the start then dispatches in the same write (no separate claim), which is what
    /// keeps start-to-result latency low. Not while work is queued here, so starts do not jump
    /// the queue, nor to a stream in doubt (see `in_doubt.rs`).
    fn direct_dispatch_target(
        &self,
        workflow_name: &str,
        queue: &str,
        app_version: &str,
    ) -> Option<super::sessions::Placing> {
        if self.core.is_shutting_down() || self.dispatch.backlog.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let now = self.core.now();
        let lease = Engine::ms(self.core.config.worker_lease);
        self.sessions.all().into_iter().find_map(|s| {
            if s.credits() == 0 || now - s.last_seen() > lease || !s.serves(workflow_name, queue, app_version) {
                return None;
            }
            let placing = s.begin_placing()?;
            (s.reserve(1) == 1).then_some(placing)
        })
    }

    pub(crate) async fn is_known_name(&self, name: &str) -> EngineResult<bool> {
        if self.catalog.names.read().unwrap().contains(name) {
            return Ok(true);
        }
        let known = self.core.store.is_workflow_name_known(name).await?;
        if known {
            self.catalog.names.write().unwrap().insert(name.to_string());
        }
        Ok(known)
    }

    pub async fn get_workflow(&self, workflow_id: &str) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        self.core
            .store
            .get_workflow(workflow_id)
            .await?
            .ok_or_else(|| EngineError::not_found(workflow_id))
    }

    pub async fn list_steps(&self, workflow_id: &str) -> EngineResult<Vec<StepRecord>> {
        validate::name("workflow_id", workflow_id)?;
        Ok(self.core.store.list_steps(workflow_id).await?)
    }

    /// Waits until the workflow is terminal. Completions through this replica wake the wait at
    /// once; completions through other replicas are seen at the next poll.
    pub async fn await_workflow(&self, workflow_id: &str, timeout: Option<Duration>) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        let wait = async {
            let mut shutdown = self.core.shutdown_signal();
            let mut place = None;
            loop {
                let woken = self.waits.workflows.wait(workflow_id.to_string());
                let w = self.get_workflow(workflow_id).await?;
                if w.status.is_terminal() {
                    return Ok(w);
                }
                if place.is_none() {
                    place = Some(self.core.begin_wait()?);
                }
                // Completions through other replicas are not announced here: look again now
                // and then.
                let poll = tokio::time::sleep(self.core.poll_interval().max(Duration::from_millis(200)));
                tokio::select! {
                    _ = poll => {}
                    _ = shutdown.wait_for(|v| *v) => return Err(EngineError::shutting_down()),
                    got = woken => {
                        if let Some(Some(w)) = got {
                            if w.status.is_terminal() {
                                return Ok((*w).clone());
                            }
                        }
                    }
                }
            }
        };
        // A call without a deadline waits as long as a client's GetEvent may: no call is held
        // for ever.
        let t = timeout
            .unwrap_or(super::events::MAX_CLIENT_WAIT)
            .min(super::events::MAX_CLIENT_WAIT);
        tokio::time::timeout(t, wait).await.map_err(|_| {
            EngineError::new(
                ErrorCode::DeadlineExceeded,
                "DEADLINE_EXCEEDED",
                format!("workflow {workflow_id:?} did not finish before the call's deadline"),
            )
        })?
    }

    /// Moves a delayed start: it now runs `delay_ms` from now (0: at once).
    pub async fn delay_workflow(&self, workflow_id: &str, delay_ms: i64) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        if !(0..=MAX_DELAY_MS).contains(&delay_ms) {
            return Err(EngineError::invalid("delay must be between 0 and a year"));
        }
        let now = self.core.now();
        let w = self.core.store.set_start_time(workflow_id, now + delay_ms, now).await?;
        if delay_ms == 0 {
            crate::engine::recovery::wake_parked_once(&self.core).await;
        }
        Ok(w)
    }

    /// Cancels the workflow and tells the worker running it, if it is attached here. A worker
    /// attached elsewhere learns at its next write, which is refused.
    pub async fn cancel_workflow(&self, workflow_id: &str) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        let w = self.core.store.cancel_workflow(workflow_id, self.core.now()).await?;
        if w.status == WorkflowStatus::Cancelled {
            if let Some(worker) = &w.worker_id {
                for s in self.sessions.by_worker(worker) {
                    s.send(ToWorker::Cancel(workflow_id.to_string())).await;
                }
            }
            self.waits.finished_here(w.clone());
        }
        Ok(w)
    }

    pub async fn resume_workflow(&self, workflow_id: &str) -> EngineResult<WorkflowRecord> {
        validate::name("workflow_id", workflow_id)?;
        let w = self.core.store.resume_workflow(workflow_id, self.core.now()).await?;
        self.core.work_enqueued();
        Ok(w)
    }
}
