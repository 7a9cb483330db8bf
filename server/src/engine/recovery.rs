//! Recovery: takes back the workflows of workers whose lease ended (stream gone past the grace
//! period, or heartbeats stopped) and puts them back in their queue, counting each recovery.
//! Runs on every replica; the store makes concurrent passes safe.

use std::sync::Arc;

use super::Engine;

pub async fn run(engine: Arc<Engine>) {
    let mut ticks = 0u64;
    let mut shutdown = engine.shutdown_signal();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(engine.core.config.recovery_interval) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
        if engine.is_shutting_down() {
            return;
        }
        recover_once(&engine).await;
        expire_once(&engine).await;
        wake_parked_once(&engine.core).await;
        engine.expire_steps().await;
        ticks += 1;
        if ticks.is_multiple_of(60) {
            let horizon = engine.core.now() - 24 * 3600 * 1000;
            if let Err(e) = engine.core.store.prune_sessions(horizon).await {
                tracing::warn!(error = %e, "pruning workers failed");
            }
        }
    }
}

/// Puts parked workflows whose wake time came back in their queue.
pub async fn wake_parked_once(core: &super::Core) {
    match core.store.wake_due(core.now()).await {
        Ok(0) => {}
        Ok(n) => {
            tracing::debug!(count = n, "parked workflows due");
            core.work_enqueued();
        }
        Err(e) => tracing::warn!(error = %e, "waking parked workflows failed"),
    }
}

/// Cancels the workflows whose deadline passed, and tells their workers.
pub async fn expire_once(engine: &Engine) {
    match engine.core.store.cancel_expired(engine.core.now()).await {
        Ok(expired) => {
            for w in expired {
                tracing::info!(workflow_id = %w.workflow_id, "deadline passed; workflow cancelled");
                if let Some(worker) = &w.worker_id {
                    for s in engine.sessions.by_worker(worker) {
                        s.send(super::ToWorker::Cancel(w.workflow_id.clone())).await;
                    }
                }
                engine.waits.finished_here(w);
            }
        }
        Err(e) => tracing::warn!(error = %e, "deadline pass failed"),
    }
}

pub async fn recover_once(engine: &Engine) {
    // Right after a database outage every lease looks expired, live workers' too: wait until
    // they have had a lease's time to renew (see `health.rs`).
    let lease = Engine::ms(engine.core.config.worker_lease);
    if !engine.store_health.leases_trustworthy(engine.core.now(), lease) {
        return;
    }
    match engine
        .core
        .store
        .recover_expired(engine.core.config.max_recovery_attempts, engine.core.now())
        .await
    {
        Ok(r) => {
            engine.core.counters.recovered(r.requeued.len(), r.dead_lettered.len());
            if !r.requeued.is_empty() {
                tracing::info!(
                    count = r.requeued.len(),
                    "recovered workflows from workers whose lease ended"
                );
                engine.core.work_enqueued();
            }
            for id in &r.dead_lettered {
                tracing::warn!(workflow_id = %id, "workflow exceeded its recovery attempts; dead-lettered");
                engine.waits.announce_finished(id, None);
            }
        }
        Err(e) => tracing::warn!(error = %e, "recovery pass failed"),
    }
}
