//! How a remote step is retried: the policy a call carries and the wait before each retry.

/// Milliseconds since the Unix epoch, or a duration in milliseconds.
pub type Millis = i64;

/// How a remote step is retried and how long one attempt may run.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPolicy {
    /// Attempts in all, including the first (at least 1).
    pub max_attempts: u32,
    pub initial_backoff_ms: Millis,
    /// Each retry waits this many times longer than the one before.
    pub backoff_coefficient: f64,
    pub max_backoff_ms: Millis,
    /// Start-to-close timeout of one attempt: past it the attempt counts as failed.
    pub timeout_ms: Millis,
}

impl StepPolicy {
    /// How long to wait before attempt `failed_attempt + 1`.
    pub fn backoff(&self, failed_attempt: u32) -> Millis {
        let exp = failed_attempt.saturating_sub(1).min(64) as i32;
        let raw = self.initial_backoff_ms as f64 * self.backoff_coefficient.max(1.0).powi(exp);
        (raw.min(self.max_backoff_ms as f64) as Millis).max(0)
    }

    /// When attempt `failed_attempt` failed at `now`: the time of the next attempt, or `None`
    /// when it was the last and the failure stands.
    pub fn retry_at(&self, failed_attempt: u32, now: Millis) -> Option<Millis> {
        (failed_attempt < self.max_attempts).then(|| now + self.backoff(failed_attempt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> StepPolicy {
        StepPolicy {
            max_attempts: 5,
            initial_backoff_ms: 100,
            backoff_coefficient: 2.0,
            max_backoff_ms: 1_000,
            timeout_ms: 1_000,
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let p = policy();
        assert_eq!(p.backoff(1), 100);
        assert_eq!(p.backoff(2), 200);
        assert_eq!(p.backoff(3), 400);
        assert_eq!(p.backoff(5), 1_000);
        assert_eq!(p.backoff(u32::MAX), 1_000);
    }

    #[test]
    fn the_last_attempt_is_not_retried() {
        let p = policy();
        assert_eq!(p.retry_at(1, 50), Some(150));
        assert_eq!(p.retry_at(4, 50), Some(850));
        assert_eq!(p.retry_at(5, 50), None);
    }
}
