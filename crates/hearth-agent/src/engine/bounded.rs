//! A run's body, raced against its cancel token and its wall clock.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use super::{Stop, limit};
use crate::wall::WallClock;

/// How the body of a run ended.
pub(super) struct Bounded<T> {
    /// What it answered, or why it was stopped.
    pub(super) result: Result<T, Stop>,
    /// It was stopped from outside (a cancel or the clock), perhaps in the
    /// middle of a tool call.
    pub(super) cut: bool,
}

/// Drives `body` to its end unless `cancel` fires or `clock` runs out first;
/// `over` says what ran out. A cancel that finds the clock run out ends the
/// body on the limit, not as cancelled: the deadline came first. A parent
/// stopped by its family's clock cancels its children, whose share of that
/// clock ran out at the same instant, and each child must fail on the limit
/// whichever of the two its task sees first.
pub(super) async fn bounded<T>(
    body: impl Future<Output = Result<T, Stop>>,
    cancel: &CancellationToken,
    clock: &WallClock,
    over: impl Fn() -> String,
) -> Bounded<T> {
    tokio::pin!(body);
    loop {
        let stop = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                if clock.expired() { limit(over()) } else { Stop::Cancelled }
            }
            r = &mut body => return Bounded { result: r, cut: false },
            _ = tokio::time::sleep_until(clock.next_check()) => {
                if !clock.expired() {
                    continue;
                }
                limit(over())
            }
        };
        return Bounded {
            result: Err(stop),
            cut: true,
        };
    }
}
