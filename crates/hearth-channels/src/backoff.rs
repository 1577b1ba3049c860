//! Capped exponential backoff with jitter, for reconnects and redelivery.

use std::time::Duration;

/// Delays that double from `base` up to `cap`, with up to 25% jitter so
/// many conversations failing together do not retry together.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    /// Starts at `base`, never above `cap`.
    pub fn new(base: Duration, cap: Duration) -> Self {
        Self {
            base,
            cap,
            attempt: 0,
        }
    }

    /// The delay before retry number `attempt` (0-based), without jitter.
    pub fn delay_for(base: Duration, cap: Duration, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        base.saturating_mul(factor).min(cap)
    }

    /// The next delay (with jitter), and counts the attempt.
    pub fn next_delay(&mut self) -> Duration {
        let d = Self::delay_for(self.base, self.cap, self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        jitter(d)
    }

    /// After a success: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
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
}
