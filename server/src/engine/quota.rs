//! What a namespace may use of this replica, and what every namespace shares. The caps of the
//! server's flags (`--max-worker-streams`, `--max-waits`) are the replica's, held in one
//! [`Shared`] that every namespace's engine takes its places from, so a hundred namespaces hold
//! no more than one would. Under them, each namespace may have limits of its own
//! ([`NamespaceLimits`], set by an admin of every namespace with `waymark namespace update`):
//! starts a second, worker streams and waits at once — so one tenant's flood of starts is
//! refused at its own rate and the others' go on being answered.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc, Mutex,
};

use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use waymark_store::NamespaceLimits;

use super::{EngineError, ErrorCode};

/// The replica's caps, shared by the engines of all its namespaces.
#[derive(Debug)]
pub struct Shared {
    pub waits: Arc<Semaphore>,
    pub max_waits: usize,
    pub worker_streams: Arc<Semaphore>,
    pub max_worker_streams: usize,
}

impl Shared {
    pub fn new(max_waits: usize, max_worker_streams: usize) -> Arc<Shared> {
        Arc::new(Shared {
            waits: Arc::new(Semaphore::new(max_waits)),
            max_waits,
            worker_streams: Arc::new(Semaphore::new(max_worker_streams)),
            max_worker_streams,
        })
    }
}

/// One namespace's limits and what it holds against them on this replica.
#[derive(Default)]
pub struct Quota {
    limits: Mutex<NamespaceLimits>,
    starts: Mutex<Option<Bucket>>,
    /// Waits this namespace holds (each also holds a place of [`Shared::waits`]).
    pub(crate) waits: Arc<AtomicUsize>,
    /// Worker streams this namespace holds.
    pub(crate) worker_streams: Arc<AtomicUsize>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// A place held against a namespace's count and the replica's cap, given back when dropped.
pub struct Place {
    _shared: OwnedSemaphorePermit,
    count: Arc<AtomicUsize>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Quota {
    pub fn set(&self, limits: NamespaceLimits) {
        *self.limits.lock().unwrap() = limits;
    }

    pub fn limits(&self) -> NamespaceLimits {
        *self.limits.lock().unwrap()
    }

    /// Takes one start from the namespace's allowance: a second's worth in a burst, then the
    /// rate. Refused (RESOURCE_EXHAUSTED) past it; always let in without a rate.
    pub fn take_start(&self, namespace: &str) -> Result<(), EngineError> {
        let Some(rate) = self.limits().start_rate else {
            return Ok(());
        };
        let rate = f64::from(rate);
        let mut bucket = self.starts.lock().unwrap();
        let now = Instant::now();
        let b = bucket.get_or_insert(Bucket { tokens: rate, at: now });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * rate).min(rate.max(1.0));
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        Err(EngineError::new(
            ErrorCode::ResourceExhausted,
            "NAMESPACE_START_RATE",
            format!("namespace {namespace:?} takes at most {rate} starts a second on this replica; try again shortly"),
        ))
    }

    /// A place for one more wait: the namespace's limit first, then the replica's cap.
    pub fn wait_place(&self, shared: &Shared, namespace: &str) -> Result<Place, EngineError> {
        let limit = self.limits().max_waits;
        take(
            &self.waits,
            limit,
            &shared.waits,
            shared.max_waits,
            namespace,
            "waiting calls",
            "TOO_MANY_WAITS",
        )
    }

    /// A place for one more worker stream.
    pub fn stream_place(&self, shared: &Shared, namespace: &str) -> Result<Place, EngineError> {
        let limit = self.limits().max_worker_streams;
        take(
            &self.worker_streams,
            limit,
            &shared.worker_streams,
            shared.max_worker_streams,
            namespace,
            "worker streams",
            "TOO_MANY_WORKER_STREAMS",
        )
    }
}

fn take(
    count: &Arc<AtomicUsize>,
    limit: Option<u32>,
    shared: &Arc<Semaphore>,
    cap: usize,
    namespace: &str,
    what: &str,
    reason: &'static str,
) -> Result<Place, EngineError> {
    let held = count.fetch_add(1, Ordering::SeqCst) + 1;
    let refuse = |message: String| {
        count.fetch_sub(1, Ordering::SeqCst);
        Err(EngineError::new(ErrorCode::ResourceExhausted, reason, message))
    };
    if limit.is_some_and(|l| held > l as usize) {
        return refuse(format!(
            "namespace {namespace:?} holds its limit of {} {what} on this replica; try again later",
            limit.unwrap_or_default()
        ));
    }
    match shared.clone().try_acquire_owned() {
        Ok(permit) => Ok(Place {
            _shared: permit,
            count: count.clone(),
        }),
        Err(_) => refuse(format!(
            "this server holds its limit of {cap} {what}; try again later or another replica"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(start_rate: Option<u32>, streams: Option<u32>, waits: Option<u32>) -> NamespaceLimits {
        NamespaceLimits {
            start_rate,
            max_worker_streams: streams,
            max_waits: waits,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn starts_come_at_the_namespaces_rate() {
        let q = Quota::default();
        assert!((0..1000).all(|_| q.take_start("a").is_ok()), "no rate: no limit");
        q.set(limits(Some(10), None, None));
        assert_eq!(
            (0..100).filter(|_| q.take_start("a").is_ok()).count(),
            10,
            "a second's worth"
        );
        let e = q.take_start("a").unwrap_err();
        assert_eq!(e.reason, "NAMESPACE_START_RATE");
        tokio::time::advance(std::time::Duration::from_millis(500)).await;
        assert_eq!((0..100).filter(|_| q.take_start("a").is_ok()).count(), 5);
    }

    #[test]
    fn places_hold_the_namespace_limit_and_the_shared_cap() {
        let shared = Shared::new(3, 3);
        let (a, b) = (Quota::default(), Quota::default());
        a.set(limits(None, None, Some(2)));
        let a1 = a.wait_place(&shared, "a").unwrap();
        let _a2 = a.wait_place(&shared, "a").unwrap();
        assert_eq!(
            a.wait_place(&shared, "a").err().unwrap().reason,
            "TOO_MANY_WAITS",
            "its own limit"
        );
        let _b1 = b.wait_place(&shared, "b").unwrap();
        let e = b.wait_place(&shared, "b").err().unwrap();
        assert!(e.message.contains("this server"), "the shared cap: {e:?}");
        drop(a1);
        assert_eq!(a.waits.load(Ordering::SeqCst), 1);
        let _b2 = b.wait_place(&shared, "b").expect("a place came free");
        assert_eq!(shared.waits.available_permits(), 0);
        // Streams are counted apart from waits.
        let _s = a.stream_place(&shared, "a").unwrap();
        assert_eq!(
            (
                a.worker_streams.load(Ordering::SeqCst),
                shared.worker_streams.available_permits()
            ),
            (1, 2)
        );
    }
}
