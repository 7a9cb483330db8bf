//! What the unauthenticated may cost, per remote address. A key that is not in the cache costs a
//! database read; a made-up key of the right shape is never in it. So the reads of unknown keys
//! a remote address may cause are a token bucket ([`PeerLimits::lookups`]): a burst, then a
//! steady rate; past it, its calls are refused as UNAUTHENTICATED without a read, while a key
//! already verified (cached, or read as existing within the hour) goes through whatever its
//! neighbours send. Streams anyone may open
//! without a key (health `Watch`, reflection) are capped per address too ([`PeerLimits::streams`]).
//!
//! The per-address state lives in a bounded cache that forgets quiet addresses, so a flood from
//! many addresses costs memory only up to [`MAX_PEERS`].

use std::{
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{sync::Semaphore, time::Instant};

/// Most remote addresses remembered at once.
pub const MAX_PEERS: u64 = 10_000;
/// Reads of unknown keys a remote address may cause in a burst…
pub const LOOKUP_BURST: f64 = 50.0;
/// …and per second after it.
pub const LOOKUPS_PER_SECOND: f64 = 20.0;
/// Unauthenticated streams (health Watch, reflection) one remote address may hold open.
pub const STREAMS_PER_PEER: usize = 8;
/// How long an unauthenticated stream may stay open: a watcher reconnects after it.
pub const STREAM_DEADLINE: Duration = Duration::from_secs(300);

struct Bucket {
    tokens: f64,
    at: Instant,
}

pub struct PeerLimits {
    buckets: moka::sync::Cache<IpAddr, Arc<Mutex<Bucket>>>,
    streams: moka::sync::Cache<IpAddr, Arc<Semaphore>>,
    burst: f64,
    rate: f64,
}

impl Default for PeerLimits {
    fn default() -> Self {
        Self::new(LOOKUP_BURST, LOOKUPS_PER_SECOND)
    }
}

impl PeerLimits {
    pub fn new(burst: f64, rate: f64) -> Self {
        let idle = Duration::from_secs(600);
        PeerLimits {
            buckets: moka::sync::Cache::builder()
                .max_capacity(MAX_PEERS)
                .time_to_idle(idle)
                .build(),
            streams: moka::sync::Cache::builder()
                .max_capacity(MAX_PEERS)
                .time_to_idle(idle)
                .build(),
            burst,
            rate,
        }
    }

    /// Takes one database read of an unknown key for `peer`; false when its bucket is empty.
    /// A call whose address is unknown (not over TCP: tests) is not limited.
    pub fn lookup(&self, peer: Option<IpAddr>) -> bool {
        let Some(peer) = peer else { return true };
        let burst = self.burst;
        let bucket = self.buckets.get_with(peer, || {
            Arc::new(Mutex::new(Bucket {
                tokens: burst,
                at: Instant::now(),
            }))
        });
        let mut b = bucket.lock().unwrap();
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * self.rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// A place for one more unauthenticated stream from `peer`, held until it is dropped;
    /// `None` when the address holds [`STREAMS_PER_PEER`] already.
    pub fn stream(&self, peer: Option<IpAddr>) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
        let Some(peer) = peer else { return Some(None) };
        let places = self
            .streams
            .get_with(peer, || Arc::new(Semaphore::new(STREAMS_PER_PEER)));
        places.try_acquire_owned().ok().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    #[tokio::test(start_paused = true)]
    async fn lookups_come_in_a_burst_then_at_the_rate() {
        let limits = PeerLimits::new(5.0, 2.0);
        assert!((0..5).all(|_| limits.lookup(ip(1))), "the burst");
        assert!(!limits.lookup(ip(1)), "then nothing");
        assert!(limits.lookup(ip(2)), "another address has its own bucket");
        assert!(limits.lookup(None), "no address: not limited");
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(limits.lookup(ip(1)), "one more after half a second at 2/s");
        assert!(!limits.lookup(ip(1)));
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(
            (0..10).filter(|_| limits.lookup(ip(1))).count(),
            5,
            "refilled to the burst, no more"
        );
    }

    #[tokio::test]
    async fn streams_are_capped_per_address_until_one_ends() {
        let limits = PeerLimits::default();
        let held: Vec<_> = (0..STREAMS_PER_PEER).map(|_| limits.stream(ip(1)).unwrap()).collect();
        assert!(limits.stream(ip(1)).is_none());
        assert!(limits.stream(ip(2)).is_some());
        drop(held);
        assert!(limits.stream(ip(1)).is_some());
    }
}
