//! Applies changes other replicas announce (PostgreSQL NOTIFY): wakes the waits, awaits and
//! stream readers of this replica, and the dispatcher. Without announcements the pollers in
//! [`super::messages`], [`super::dispatch`] and friends find the same changes, later.

use std::sync::Arc;

use waymark_store::changes::Change;

use super::Engine;

pub async fn run(engine: Arc<Engine>) {
    let mut changes = match engine.core.store.subscribe().await {
        Ok(Some(rx)) => rx,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for other replicas' changes; relying on polling");
            return;
        }
    };
    engine
        .core
        .changes_live
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut shutdown = engine.shutdown_signal();
    loop {
        let change = tokio::select! {
            c = changes.recv() => c,
            _ = shutdown.wait_for(|v| *v) => return,
        };
        match change {
            Some(change) => apply(&engine, change).await,
            None => {
                engine
                    .core
                    .changes_live
                    .store(false, std::sync::atomic::Ordering::Relaxed);
                return;
            }
        }
    }
}

async fn apply(engine: &Engine, change: Change) {
    match change {
        // Either may also have put a parked workflow back in its queue.
        Change::Message { workflow_id, topic } => {
            engine.messaging().wake_receiver(&workflow_id, &topic).await;
            engine.core.work_enqueued();
        }
        Change::Event { workflow_id, key } => {
            engine.messaging().wake_event(&workflow_id, &key).await;
            engine.core.work_enqueued();
        }
        Change::Stream { workflow_id, key } => engine.waits.streams.wake(&workflow_id, Some(&key)),
        Change::Finished { workflow_id } => engine.waits.announce_finished(&workflow_id, None),
        Change::StepDone { workflow_id, step_id } => engine.waits.step_recorded(&workflow_id, step_id).await,
        Change::Enqueued { queue: None } => engine.core.work_enqueued(),
        // A start: only the workers here that serve its queue (which may be none) claim.
        Change::Enqueued { queue: Some(queue) } => engine.core.work.enqueued_on(None, &queue, ""),
        Change::QueuesChanged => {
            engine.queues.refresh().await;
            engine.core.work_enqueued();
        }
    }
}
