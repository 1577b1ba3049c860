//! Budget pools shared by several replicas: what calls in flight hold and
//! what settled calls used, per pool and subject, in the database every
//! replica sees (see [`Store::budget_ledger`](crate::Store::budget_ledger)).
//!
//! The ledger knows nothing of prices or models: the agent's budget works
//! out each pool's amount and window and asks the ledger to hold or count
//! it. A reservation locks the pool's row, so the check (`used + reserved +
//! amount <= limit`) and the hold are one step across replicas. A hold
//! counts while its holder replica heartbeats (or is the caller): a dead
//! replica's holds stop counting when its lease runs out.
//!
//! Use is kept per bucket: a fixed window's use in one bucket at the
//! window's start, a rolling window's per minute ([`ROLLING_BUCKET_MS`]).

use hearth_core::Timestamp;

use crate::error::Result;

/// The bucket width of a rolling window's use: a use is counted up to this
/// much longer than its window holds it, never shorter.
pub const ROLLING_BUCKET_MS: i64 = 60_000;

/// One pool (for one subject) a call reserves from.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerHold {
    /// The pool's name.
    pub pool: String,
    /// The user or thread of a scoped pool; empty for a global pool.
    pub subject: String,
    /// Use counts from buckets at or after this instant.
    pub since: Timestamp,
    /// The pool's limit.
    pub limit: f64,
    /// What the call holds.
    pub amount: f64,
}

/// A pool's shared state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LedgerUse {
    /// Settled use in the window.
    pub used: f64,
    /// Held by live calls in flight (on every replica).
    pub reserved: f64,
}

/// What [`BudgetLedger::reserve`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reserved {
    /// Every pool took its amount: the reservation's id, and each pool's
    /// state after holding (in the order of the holds).
    Held {
        /// The reservation, for [`BudgetLedger::settle`].
        id: String,
        /// Each pool's state, this hold included.
        pools: Vec<LedgerUse>,
    },
    /// The hold at `index` would pass its limit; nothing is held.
    Refused {
        /// Which hold.
        index: usize,
        /// Its pool's state.
        state: LedgerUse,
    },
}

/// One pool's real use of a settled call.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerCharge {
    /// The pool's name.
    pub pool: String,
    /// The user or thread; empty for a global pool.
    pub subject: String,
    /// Use counts from buckets at or after this instant.
    pub since: Timestamp,
    /// The bucket the use goes in.
    pub bucket: Timestamp,
    /// What the call used.
    pub amount: f64,
    /// The pool's limit, for thresholds.
    pub limit: f64,
    /// The window thresholds are announced once in (its start; 0 for a
    /// rolling window, which announces again after falling back).
    pub announce_key: Timestamp,
}

/// A pool's state after a settlement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settled {
    /// Settled use and live holds after the call.
    pub state: LedgerUse,
    /// Thresholds (80, 100) this settlement passed first, cluster-wide.
    pub crossed: Vec<u8>,
}

/// A pool's use for one subject, as status shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    /// The pool's name.
    pub pool: String,
    /// The user or thread; empty for a global pool.
    pub subject: String,
    /// Settled use and live holds.
    pub state: LedgerUse,
    /// The oldest bucket with use in the window (`None` when only held).
    pub oldest: Option<Timestamp>,
}

/// Budget reservations and use that several replicas share.
#[async_trait::async_trait]
pub trait BudgetLedger: Send + Sync {
    /// Holds every amount of `holds` for `holder` at `now`, or none when one
    /// would pass its limit. Holds of other holders count when they
    /// heartbeated at or after `alive_since`.
    async fn reserve(
        &self,
        holds: &[LedgerHold],
        holder: &str,
        now: Timestamp,
        alive_since: Timestamp,
    ) -> Result<Reserved>;

    /// Drops the reservation `id` (if still there) and counts `charges`, in
    /// one transaction; each charge's state after, in order.
    async fn settle(
        &self,
        id: &str,
        charges: &[LedgerCharge],
        holder: &str,
        alive_since: Timestamp,
    ) -> Result<Vec<Settled>>;

    /// Every subject's state of each `(pool, since)`.
    async fn status(
        &self,
        pools: &[(String, Timestamp)],
        holder: &str,
        alive_since: Timestamp,
    ) -> Result<Vec<LedgerRow>>;

    /// Counts use found elsewhere (the usage of calls made before the ledger
    /// counted them) in buckets nobody counted yet: `(pool, subject, bucket,
    /// amount)`. A bucket that has use is left as it is.
    async fn seed(&self, uses: &[(String, String, Timestamp, f64)]) -> Result<()>;

    /// Removes holds that no longer count: other holders' not seen since
    /// `alive_since`, and `holder`'s own taken before `before` whose id is
    /// not in `live` (a settlement that failed); and use in buckets before
    /// `forget_before`. How many holds went.
    async fn tidy(
        &self,
        holder: &str,
        live: &[String],
        before: Timestamp,
        alive_since: Timestamp,
        forget_before: Timestamp,
    ) -> Result<u64>;
}

/// The threshold level (0, 80 or 100) of `used` against `limit`.
pub fn level(used: f64, limit: f64) -> u8 {
    if used >= limit {
        100
    } else if used >= 0.8 * limit {
        80
    } else {
        0
    }
}

/// The thresholds `level` passes that were not announced in the window
/// `key` (`announced`: the window and level announced last), and what is
/// announced after. A rolling window (`key` 0) announces again after its
/// use fell back below a threshold.
pub fn crossed(
    announced: (Timestamp, u8),
    key: Timestamp,
    level: u8,
) -> (Vec<u8>, (Timestamp, u8)) {
    let mut done = if announced.0 == key { announced.1 } else { 0 };
    if key == 0 && level < done {
        done = level;
    }
    let out = [80, 100]
        .into_iter()
        .filter(|t| *t > done && *t <= level)
        .collect();
    (out, (key, done.max(level)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_passed_once_per_window_and_again_after_a_rolling_fall() {
        let (out, state) = crossed((0, 0), 100, level(8.0, 10.0));
        assert_eq!((out, state), (vec![80], (100, 80)));
        let (out, state) = crossed(state, 100, level(12.0, 10.0));
        assert_eq!((out, state), (vec![100], (100, 100)));
        let (out, _) = crossed(state, 100, level(12.0, 10.0));
        assert!(out.is_empty());
        let (out, _) = crossed(state, 200, level(12.0, 10.0));
        assert_eq!(out, [80, 100], "a new window");
        let (out, state) = crossed((0, 100), 0, level(1.0, 10.0));
        assert!(out.is_empty());
        assert_eq!(
            crossed(state, 0, 80).0,
            [80],
            "rolling fell back, then rose"
        );
    }
}
