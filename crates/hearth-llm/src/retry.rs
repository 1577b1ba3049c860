//! Retry policy as data: capped exponential backoff with jitter, bounded in
//! attempts and in total time, honouring the provider's `retry-after`.

use std::time::Duration;

/// How one model's failed calls are retried before failing over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts per model, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the second attempt.
    pub initial_backoff: Duration,
    /// Largest delay between attempts (also caps `retry-after`).
    pub max_backoff: Duration,
    /// Total time spent waiting between attempts of one model call.
    pub max_total_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_total_wait: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The wait before attempt `attempt + 1` (after `attempt` failures, from 1),
    /// or `None` when no attempt is left or the wait would exceed the budget.
    /// `jitter` in [0, 1) scales the exponential delay into [50%, 100%] of
    /// itself so that clients that failed together do not retry together; a
    /// server's `retry-after` is used as given (capped).
    pub fn next_delay(
        &self,
        attempt: u32,
        retry_after: Option<Duration>,
        waited: Duration,
        jitter: f64,
    ) -> Option<Duration> {
        if attempt >= self.max_attempts {
            return None;
        }
        let delay = match retry_after {
            Some(d) => d.min(self.max_backoff),
            None => {
                let exp = self
                    .initial_backoff
                    .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
                    .min(self.max_backoff);
                exp.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
            }
        };
        (waited + delay <= self.max_total_wait).then_some(delay)
    }
}

/// A cheap jitter source in [0, 1): no RNG crate needed for spreading retries.
pub fn jitter() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    f64::from(nanos % 1_000_000) / 1_000_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(300),
            max_total_wait: Duration::from_secs(1),
        }
    }

    #[test]
    fn backs_off_exponentially_with_a_cap() {
        let p = policy();
        let d = |a| p.next_delay(a, None, Duration::ZERO, 0.999_999).unwrap();
        assert_eq!(d(1).as_millis(), 99);
        assert_eq!(d(2).as_millis(), 199);
        assert_eq!(d(3).as_millis(), 299, "capped at max_backoff");
        assert_eq!(
            p.next_delay(4, None, Duration::ZERO, 0.5),
            None,
            "attempts exhausted"
        );
    }

    #[test]
    fn jitter_spreads_between_half_and_full() {
        let p = policy();
        assert_eq!(
            p.next_delay(1, None, Duration::ZERO, 0.0)
                .unwrap()
                .as_millis(),
            50
        );
        assert_eq!(
            p.next_delay(2, None, Duration::ZERO, 0.0)
                .unwrap()
                .as_millis(),
            100
        );
    }

    #[test]
    fn honours_retry_after_capped_and_the_time_budget() {
        let p = policy();
        let ra = Some(Duration::from_millis(250));
        assert_eq!(p.next_delay(1, ra, Duration::ZERO, 0.0), ra);
        let long = Some(Duration::from_secs(60));
        assert_eq!(
            p.next_delay(1, long, Duration::ZERO, 0.0),
            Some(Duration::from_millis(300))
        );
        assert_eq!(
            p.next_delay(1, ra, Duration::from_millis(900), 0.0),
            None,
            "over budget"
        );
        let j = jitter();
        assert!((0.0..1.0).contains(&j));
    }
}
