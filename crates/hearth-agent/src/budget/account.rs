//! One pool's use by one subject (or by everyone, for a global pool).

use std::collections::VecDeque;

use hearth_core::Timestamp;
use hearth_store::budget;

use super::window::Window;

/// Use within the current window, and what calls in flight hold.
#[derive(Debug, Default)]
pub(super) struct Account {
    /// Start of the fixed window `used` belongs to.
    start: Timestamp,
    /// Settled use in the window.
    pub(super) used: f64,
    /// Estimates held by calls in flight.
    pub(super) reserved: f64,
    /// Rolling windows only: each settled use with its instant, oldest first.
    recent: VecDeque<(Timestamp, f64)>,
    /// Highest threshold already announced (0, 80 or 100) and the window it
    /// was announced in, so each is announced once per window.
    announced: (Timestamp, u8),
}

impl Account {
    /// Drops what the window no longer holds at `now`.
    pub(super) fn roll(&mut self, window: Window, now: Timestamp) {
        if window == Window::Rolling24h {
            let cutoff = now - Window::ROLLING_MS;
            let mut dropped = false;
            while self.recent.front().is_some_and(|(at, _)| *at <= cutoff) {
                self.recent.pop_front();
                dropped = true;
            }
            if dropped {
                // Re-summed rather than subtracted, so float error cannot build up.
                self.used = self.recent.iter().map(|(_, a)| a).sum();
            }
        } else {
            let start = window.start(now);
            if start != self.start {
                self.start = start;
                self.used = 0.0;
            }
        }
    }

    /// Counts `amount` used at `at`, if the window (rolled to `now`) holds `at`.
    pub(super) fn charge(&mut self, window: Window, at: Timestamp, amount: f64, now: Timestamp) {
        self.roll(window, now);
        if window == Window::Rolling24h {
            if at <= now - Window::ROLLING_MS {
                return;
            }
            let pos = self.recent.partition_point(|(t, _)| *t <= at);
            self.recent.insert(pos, (at, amount));
        } else if at < self.start {
            return;
        }
        self.used += amount;
    }

    /// When the use shown now is gone: the window's end, or for a rolling
    /// window when its oldest use drops out (`now` when nothing is used).
    pub(super) fn resets_at(&self, window: Window, now: Timestamp) -> Timestamp {
        match window {
            Window::Rolling24h => self
                .recent
                .front()
                .map_or(now, |(at, _)| at + Window::ROLLING_MS),
            Window::Hour | Window::Day | Window::Month => window.end(now),
        }
    }

    /// The thresholds (80, 100) that `used` of `limit` passed and were not
    /// announced in this window; marks them announced. A rolling window
    /// announces again after its use fell back below a threshold.
    pub(super) fn crossed(&mut self, window: Window, limit: f64, now: Timestamp) -> Vec<u8> {
        let key = match window {
            Window::Rolling24h => 0,
            Window::Hour | Window::Day | Window::Month => window.start(now),
        };
        // The same rule decides for pools shared by replicas, in the ledger.
        let (out, announced) =
            budget::crossed(self.announced, key, budget::level(self.used, limit));
        self.announced = announced;
        out
    }

    /// Takes the use and holds every replica sees (from the shared ledger)
    /// as this window's; the router reads them without asking the ledger.
    pub(super) fn mirror(&mut self, window: Window, now: Timestamp, used: f64, reserved: f64) {
        self.roll(window, now);
        self.recent.clear();
        self.used = used;
        self.reserved = reserved;
    }

    /// Marks what is already passed as announced (after a restart, the
    /// thresholds of the use found in the store are not announced again).
    pub(super) fn mark_announced(&mut self, window: Window, limit: f64, now: Timestamp) {
        let _ = self.crossed(window, limit, now);
    }

    /// True when nothing is used or held: the account can be forgotten.
    pub(super) fn is_idle(&self) -> bool {
        self.used <= 0.0 && self.reserved <= 0.0 && self.recent.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = 3_600_000;

    #[test]
    fn fixed_window_forgets_the_last_one() {
        let mut a = Account::default();
        let t = 10 * 24 * H + 5 * H;
        a.charge(Window::Day, t, 2.0, t);
        a.charge(Window::Day, t - 6 * H, 1.0, t);
        assert_eq!(a.used, 2.0, "yesterday's use is not today's");
        a.roll(Window::Day, t + 18 * H);
        assert_eq!(a.used, 2.0, "still the same day");
        a.roll(Window::Day, t + 19 * H);
        assert_eq!(a.used, 0.0, "a new UTC day");
    }

    #[test]
    fn rolling_window_drops_each_use_after_24_hours() {
        let mut a = Account::default();
        let t = 100 * 24 * H;
        a.charge(Window::Rolling24h, t + H, 1.0, t + 2 * H);
        a.charge(Window::Rolling24h, t, 2.0, t + 2 * H);
        assert_eq!(a.used, 3.0);
        assert_eq!(a.resets_at(Window::Rolling24h, t + 2 * H), t + 24 * H);
        a.roll(Window::Rolling24h, t + 24 * H);
        assert_eq!(a.used, 1.0, "the use at t is gone");
        a.roll(Window::Rolling24h, t + 25 * H);
        assert_eq!(a.used, 0.0);
        assert!(a.is_idle());
    }

    #[test]
    fn thresholds_are_announced_once_per_window() {
        let mut a = Account::default();
        let t = 10 * 24 * H;
        a.charge(Window::Day, t, 7.0, t);
        assert!(a.crossed(Window::Day, 10.0, t).is_empty());
        a.charge(Window::Day, t, 1.0, t);
        assert_eq!(a.crossed(Window::Day, 10.0, t), [80]);
        assert!(a.crossed(Window::Day, 10.0, t).is_empty());
        a.charge(Window::Day, t, 5.0, t);
        assert_eq!(a.crossed(Window::Day, 10.0, t), [100]);
        let next = t + 24 * H;
        a.charge(Window::Day, next, 12.0, next);
        assert_eq!(a.crossed(Window::Day, 10.0, next), [80, 100], "a new day");
    }
}
