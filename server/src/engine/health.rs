//! Whether this replica can use its database, watched by one task that pings it (and, every
//! [`SCHEMA_CHECK_EVERY`] pings, checks that every migration this build needs is applied: a
//! database restored from an older backup, or shared with an older build's replicas that
//! migrated it no further, is not usable either).
//!
//! Two things hang on the answer. Health checks report NOT_SERVING while the database is
//! unreachable and SERVING again once it answers, with no restart. And recovery holds off: while
//! the database is down no worker can renew its lease, so every lease looks expired the moment
//! it comes back. Taking workflows from live workers then would run them twice and, repeated,
//! dead-letter them — an infrastructure fault turned into workflow failures. Recovery therefore
//! waits one lease after the database is back, long enough for every live worker to heartbeat.

use std::{
    sync::{
        atomic::{AtomicI64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
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
    /// Migrations this build needs that the database lacks, at the last check.
    pending_migrations: AtomicUsize,
}

/// Pings between two checks of the schema.
pub const SCHEMA_CHECK_EVERY: u32 = 10;

impl Default for StoreHealth {
    fn default() -> Self {
        StoreHealth {
            reachable: watch::channel(true).0,
            back_since: AtomicI64::new(Millis::MIN),
            pending_migrations: AtomicUsize::new(0),
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

    /// Migrations the database lacks, as last checked.
    pub fn pending_migrations(&self) -> usize {
        self.pending_migrations.load(Ordering::Relaxed)
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

impl Engine {
    /// Whether this replica can take work now; why not, for `/readyz`.
    pub fn readiness(&self) -> Result<(), String> {
        if self.core.is_shutting_down() {
            return Err("draining".into());
        }
        let behind = self.store_health.pending_migrations();
        if behind > 0 {
            return Err(format!("the database lacks {behind} migration(s) this build needs"));
        }
        if !self.store_health.is_reachable() {
            return Err("the database does not answer".into());
        }
        Ok(())
    }
}

/// How long one ping may take before the database counts as not answering: five periods, and
/// never less than five seconds, so a short period (as tests set) does not call a busy database
/// gone.
fn ping_timeout(period: Duration) -> Duration {
    (period * 5).max(Duration::from_secs(5))
}

/// Pings the database every `health_interval` until the replica shuts down.
pub async fn run(engine: Arc<Engine>) {
    let mut shutdown = engine.shutdown_signal();
    let mut pings = 0u32;
    loop {
        let mut ok = match tokio::time::timeout(
            ping_timeout(engine.core.config.health_interval),
            engine.core.store.ping(),
        )
        .await
        {
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
        if ok && pings.is_multiple_of(SCHEMA_CHECK_EVERY) {
            if let Ok(n) = engine.core.store.pending_migrations().await {
                let was = engine.store_health.pending_migrations.swap(n, Ordering::Relaxed);
                if n > 0 && was == 0 {
                    tracing::warn!(
                        pending = n,
                        "the database lacks migrations this build needs; health NOT_SERVING"
                    );
                }
            }
        }
        pings = pings.wrapping_add(1);
        ok &= engine.store_health.pending_migrations() == 0;
        if ok && !engine.store_health.is_reachable() {
            tracing::info!("database reachable again; health SERVING, recovery resumes after one lease");
        }
        engine.store_health.observe(ok, engine.core.now());
        tokio::select! {
            _ = tokio::time::sleep(engine.core.config.health_interval) => {}
            _ = shutdown.wait_for(|v| *v) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_period_keeps_a_patient_ping() {
        assert_eq!(ping_timeout(Duration::from_millis(100)), Duration::from_secs(5));
        assert_eq!(ping_timeout(Duration::from_secs(1)), Duration::from_secs(5));
        assert_eq!(ping_timeout(Duration::from_secs(3)), Duration::from_secs(15));
    }

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
