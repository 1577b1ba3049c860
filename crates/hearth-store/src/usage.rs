//! Usage: model calls counted for cost, never their text.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{ModelUsage, StepRecord, UsageQuery, UsageRow};

pub use hearth_core::records::usage::CallUsage;

/// Model calls counted for usage and cost.
#[async_trait::async_trait]
pub trait UsageStore: Send + Sync + 'static {
    /// Model calls grouped for usage and cost.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>>;

    /// Counts model calls of runs stored elsewhere (incognito) in usage,
    /// without their thread or user: only provider, model, tokens, timing.
    /// Steps that are not finished model calls are skipped.
    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()>;

    /// Every model call from `since` (inclusive) on, oldest first: what
    /// budget pools rebuild their use from at start.
    async fn calls_since(&self, since: Timestamp) -> Result<Vec<CallUsage>>;

    /// Counts one model call made outside any run (an embedding of memory):
    /// a usage row with `purpose`, under the call's own id, so usage and
    /// budgets rebuilt at start see it. Recording the same id twice keeps
    /// the first.
    async fn record_model_call(&self, call: ModelCall) -> Result<()>;
}

/// A model call outside a run, as [`UsageStore::record_model_call`] stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    /// The call's own id (stored where a run's id goes), e.g. `emb_<uuid>`.
    pub call_id: String,
    /// When it started, unix ms.
    pub at: Timestamp,
    /// The provider's configured name.
    pub provider: String,
    /// The model.
    pub model: String,
    /// What it was for, e.g. `embedding`.
    pub purpose: String,
    /// Whose it was; `None` for nobody's.
    pub user_key: Option<String>,
    /// Its thread, when one.
    pub thread_key: Option<String>,
    /// Prompt tokens reported.
    pub input_tokens: Option<u64>,
    /// How long it took, ms.
    pub latency_ms: i64,
    /// The error's kind when it failed; `None` when it succeeded.
    pub error_kind: Option<String>,
}

/// Adds one model's sums to the usage rows being built from rows sorted by
/// group key: a new key opens a group, and each group totals its models.
pub(crate) fn add_model_usage(out: &mut Vec<UsageRow>, key: String, m: ModelUsage) {
    if out.last().is_none_or(|r| r.key != key) {
        out.push(UsageRow {
            key,
            calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            untracked_calls: 0,
            by_model: Vec::new(),
        });
    }
    if let Some(r) = out.last_mut() {
        r.calls += m.calls;
        r.input_tokens += m.input_tokens;
        r.output_tokens += m.output_tokens;
        r.cached_tokens += m.cached_tokens;
        r.untracked_calls += m.untracked_calls;
        r.by_model.push(m);
    }
}

/// Milliseconds in a day.
const DAY_MS: i128 = 86_400_000;

/// The UTC day number of a call at `at` (ms), as usage groups it and the
/// `usage_daily` rollup stores it: the time truncated to whole seconds
/// (towards zero), then the day of that second, which is how SQLite's
/// `strftime('%Y-%m-%d', at / 1000, 'unixepoch')` reads it.
pub(crate) fn day_of(at: i64) -> i64 {
    (at / 1000).div_euclid(86_400)
}

/// The first millisecond of day `d` (see [`day_of`]: the days up to the
/// epoch's begin 999 ms early, as the seconds are truncated towards zero).
fn day_start(d: i64) -> i128 {
    let ms = i128::from(d) * DAY_MS;
    if d > 0 { ms } else { ms - 999 }
}

/// A usage window `[since, until)` split for reading: the whole days
/// `[lo_day, hi_day)` from the `usage_daily` rollup, and the ragged edges
/// `[since, lo_ms)` and `[hi_ms, until)` from the raw `llm_calls` rows (a
/// range scan of their `at` index), so any window is exact and a window
/// of whole days reads the rollup alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UsageWindow {
    pub since: i64,
    pub until: i64,
    pub lo_ms: i64,
    pub hi_ms: i64,
    pub lo_day: i64,
    pub hi_day: i64,
}

impl UsageWindow {
    /// Splits a query's window (no bound: all time).
    pub(crate) fn of(since: Option<i64>, until: Option<i64>) -> UsageWindow {
        let since = since.unwrap_or(i64::MIN);
        let until = until.unwrap_or(i64::MAX).max(since);
        let mut lo_day = day_of(since);
        if day_start(lo_day) < i128::from(since) {
            lo_day += 1;
        }
        let hi_day = day_of(until);
        // Both starts lie within [since, until] when there is a whole day.
        let lo_ms = i64::try_from(day_start(lo_day)).ok();
        let hi_ms = i64::try_from(day_start(hi_day)).ok();
        match (lo_ms, hi_ms) {
            (Some(lo_ms), Some(hi_ms)) if lo_day < hi_day => UsageWindow {
                since,
                until,
                lo_ms,
                hi_ms,
                lo_day,
                hi_day,
            },
            // No whole day: every call comes from the raw rows.
            _ => UsageWindow {
                since,
                until,
                lo_ms: until,
                hi_ms: until,
                lo_day: 0,
                hi_day: 0,
            },
        }
    }
}

/// `YYYY-MM-DD` of a day counted from 1970-01-01 in the proleptic Gregorian
/// calendar, as SQLite prints it (year 0 exists; year -1 is `-001`). SQLite
/// prints nothing past 9999-12-31; this prints the five-digit year.
pub(crate) fn utc_day(days: i64) -> String {
    // Howard Hinnant's `civil_from_days`: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::{UsageWindow, day_of, utc_day};

    /// Every day SQLite can print, around the epoch, leap days and the ends
    /// of its range, is printed the same.
    #[test]
    fn days_are_printed_as_sqlite_prints_them() {
        let db = rusqlite::Connection::open_in_memory().unwrap();
        let mut days: Vec<i64> = (-800..800).collect();
        days.extend((0..3_000).map(|i| i * 997 - 719_528));
        days.extend([
            -719_528, -719_529, 2_932_896, 11_016, 11_017, 10_957, 19_675,
        ]);
        for day in days {
            let sqlite: Option<String> = db
                .query_row(
                    "SELECT strftime('%Y-%m-%d', ?1 * 86400, 'unixepoch')",
                    [day],
                    |r| r.get(0),
                )
                .unwrap();
            if let Some(sqlite) = sqlite {
                assert_eq!(utc_day(day), sqlite, "day {day}");
            }
        }
        assert_eq!(utc_day(19_675), "2023-11-14");
        assert_eq!(utc_day(0), "1970-01-01");
        assert_eq!(utc_day(-1), "1969-12-31");
    }

    /// Every millisecond of the window is read exactly once: from the
    /// rollup when its day lies whole inside, else from the raw rows.
    #[test]
    fn a_window_splits_into_whole_days_and_raw_edges() {
        let day = 86_400_000;
        let ats: Vec<i64> = (-3..4)
            .flat_map(|d| {
                [
                    d * day - 1000,
                    d * day - 999,
                    d * day - 1,
                    d * day,
                    d * day + 1,
                ]
            })
            .collect();
        let bounds: Vec<Option<i64>> = std::iter::once(None)
            .chain(ats.iter().map(|&a| Some(a)))
            .collect();
        for &since in &bounds {
            for &until in &bounds {
                let w = UsageWindow::of(since, until);
                for &at in &ats {
                    let inside = since.is_none_or(|s| at >= s) && until.is_none_or(|u| at < u);
                    let raw = (at >= w.since && at < w.lo_ms) || (at >= w.hi_ms && at < w.until);
                    let d = day_of(at);
                    let rolled = d >= w.lo_day && d < w.hi_day;
                    assert!(!(raw && rolled), "{at} twice in {w:?}");
                    assert_eq!(inside, raw || rolled, "{at} in {since:?}..{until:?}: {w:?}");
                }
            }
        }
        let w = UsageWindow::of(Some(2 * day), None);
        assert_eq!(
            (w.lo_day, w.lo_ms),
            (2, 2 * day),
            "a whole-day window has no raw edge"
        );
        let all = UsageWindow::of(None, None);
        assert!(
            all.lo_day < -(1 << 36) && all.hi_day > 1 << 36,
            "all time is whole days: {all:?}"
        );
    }
}
