//! A channel's health as `/v1/channels` and `/readyz` show it. A channel is
//! `connected` after its first successful platform call and while events
//! arrive and are acknowledged; repeated failures make it `degraded` until a
//! call succeeds again. On a replica whose connection another replica holds
//! it is `standby` (not a failure) until this one takes the connection.

use std::sync::{Mutex, OnceLock, PoisonError};

use hearth_core::{Timestamp, now_ms};

/// Failures in a row after which a channel shows as degraded.
const DEGRADED_AFTER: u32 = 3;

pub use hearth_core::ChannelState;

/// A snapshot of a channel's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// Where it stands.
    pub state: ChannelState,
    /// The last failure, if the channel is not connected.
    pub last_error: Option<String>,
    /// When the last platform event was received and acknowledged.
    pub last_event_at: Option<Timestamp>,
}

#[derive(Debug)]
struct Inner {
    connected_once: bool,
    failures: u32,
    last_error: Option<String>,
    last_event_at: Option<Timestamp>,
    /// Another replica holds the connection: `Some(its id)`, or `Some("")`
    /// when which one is not known.
    standby: Option<String>,
}

/// Called with the last error when a channel becomes degraded.
pub type OnDegraded = Box<dyn Fn(&str) + Send + Sync>;

/// Shared, updated by the channel's loops.
pub struct Health {
    inner: Mutex<Inner>,
    on_degraded: OnceLock<OnDegraded>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Default for Health {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Inner {
                connected_once: false,
                failures: 0,
                last_error: None,
                last_event_at: None,
                standby: None,
            }),
            on_degraded: OnceLock::new(),
        }
    }
}

impl Health {
    fn with<T>(&self, f: impl FnOnce(&mut Inner) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A platform call succeeded.
    pub fn ok(&self) {
        self.with(|h| {
            h.connected_once = true;
            h.failures = 0;
            h.last_error = None;
        });
    }

    /// Events were received and acknowledged.
    pub fn event(&self) {
        let now = now_ms();
        self.with(|h| {
            h.connected_once = true;
            h.failures = 0;
            h.last_error = None;
            h.last_event_at = Some(now);
        });
    }

    /// Calls `hook` each time the channel becomes degraded (once per
    /// stretch of failures, not per failure). Set once; a second hook is
    /// ignored.
    pub fn on_degraded(&self, hook: OnDegraded) {
        let _ = self.on_degraded.set(hook);
    }

    /// A platform call failed with `error` (already free of secrets).
    pub fn failed(&self, error: impl Into<String>) {
        let error = error.into();
        let became_degraded = self.with(|h| {
            h.failures = h.failures.saturating_add(1);
            h.last_error = Some(error.clone());
            h.failures == DEGRADED_AFTER
        });
        if became_degraded && let Some(hook) = self.on_degraded.get() {
            hook(&error);
        }
    }

    /// Another replica holds the connection (`holder`, when known): this
    /// one stands by, which is no failure.
    pub fn standby(&self, holder: Option<&str>) {
        self.with(|h| {
            h.standby = Some(holder.unwrap_or_default().to_owned());
            h.failures = 0;
            h.last_error = None;
            h.connected_once = false;
        });
    }

    /// This replica took the connection: it connects from here.
    pub fn holding(&self) {
        self.with(|h| h.standby = None);
    }

    /// Who holds the connection when this replica stands by: `Some(id)`,
    /// or `Some("")` when which replica is not known.
    pub fn held_by(&self) -> Option<String> {
        self.with(|h| h.standby.clone())
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> HealthSnapshot {
        self.with(|h| HealthSnapshot {
            state: if h.standby.is_some() {
                ChannelState::Standby
            } else if h.failures >= DEGRADED_AFTER {
                ChannelState::Degraded
            } else if h.connected_once {
                ChannelState::Connected
            } else {
                ChannelState::Connecting
            },
            last_error: h.last_error.clone(),
            last_event_at: h.last_event_at,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connecting_then_connected_then_degraded_then_back() {
        let h = Health::default();
        assert_eq!(h.snapshot().state, ChannelState::Connecting);
        h.failed("boom");
        assert_eq!(h.snapshot().state, ChannelState::Connecting);
        h.ok();
        assert_eq!(h.snapshot().state, ChannelState::Connected);
        for _ in 0..DEGRADED_AFTER {
            h.failed("HTTP 502");
        }
        let s = h.snapshot();
        assert_eq!(s.state, ChannelState::Degraded);
        assert_eq!(s.last_error.as_deref(), Some("HTTP 502"));
        h.event();
        let s = h.snapshot();
        assert_eq!(s.state, ChannelState::Connected);
        assert!(s.last_event_at.is_some());
        assert_eq!(s.last_error, None);
    }

    #[test]
    fn a_standby_channel_is_not_failing_and_connects_once_it_holds() {
        let h = Health::default();
        for _ in 0..DEGRADED_AFTER {
            h.failed("HTTP 502");
        }
        h.standby(Some("host-1-abcd"));
        let s = h.snapshot();
        assert_eq!(s.state, ChannelState::Standby);
        assert_eq!(s.last_error, None);
        assert_eq!(h.held_by().as_deref(), Some("host-1-abcd"));
        h.holding();
        assert_eq!(h.snapshot().state, ChannelState::Connecting);
        assert_eq!(h.held_by(), None);
    }

    #[test]
    fn the_degraded_hook_runs_once_per_stretch_of_failures() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        let h = Health::default();
        let calls = Arc::new(AtomicU32::new(0));
        let seen = calls.clone();
        h.on_degraded(Box::new(move |e| {
            assert_eq!(e, "HTTP 502");
            seen.fetch_add(1, Ordering::SeqCst);
        }));
        for _ in 0..DEGRADED_AFTER * 3 {
            h.failed("HTTP 502");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        h.ok();
        for _ in 0..DEGRADED_AFTER {
            h.failed("HTTP 502");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
