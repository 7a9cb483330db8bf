//! Waits resolved through other replicas are not announced here (without NOTIFY): the poller
//! asks the database, one query per kind of wait, for every key something waits on here.

use std::sync::Arc;

use crate::engine::Engine;

/// Wakes what waits on this replica and was resolved through another: one query per kind of
/// wait, for all its keys.
pub async fn poll_waits(engine: &Engine) {
    let keys = engine.waits.recv.keys();
    if !keys.is_empty() {
        match engine.core.store.pending_messages(&keys).await {
            Ok(ready) => {
                for (workflow_id, topic) in ready {
                    engine.messaging().wake_receiver(&workflow_id, &topic).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not check waiting receives"),
        }
    }
    let awaited = engine.waits.children.keys();
    if !awaited.is_empty() {
        match engine.core.store.finished_among(&awaited).await {
            Ok(done) => {
                for id in done {
                    engine.waits.announce_finished(&id, None);
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not check awaited workflows"),
        }
    }
    let keys = engine.waits.steps.keys();
    if !keys.is_empty() {
        match engine.core.store.steps_recorded(&keys).await {
            Ok(done) => {
                for (workflow_id, step_id) in done {
                    engine.waits.step_recorded(&workflow_id, step_id).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not check awaited remote steps"),
        }
    }
    let keys = engine.waits.events.keys();
    if !keys.is_empty() {
        match engine.core.store.events_set(&keys).await {
            Ok(ready) => {
                for (workflow_id, key) in ready {
                    engine.messaging().wake_event(&workflow_id, &key).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not check waiting event reads"),
        }
    }
}

/// Runs [`poll_waits`] every `dispatch_poll_interval` until the replica drains.
pub async fn run_poller(engine: Arc<Engine>) {
    let mut shutdown = engine.shutdown_signal();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(engine.core.poll_interval()) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
        poll_waits(&engine).await;
    }
}
