//! Capped exponential backoff with jitter, for reconnects and redelivery,
//! slowing to a retry every few minutes once the platform keeps refusing
//! the token (it will not be accepted until someone changes it).

use std::time::Duration;

/// Refusals of the token in a row (401/403) after which a loop retries only
/// at [`SLOW_RETRY`].
pub const REFUSALS_BEFORE_SLOW: u32 = 3;

/// How often a loop whose token keeps being refused tries again.
pub const SLOW_RETRY: Duration = Duration::from_secs(300);

/// Delays that double from `base` up to `cap`, with up to 25% jitter so
/// many conversations failing together do not retry together.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
    /// Refusals of the token in a row.
    refusals: u32,
    /// The pace once the token keeps being refused.
    slow: Duration,
}

impl Backoff {
    /// Starts at `base`, never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
            refusals: 0,
            slow: SLOW_RETRY,
        }
    }

    /// The same with another slow pace (tests, and loops that need one).
    pub fn with_slow_retry(mut self, slow: Duration) -> Self {
        self.slow = slow;
        self
    }

    /// The delay after the platform refused the token (401/403): the usual
    /// backoff for the first refusals, then [`SLOW_RETRY`] from the
    /// [`REFUSALS_BEFORE_SLOW`]th in a row on (no jitter needed: one loop).
    pub fn refused(&mut self) -> Duration {
        self.refusals = self.refusals.saturating_add(1);
        if self.refusals >= REFUSALS_BEFORE_SLOW {
            self.attempt = self.attempt.saturating_add(1);
            return self.slow;
        }
        self.next_failure_delay()
    }

    /// The slow pace when the token was refused often enough in a row to
    /// be on it; `None` otherwise.
    pub fn slow_pace(&self) -> Option<Duration> {
        (self.refusals >= REFUSALS_BEFORE_SLOW).then_some(self.slow)
    }

    /// The delay before retry number `attempt` (0-based), without jitter.
    pub fn delay_for(base: Duration, cap: Duration, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        base.saturating_mul(factor).min(cap)
    }

    /// The next delay (with jitter) after a failure other than a refused
    /// token, and counts the attempt; it ends a run of refusals.
    pub fn next_delay(&mut self) -> Duration {
        self.refusals = 0;
        self.next_failure_delay()
    }

    fn next_failure_delay(&mut self) -> Duration {
        let d = Self::delay_for(self.base, self.cap, self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        jitter(d)
    }

    /// After a success: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
        self.refusals = 0;
    }
}

/// `d` plus up to 25% of it, at random.
pub fn jitter(d: Duration) -> Duration {
    let mut b = [0u8; 2];
    if getrandom::fill(&mut b).is_err() {
        return d;
    }
    let frac = f64::from(u16::from_le_bytes(b)) / f64::from(u16::MAX) * 0.25;
    d + d.mul_f64(frac)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap() {
        let (b, c) = (Duration::from_millis(100), Duration::from_secs(2));
        let got: Vec<u128> = (0..7)
            .map(|a| Backoff::delay_for(b, c, a).as_millis())
            .collect();
        assert_eq!(got, vec![100, 200, 400, 800, 1600, 2000, 2000]);
        assert_eq!(Backoff::delay_for(b, c, u32::MAX), c);
        let mut bo = Backoff::new(b, c);
        let first = bo.next_delay();
        assert!(first >= b && first <= b.mul_f64(1.25));
        bo.next_delay();
        bo.reset();
        assert!(bo.next_delay() <= b.mul_f64(1.25));
    }

    #[test]
    fn a_token_refused_three_times_in_a_row_is_retried_slowly() {
        let (b, c) = (Duration::from_millis(100), Duration::from_secs(2));
        let mut bo = Backoff::new(b, c);
        assert!(bo.refused() <= b.mul_f64(1.25));
        assert!(bo.refused() <= (b * 2).mul_f64(1.25));
        assert_eq!(bo.slow_pace(), None);
        assert_eq!(bo.refused(), SLOW_RETRY);
        assert_eq!(bo.refused(), SLOW_RETRY);
        assert_eq!(bo.slow_pace(), Some(SLOW_RETRY));
        // Another kind of failure ends the run of refusals...
        assert!(bo.next_delay() < SLOW_RETRY);
        assert_eq!(bo.slow_pace(), None);
        // ...and so does a success.
        let mut bo = Backoff::new(b, c).with_slow_retry(Duration::from_secs(60));
        for _ in 0..REFUSALS_BEFORE_SLOW {
            bo.refused();
        }
        assert_eq!(bo.refused(), Duration::from_secs(60));
        bo.reset();
        assert!(bo.refused() <= b.mul_f64(1.25));
    }
}
