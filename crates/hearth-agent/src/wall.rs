//! The run's wall-time budget, which stops while the run waits for a person.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How often a paused clock is looked at again.
const PAUSED_RECHECK: Duration = Duration::from_secs(1);

/// A deadline that can be paused: time spent awaiting a confirmation is the
/// user's, not the run's, and must not end it with `limit_exceeded`. A run
/// and its sub-agents share one, so pauses are counted: it runs again when
/// the last question is answered.
pub(crate) struct WallClock {
    state: Mutex<State>,
}

struct State {
    deadline: Instant,
    paused_since: Option<Instant>,
    /// Questions waiting now.
    pauses: u32,
}

impl WallClock {
    /// A clock that runs out `budget` from now.
    pub(crate) fn new(budget: Duration) -> Self {
        Self {
            state: Mutex::new(State {
                deadline: Instant::now() + budget,
                paused_since: None,
                pauses: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the clock until as many `resume`s.
    pub(crate) fn pause(&self) {
        let mut s = self.state();
        if s.paused_since.is_none() {
            s.paused_since = Some(Instant::now());
        }
        s.pauses = s.pauses.saturating_add(1);
    }

    /// Undoes one `pause`; the last restarts the clock, moving the deadline
    /// by the time it was stopped.
    pub(crate) fn resume(&self) {
        let mut s = self.state();
        s.pauses = s.pauses.saturating_sub(1);
        if s.pauses > 0 {
            return;
        }
        if let Some(since) = s.paused_since.take() {
            s.deadline += since.elapsed();
        }
    }

    /// Time left before the budget is spent (all of it while paused).
    pub(crate) fn left(&self) -> Duration {
        let s = self.state();
        let now = s.paused_since.unwrap_or_else(Instant::now);
        s.deadline.saturating_duration_since(now)
    }

    /// True when the budget is spent (never while paused).
    pub(crate) fn expired(&self) -> bool {
        let s = self.state();
        s.paused_since.is_none() && Instant::now() >= s.deadline
    }

    /// When to look at the clock next.
    pub(crate) fn next_check(&self) -> Instant {
        let s = self.state();
        match s.paused_since {
            Some(_) => Instant::now() + PAUSED_RECHECK,
            None => s.deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paused_time_does_not_count() {
        let clock = WallClock::new(Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(6)).await;
        clock.pause();
        tokio::time::advance(Duration::from_secs(100)).await;
        assert!(!clock.expired());
        clock.resume();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!clock.expired());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(clock.expired());
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_clock_runs_again_after_the_last_question() {
        let clock = WallClock::new(Duration::from_secs(10));
        clock.pause();
        clock.pause();
        tokio::time::advance(Duration::from_secs(100)).await;
        clock.resume();
        tokio::time::advance(Duration::from_secs(100)).await;
        assert!(!clock.expired(), "one question still waits");
        assert_eq!(clock.left(), Duration::from_secs(10));
        clock.resume();
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(clock.expired());
    }
}
