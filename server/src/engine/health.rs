//! Whether this replica can reach its database, watched by one task that pings it.
//!
//! Two things hang on the answer. Health checks report NOT_SERVING while the database is
//! unreachable and SERVING again once it answers, with no restart. And recovery holds off: while
//! the database is down no worker can renew its lease, so every lease looks expired the moment
//! it comes back. Taking workflows from live workers then would run them twice and, repeated,
//! dead-letter them — an infrastructure fault turned into workflow failures. Recovery therefore
//! waits one lease after the database is back, long enough for every live worker to heartbeat.

use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};

use tokio::sync::watch;
use waymark_store::Millis;

use super::Engine;

pub struct StoreHealth {
    /// True while the last ping answered.
    reachable: watch::Sender<bool>,
    /// When the database last came back after being unreachable (engine clock); `Millis::MIN`
    /// when it never went away.
    back_since: AtomicI64,
}

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            reachable: watch::channel(true).0,
            back_since: AtomicI64::new(Millis::MIN),
        }
    }
}

impl StoreHealth {
    /// Follows reachability: true (serving) or false (database unreachable).
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.reachable.subscribe()
    }

    pub fn is_reachable(&self) -> bool {
        *self.reachable.borrow()
    }

    /// Records a ping's outcome at `now`.
    pub(crate) fn observe(&self, ok: bool, now: Millis) {
        let was = self.is_reachable();
        if ok && !was {
            self.back_since.store(now, Ordering::SeqCst);
        }
        if ok != was {
            self.reachable.send_replace(ok);
        }
    }

    /// Whether leases can be trusted at `now`: the database is reachable and has been for at
    /// least `lease` (every live worker has had the time to renew its own).
    pub(crate) fn leases_trustworthy(&self, now: Millis, lease: Millis) -> bool {
        self.is_reachable() && now.saturating_sub(self.back_since.load(Ordering::SeqCst)) >= lease
    }
}

/// Pings the database every `health_interval` until the replica shuts down.
pub async fn run(engine: Arc<Engine>) {
    let mut shutdown = engine.shutdown_signal();
    loop {
        let ok = match tokio::time::timeout(engine.config.health_interval * 5, engine.store.ping()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                if engine.store_health.is_reachable() {
                    tracing::warn!(error = %e, "database unreachable; health NOT_SERVING, recovery paused");
                }
                false
            }
            Err(_) => {
                if engine.store_health.is_reachable() {
                    tracing::warn!("database did not answer a ping; health NOT_SERVING, recovery paused");
                }
                false
            }
        };
        if ok && !engine.store_health.is_reachable() {
            tracing::info!("database reachable again; health SERVING, recovery resumes after one lease");
        }
        engine.store_health.observe(ok, engine.now());
        tokio::select! {
            _ = tokio::time::sleep(engine.config.health_interval) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_trusted_one_lease_after_the_database_is_back() {
        let h = StoreHealth::default();
        assert!(h.leases_trustworthy(1_000, 15_000), "never down: trusted");
        h.observe(false, 2_000);
        assert!(!h.is_reachable());
        assert!(!h.leases_trustworthy(100_000, 15_000), "down: not trusted");
        h.observe(true, 40_000);
        assert!(h.is_reachable());
        assert!(!h.leases_trustworthy(54_999, 15_000));
        assert!(h.leases_trustworthy(55_000, 15_000));
        // Another ping that answers does not move the mark.
        h.observe(true, 50_000);
        assert!(h.leases_trustworthy(55_000, 15_000));
    }
}
