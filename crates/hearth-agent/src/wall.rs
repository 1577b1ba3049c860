//! The run's wall-time budget, which stops while the run waits for a person.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How often a paused clock is looked at again.
const PAUSED_RECHECK: Duration = Duration::from_secs(1);

/// A deadline that can be paused: time spent awaiting a confirmation is the
/// user's, not the run's, and must not end it with `limit_exceeded`.
pub(crate) struct WallClock {
    state: Mutex<State>,
}

struct State {
    deadline: Instant,
    paused_since: Option<Instant>,
}

impl WallClock {
    /// A clock that runs out `budget` from now.
    pub(crate) fn new(budget: Duration) -> Self {
        Self {
            state: Mutex::new(State {
                deadline: Instant::now() + budget,
                paused_since: None,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops the clock (idempotent).
    pub(crate) fn pause(&self) {
        let mut s = self.state();
        if s.paused_since.is_none() {
            s.paused_since = Some(Instant::now());
        }
    }

    /// Restarts the clock, moving the deadline by the time it was stopped.
    pub(crate) fn resume(&self) {
        let mut s = self.state();
        if let Some(since) = s.paused_since.take() {
            s.deadline += since.elapsed();
        }
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
}
