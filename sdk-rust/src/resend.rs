//! Sending a request again while the server answers UNAVAILABLE (it, or its database, is away
//! for a moment): the backoff between resends, and the loop clients use for calls that are safe
//! to repeat.

use std::{future::Future, time::Duration};

use crate::Error;

const FIRST: Duration = Duration::from_millis(50);
const MOST: Duration = Duration::from_secs(2);

/// Doubling pauses from 50 ms to at most 2 s, each with up to a quarter of jitter so workers
/// that lost the server together do not all come back in the same instant.
#[derive(Default)]
pub(crate) struct Backoff {
    attempts: u32,
}

impl Backoff {
    /// The next pause, or None when it would end past `bound` (given what has `elapsed`).
    pub(crate) fn next_within(&mut self, elapsed: Duration, bound: Duration) -> Option<Duration> {
        let base = FIRST.saturating_mul(1 << self.attempts.min(10)).min(MOST);
        self.attempts += 1;
        let jitter = base.mul_f64(rand::random::<f64>() * 0.25);
        let pause = base + jitter;
        (elapsed + pause <= bound).then_some(pause)
    }
}

/// Calls `call` again while it fails with UNAVAILABLE, with [`Backoff`], for up to `bound`;
/// any other answer (or the last UNAVAILABLE past the bound) is returned. Only for calls that
/// are safe to repeat: reads, and writes made idempotent by an id or a key.
pub(crate) async fn retrying<T, F, Fut>(bound: Duration, mut call: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let started = tokio::time::Instant::now();
    let mut backoff = Backoff::default();
    loop {
        match call().await {
            Err(s) if s.code() == tonic::Code::Unavailable => match backoff.next_within(started.elapsed(), bound) {
                Some(pause) => tokio::time::sleep(pause).await,
                None => return Err(s.into()),
            },
            r => return r.map_err(Into::into),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_a_cap_and_stops_at_the_bound() {
        let mut b = Backoff::default();
        let bound = Duration::from_secs(10);
        let pauses: Vec<Duration> = (0..8).map(|_| b.next_within(Duration::ZERO, bound).unwrap()).collect();
        assert!(pauses[0] >= FIRST && pauses[0] <= FIRST.mul_f64(1.25));
        assert!(pauses[1] >= FIRST * 2);
        assert!(pauses[7] >= MOST && pauses[7] <= MOST.mul_f64(1.25));
        assert_eq!(b.next_within(Duration::from_millis(9_000), bound), None);
    }

    #[tokio::test]
    async fn retrying_goes_on_through_unavailable_and_stops_at_anything_else() {
        let calls = std::sync::atomic::AtomicU32::new(0);
        let got: Result<u32, Error> = retrying(Duration::from_secs(10), || {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(tonic::Status::unavailable("database restarting"))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(got.unwrap(), 2);
        let calls = std::sync::atomic::AtomicU32::new(0);
        let got: Result<u32, Error> = retrying(Duration::from_secs(10), || {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            async { Err(tonic::Status::not_found("no")) }
        })
        .await;
        assert!(got.is_err());
        assert_eq!(
            calls.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "NOT_FOUND is not retried"
        );
        let got: Result<u32, Error> = retrying(Duration::from_millis(200), || async {
            Err(tonic::Status::unavailable("down"))
        })
        .await;
        assert!(got.is_err(), "past the bound the last UNAVAILABLE is returned");
    }
}
