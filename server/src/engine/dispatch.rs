//! The dispatcher: one task per replica that claims ENQUEUED workflows for the workers attached
//! here and pushes them down their streams, never more than each worker's credits.
//!
//! It wakes when told (a start or resume through this replica, new credits, a recovery, another
//! replica's announcement) and otherwise every poll interval, to pick up work it was not told
//! about. A worker is claimed for only when work may have been enqueued since its last claim
//! came back short (see `WorkerSession::take_claim_wanted`): a finished workflow's returned
//! credit costs no database round trip.

use std::sync::Arc;

use waymark_store::Claim;

use super::remote_steps::RetryTimes;
use super::{Engine, ToWorker};

/// What tells the dispatcher there is work. Dispatch owns it; the rest of the engine pokes it.
#[derive(Default)]
pub struct Signals {
    /// Wakes the dispatcher: new credits, or (through [`Engine::work_enqueued`]) new work.
    pub(crate) wanted: tokio::sync::Notify,
    /// The dispatcher's last claim came back full, so ENQUEUED work is waiting here. Starts are
    /// then queued behind it instead of being dispatched directly.
    pub(crate) backlog: std::sync::atomic::AtomicBool,
    /// When failed remote steps are due again, so the dispatcher wakes for them.
    pub(crate) retry_times: RetryTimes,
}

/// Most workflows claimed in one database round trip.
const MAX_BATCH: u32 = 256;

pub async fn run(engine: Arc<Engine>) {
    engine.queues.refresh().await;
    let mut polls = 0u64;
    loop {
        if engine.is_shutting_down() {
            return;
        }
        let more = dispatch_once(&engine).await;
        if more {
            continue;
        }
        // Failed remote steps come due at their retry time.
        let mut wait = engine.core.poll_interval();
        if let Some(at) = engine.dispatch.retry_times.next_after(engine.core.now()) {
            wait = wait.min(std::time::Duration::from_millis((at - engine.core.now()).max(0) as u64));
        }
        tokio::select! {
            _ = engine.dispatch.wanted.notified() => {}
            _ = tokio::time::sleep(wait) => {
                // The safety net: look for work nobody told this replica about.
                engine.sessions.want_claims_everywhere();
                polls += 1;
                if polls.is_multiple_of(super::queues::QUEUE_REFRESH_TICKS) {
                    engine.queues.refresh().await;
                }
            }
        }
    }
}

/// One pass over the attached workers. Returns true when a worker's claim came back full, so
/// there may be more to take at once.
pub async fn dispatch_once(engine: &Engine) -> bool {
    let now = engine.core.now();
    let lease = Engine::ms(engine.core.config.worker_lease);
    let mut more = false;
    for session in engine.sessions.all() {
        // A worker that has gone quiet past its lease (stopped, hung) gets nothing new.
        if now - session.last_seen() > lease {
            continue;
        }
        engine.dispatch_steps(&session, now).await;
        // A claim whose answer was lost may have given it workflows it never got.
        if !engine.workers.settle_doubt(&session).await {
            continue;
        }
        if session.credits() == 0 {
            continue;
        }
        let r = &session.registration;
        let limited = engine.queues.limited(&r.queues);
        // Credits alone are no reason to ask the database: only news of enqueued work is. A
        // limited queue may also have room again after a finish anywhere, so it is asked anyway.
        let wanted = session.take_claim_wanted();
        if !wanted && limited.is_empty() {
            continue;
        }
        let limit = session.reserve(MAX_BATCH);
        if limit == 0 {
            // A direct dispatch took the last credit meanwhile: the claim is still owed.
            if wanted {
                session.want_claims();
            }
            continue;
        }
        let mut claim = Claim {
            worker_id: r.worker_id.clone(),
            session_id: session.lease_id.clone(),
            app_version: r.app_version.clone(),
            workflow_names: r.workflow_names.clone(),
            queues: r.queues.iter().filter(|q| !limited.contains(q)).cloned().collect(),
            limit,
        };
        let mut claimed = Vec::new();
        if wanted && !claim.queues.is_empty() {
            match engine.core.store.claim_workflows(&claim, now).await {
                Ok(c) => claimed = c,
                Err(e) => {
                    session.want_claims();
                    session.doubt();
                    tracing::warn!(error = %e, "claim failed; retrying at the next pass");
                }
            }
        }
        // Queues with limits: one claim each, under the queue's lock, with what room is left.
        for queue in &limited {
            claim.limit = limit - claimed.len() as u32;
            if claim.limit == 0 {
                break;
            }
            match engine.core.store.claim_limited(queue, &claim, now).await {
                Ok(c) => claimed.extend(c),
                Err(e) => {
                    session.doubt();
                    tracing::warn!(error = %e, queue = %queue, "claim failed; retrying at the next pass")
                }
            }
        }
        session.grant(limit - claimed.len() as u32);
        let full = claimed.len() as u32 == limit;
        if full {
            session.want_claims();
        }
        more |= full;
        // A full claim means work is waiting: starts should queue behind it, not jump it.
        engine
            .dispatch
            .backlog
            .store(full, std::sync::atomic::Ordering::Relaxed);
        if claimed.is_empty() {
            continue;
        }
        for w in claimed {
            if engine.history_too_large(&session, &w).await {
                continue;
            }
            tracing::debug!(workflow_id = %w.workflow.workflow_id, epoch = w.workflow.epoch, worker_id = %r.worker_id, "dispatch");
            // If the stream is gone the workflow stays owned by this worker and is recovered
            // when its lease ends.
            engine.core.counters.dispatched(&w.workflow);
            session.send(ToWorker::Dispatch(Box::new(w))).await;
        }
    }
    more
}

/// The bytes a dispatch's history carries: the input and every recorded step (JSON text, the
/// measure payload limits use).
pub(crate) fn history_bytes(w: &waymark_store::ClaimedWorkflow) -> usize {
    let step = |s: &waymark_store::StepRecord| {
        s.name.len()
            + match &s.outcome {
                waymark_store::Outcome::Output(o) => o.len(),
                waymark_store::Outcome::Failure(f) => f.kind.len() + f.message.len(),
            }
    };
    w.workflow.input.len() + w.steps.iter().map(step).sum::<usize>()
}

impl Engine {
    /// A workflow whose recorded history has grown past what one dispatch may carry can never
    /// be dispatched again: sending it would exceed the stream's message limit, end the stream,
    /// and come back on reconnect, for ever. It fails here instead, with HISTORY_TOO_LARGE, and
    /// the worker keeps its credit.
    async fn history_too_large(&self, session: &super::WorkerSession, w: &waymark_store::ClaimedWorkflow) -> bool {
        let size = history_bytes(w);
        let most = self.core.config.max_history_bytes;
        if size <= most {
            return false;
        }
        session.grant(1);
        let fence = waymark_store::Fence {
            workflow_id: w.workflow.workflow_id.clone(),
            epoch: w.workflow.epoch,
        };
        let failure = waymark_store::Failure {
            kind: "HISTORY_TOO_LARGE".into(),
            message: format!(
                "the workflow's recorded history is {size} bytes; a dispatch carries at most {most}, so it cannot run again"
            ),
        };
        tracing::warn!(workflow_id = %fence.workflow_id, size, "history too large to dispatch; workflow failed");
        match self
            .core
            .store
            .complete_workflow(&fence, waymark_store::Outcome::Failure(failure), self.core.now())
            .await
        {
            Ok(done) => self.waits.finished_here(done.workflow),
            // Still PENDING for this worker, which never got it: recovered when the lease ends,
            // and failed here again then.
            Err(e) => {
                tracing::warn!(workflow_id = %fence.workflow_id, error = %e, "could not fail a workflow too large to dispatch")
            }
        }
        true
    }
}
