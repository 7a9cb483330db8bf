//! The backoff between resends of a request the server answered UNAVAILABLE.

use std::time::Duration;

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
}
