//! Retry policy for steps.

use std::time::Duration;

/// How a step is retried when it returns an error. The default runs a step once.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_interval: Duration,
    /// Each wait is the previous one times this.
    pub backoff: f64,
    /// No wait is longer than this.
    pub max_interval: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 1,
            initial_interval: Duration::from_millis(100),
            backoff: 2.0,
            max_interval: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// `max_attempts` attempts with the default backoff (100 ms, doubling, at most 30 s).
    pub fn attempts(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts: max_attempts.max(1),
            ..Default::default()
        }
    }
    pub fn with_backoff(mut self, initial: Duration, factor: f64, max: Duration) -> Self {
        self.initial_interval = initial;
        self.backoff = factor.max(1.0);
        self.max_interval = max;
        self
    }
    /// Wait after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let factor = self.backoff.max(1.0).powi(attempt.saturating_sub(1).min(64) as i32);
        let secs = self.initial_interval.as_secs_f64() * factor;
        Duration::from_secs_f64(secs.min(self.max_interval.as_secs_f64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = RetryPolicy::attempts(5).with_backoff(Duration::from_millis(100), 2.0, Duration::from_millis(350));
        assert_eq!(p.delay(1), Duration::from_millis(100));
        assert_eq!(p.delay(2), Duration::from_millis(200));
        assert_eq!(p.delay(3), Duration::from_millis(350));
        assert_eq!(p.delay(60), Duration::from_millis(350));
        assert_eq!(RetryPolicy::attempts(0).max_attempts, 1);
    }
}
