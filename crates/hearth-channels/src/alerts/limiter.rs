//! One rule's rate limit: at most one alert per `interval`. What arrives in
//! between is held, and the latest held event goes out when the interval
//! ends, carrying the count of the others, so every event is either sent or
//! counted, never silently dropped.

use std::time::Duration;

use tokio::time::Instant;

/// A rule's rate-limit state.
#[derive(Debug)]
pub(crate) struct Limiter<T> {
    interval: Duration,
    last_sent: Option<Instant>,
    /// Events held back since the last alert, the latest included.
    held: u64,
    latest: Option<T>,
}

impl<T> Limiter<T> {
    pub(crate) fn new(interval: Duration) -> Self {
        Self {
            interval,
            last_sent: None,
            held: 0,
            latest: None,
        }
    }

    /// An event for this rule: `Some((event, suppressed))` to send now,
    /// `None` when it is held until the interval ends.
    pub(crate) fn offer(&mut self, event: T, now: Instant) -> Option<(T, u64)> {
        let open = self
            .last_sent
            .is_none_or(|at| now.saturating_duration_since(at) >= self.interval);
        if open {
            // Held events are older than this one; this one carries their count.
            let suppressed = std::mem::take(&mut self.held);
            self.latest = None;
            self.last_sent = Some(now);
            Some((event, suppressed))
        } else {
            self.held += 1;
            self.latest = Some(event);
            None
        }
    }

    /// When the held event is due, if one is held.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.latest.as_ref()?;
        self.last_sent.map(|at| at + self.interval)
    }

    /// The held event, with the count of the others held, once its time has
    /// come.
    pub(crate) fn flush(&mut self, now: Instant) -> Option<(T, u64)> {
        if self.due().is_none_or(|due| now < due) {
            return None;
        }
        let latest = self.latest.take()?;
        let suppressed = std::mem::take(&mut self.held).saturating_sub(1);
        self.last_sent = Some(now);
        Some((latest, suppressed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(600);

    #[test]
    fn the_first_event_goes_at_once_and_the_next_wait_for_the_interval() {
        let t0 = Instant::now();
        let mut l = Limiter::new(MIN);
        assert_eq!(l.offer(1, t0), Some((1, 0)));
        assert_eq!(l.due(), None);
        assert_eq!(l.offer(2, t0 + Duration::from_secs(1)), None);
        assert_eq!(l.offer(3, t0 + Duration::from_secs(2)), None);
        assert_eq!(l.offer(4, t0 + Duration::from_secs(3)), None);
        assert_eq!(l.due(), Some(t0 + MIN));
        assert_eq!(l.flush(t0 + MIN - Duration::from_secs(1)), None);
        // The latest goes out, counting the two others held back.
        assert_eq!(l.flush(t0 + MIN), Some((4, 2)));
        assert_eq!(l.flush(t0 + MIN * 3), None);
        // The flush started a new interval.
        assert_eq!(l.offer(5, t0 + MIN + Duration::from_secs(1)), None);
        assert_eq!(l.flush(t0 + MIN * 2), Some((5, 0)));
    }

    #[test]
    fn an_event_after_a_quiet_interval_carries_no_count() {
        let t0 = Instant::now();
        let mut l = Limiter::new(MIN);
        assert_eq!(l.offer("a", t0), Some(("a", 0)));
        assert_eq!(l.offer("b", t0 + MIN), Some(("b", 0)));
    }

    #[test]
    fn every_event_is_sent_or_counted() {
        let t0 = Instant::now();
        let mut l = Limiter::new(Duration::from_secs(10));
        let (mut sent, mut counted) = (0u64, 0u64);
        for i in 0..1000u64 {
            let now = t0 + Duration::from_millis(i * 37);
            if let Some((_, s)) = l.flush(now) {
                sent += 1;
                counted += s;
            }
            if let Some((_, s)) = l.offer(i, now) {
                sent += 1;
                counted += s;
            }
        }
        if let Some((_, s)) = l.flush(t0 + Duration::from_secs(3600)) {
            sent += 1;
            counted += s;
        }
        assert_eq!(sent + counted, 1000);
        // 37 s of events at one alert per 10 s.
        assert!(sent <= 5, "{sent} alerts");
    }
}
