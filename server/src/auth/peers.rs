//! What the unauthenticated may cost, per remote address. A key that is not in the cache costs a
//! database read; a made-up key of the right shape is never in it. So the reads of unknown keys
//! a remote address may cause are a token bucket ([`PeerLimits::lookups`]): a burst, then a
//! steady rate; past it, its calls are refused as UNAUTHENTICATED without a read, while a key
//! already verified (cached, or read as existing within the hour) goes through whatever its
//! neighbours send. Streams anyone may open
//! without a key (health `Watch`, reflection) are capped per address too ([`PeerLimits::streams`]).
//!
//! A refusal itself is cheap, but a client that repeats them as fast as they come back still
//! takes a share of the CPU from everyone else. So refusals are counted per address too
//! ([`PeerLimits::refused`]): past a burst, each further refusal for that address is answered only
//! after [`TARPIT`] — a client that sends one call at a time then sends a few a second, whatever
//! it means to do.
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
/// Refusals an address gets at once in a burst…
pub const REFUSAL_BURST: f64 = 50.0;
/// …and per second after it; past that, each refusal waits [`TARPIT`].
pub const REFUSALS_PER_SECOND: f64 = 10.0;
/// How long a refusal past an address's allowance waits before it is answered.
pub const TARPIT: Duration = Duration::from_secs(1);
/// Unauthenticated streams (health Watch, reflection) one remote address may hold open.
pub const STREAMS_PER_PEER: usize = 8;
/// How long an unauthenticated stream may stay open: a watcher reconnects after it.
pub const STREAM_DEADLINE: Duration = Duration::from_secs(300);

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per address, of one burst and rate.
struct Buckets {
    buckets: moka::sync::Cache<IpAddr, Arc<Mutex<Bucket>>>,
    burst: f64,
    rate: f64,
}

impl Buckets {
    fn new(burst: f64, rate: f64) -> Self {
        Buckets {
            buckets: moka::sync::Cache::builder()
                .max_capacity(MAX_PEERS)
                .time_to_idle(IDLE)
                .build(),
            burst,
            rate,
        }
    }

    /// Takes a token from `peer`'s bucket; false when it is empty. A call whose address is
    /// unknown (not over TCP: tests) is not limited.
    fn take(&self, peer: Option<IpAddr>) -> bool {
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
}

/// An address is forgotten after this long without a call.
const IDLE: Duration = Duration::from_secs(600);

pub struct PeerLimits {
    lookups: Buckets,
    refusals: Buckets,
    streams: moka::sync::Cache<IpAddr, Arc<Semaphore>>,
}

impl Default for PeerLimits {
    fn default() -> Self {
        Self::new(LOOKUP_BURST, LOOKUPS_PER_SECOND)
    }
}

impl PeerLimits {
    /// Limits with this burst and rate of reads of unknown keys.
    pub fn new(burst: f64, rate: f64) -> Self {
        PeerLimits {
            lookups: Buckets::new(burst, rate),
            refusals: Buckets::new(REFUSAL_BURST, REFUSALS_PER_SECOND),
            streams: moka::sync::Cache::builder()
                .max_capacity(MAX_PEERS)
                .time_to_idle(IDLE)
                .build(),
        }
    }

    /// Takes one database read of an unknown key for `peer`; false when its allowance is spent.
    pub fn lookup(&self, peer: Option<IpAddr>) -> bool {
        self.lookups.take(peer)
    }

    /// Counts one refusal for `peer`; false when past its allowance (the refusal should wait
    /// [`TARPIT`]).
    pub fn refused(&self, peer: Option<IpAddr>) -> bool {
        self.refusals.take(peer)
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

    #[tokio::test(start_paused = true)]
    async fn refusals_have_their_own_allowance() {
        let limits = PeerLimits::new(1.0, 0.0);
        assert!(limits.lookup(ip(1)) && !limits.lookup(ip(1)));
        assert_eq!(
            (0..100).filter(|_| limits.refused(ip(1))).count(),
            REFUSAL_BURST as usize,
            "reads spent, refusals still have theirs"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            (0..100).filter(|_| limits.refused(ip(1))).count(),
            REFUSALS_PER_SECOND as usize
        );
    }

    #[tokio::test]
    async fn addresses_remembered_are_bounded() {
        let limits = PeerLimits::default();
        for i in 0..(MAX_PEERS + 2_000) {
            let peer = Some(IpAddr::from(std::net::Ipv6Addr::from(i as u128)));
            limits.lookup(peer);
            limits.refused(peer);
            drop(limits.stream(peer));
        }
        for cache in [&limits.lookups.buckets, &limits.refusals.buckets] {
            cache.run_pending_tasks();
            assert!(cache.entry_count() <= MAX_PEERS, "{}", cache.entry_count());
        }
        limits.streams.run_pending_tasks();
        assert!(limits.streams.entry_count() <= MAX_PEERS);
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
