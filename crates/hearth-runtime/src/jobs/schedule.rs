//! A job's schedule: a cron expression (5 or 6 fields) read in the job's
//! time zone, `every <n><unit>` anchored at the job's creation, or one
//! RFC 3339 instant. Pure: every function takes the time it reasons about,
//! so the tests drive it with any clock.
//!
//! Daylight saving time follows croner (OCPS): a fixed-time job whose wall
//! clock time falls in a spring-forward gap fires once, at the first valid
//! time after the gap; in a fall-back overlap it fires once, on the first
//! pass. Interval patterns (`*/15 * * * *`) follow real time through both.

use std::str::FromStr;

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use hearth_core::Timestamp;
use jiff::Zoned;
use jiff::tz::TimeZone;

/// The time zone of a job that names none.
pub const DEFAULT_TIMEZONE: &str = "UTC";

/// Why a schedule was refused. Each message names what was given and what
/// is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// Neither cron, `every` nor an instant.
    #[error(
        "schedule {given:?} is not understood: {reason}; give a cron expression with 5 or 6 \
         fields (\"0 9 * * MON-FRI\"), \"every 15m\" (s, m, h or d), or an RFC 3339 instant \
         (\"2026-12-24T18:00:00+01:00\")"
    )]
    Unparsable {
        /// The schedule as given.
        given: String,
        /// What was wrong with it.
        reason: String,
    },
    /// Not an IANA time zone.
    #[error("unknown time zone {0:?}; use an IANA name such as Europe/Paris (default UTC)")]
    UnknownTimeZone(String),
    /// A one-shot instant that has passed, or a cron pattern that never matches.
    #[error("schedule {0:?} never fires again")]
    NeverFires(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    tz: TimeZone,
}

#[derive(Debug, Clone)]
enum Kind {
    Cron(Box<Cron>),
    Every { anchor: Timestamp, step_ms: i64 },
    Once(Timestamp),
}

impl Schedule {
    /// Parses `text` in `timezone` for a job created at `created_at` (the
    /// anchor of `every`).
    pub fn parse(text: &str, timezone: &str, created_at: Timestamp) -> Result<Self, ScheduleError> {
        let tz = TimeZone::get(timezone)
            .map_err(|_| ScheduleError::UnknownTimeZone(timezone.to_owned()))?;
        let unparsable = |reason: String| ScheduleError::Unparsable {
            given: text.to_owned(),
            reason,
        };
        let trimmed = text.trim();
        let kind = if let Some(rest) = trimmed.strip_prefix("every ") {
            Kind::Every {
                anchor: created_at,
                step_ms: parse_every(rest.trim()).map_err(unparsable)?,
            }
        } else if !trimmed.is_empty()
            && !trimmed.starts_with('@')
            && !trimmed.contains(char::is_whitespace)
        {
            let at = jiff::Timestamp::from_str(trimmed)
                .map_err(|e| unparsable(format!("not an RFC 3339 instant ({e})")))?;
            Kind::Once(at.as_millisecond())
        } else {
            let fields = trimmed.split_whitespace().count();
            if !trimmed.starts_with('@') && !(5..=6).contains(&fields) {
                return Err(unparsable(format!(
                    "a cron expression has 5 or 6 fields, this has {fields}"
                )));
            }
            let cron = CronParser::builder()
                .seconds(Seconds::Optional)
                .year(Year::Disallowed)
                .build()
                .parse(trimmed)
                .map_err(|e| unparsable(e.to_string()))?;
            Kind::Cron(Box::new(cron))
        };
        Ok(Self { kind, tz })
    }

    /// True for a one-shot instant.
    pub fn is_once(&self) -> bool {
        matches!(self.kind, Kind::Once(_))
    }

    /// The first instant strictly after `after`.
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Cron(cron) => {
                let from = self.zoned(after)?;
                let next = cron.find_next_occurrence(&from, false).ok()?;
                Some(next.timestamp().as_millisecond())
            }
            Kind::Every { anchor, step_ms } => {
                let k = if after < *anchor {
                    1
                } else {
                    (after - anchor) / step_ms + 1
                };
                anchor.checked_add(k.checked_mul(*step_ms)?)
            }
            Kind::Once(at) => (*at > after).then_some(*at),
        }
    }

    /// The last instant at or before `at`; `None` when there is none since
    /// the job began.
    pub fn latest_at_or_before(&self, at: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Cron(cron) => {
                let from = self.zoned(at)?;
                let prev = cron.find_previous_occurrence(&from, true).ok()?;
                Some(prev.timestamp().as_millisecond())
            }
            Kind::Every { anchor, step_ms } => {
                let k = at.checked_sub(*anchor)? / step_ms;
                (k >= 1).then(|| anchor + k * step_ms)
            }
            Kind::Once(once) => (*once <= at).then_some(*once),
        }
    }

    /// The last instant strictly before `before`.
    fn latest_before(&self, before: Timestamp) -> Option<Timestamp> {
        self.latest_at_or_before(before.checked_sub(1)?)
    }

    fn zoned(&self, ms: Timestamp) -> Option<Zoned> {
        let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
        Some(ts.to_zoned(self.tz.clone()))
    }
}

/// `15m`, `1s`, `2h`, `1d` as milliseconds (at least one second).
fn parse_every(text: &str) -> Result<i64, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("\"every {text}\" needs a unit (s, m, h or d)"))?;
    let (n, unit) = text.split_at(split);
    let n: i64 = n
        .parse()
        .map_err(|_| format!("\"every {text}\" needs a whole number before the unit"))?;
    let unit_ms = match unit.trim() {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        other => return Err(format!("unknown unit {other:?} (use s, m, h or d)")),
    };
    if n < 1 {
        return Err("the interval must be at least 1".into());
    }
    n.checked_mul(unit_ms)
        .filter(|ms| *ms <= 366 * 86_400_000)
        .ok_or_else(|| "the interval must be at most 366 days".into())
}

/// What a job does with firings it missed while hearth was down.
pub use hearth_store::CatchUp;

/// A firing this late is on time (the ticker was busy or the machine slow),
/// not missed: every policy fires it.
pub const ON_TIME_MS: i64 = 60_000;
/// `latest` catches up only an instant at most this old.
pub const LATEST_WINDOW_MS: i64 = 24 * 3_600_000;
/// `all` fires at most this many missed instants (the most recent ones).
pub const ALL_MAX: usize = 100;

/// What is due for a job at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    /// Instants to fire, oldest first.
    pub fire: Vec<Timestamp>,
    /// Instants due but not fired (policy, age or the `all` cap).
    pub skipped: u64,
    /// The next instant after `now`.
    pub next_run_at: Option<Timestamp>,
}

/// The firings due at `now` for a job whose next unfired instant is
/// `next_run_at`, following `catch_up`.
pub fn due(schedule: &Schedule, catch_up: CatchUp, next_run_at: Timestamp, now: Timestamp) -> Due {
    let next = schedule.next_after(now);
    let Some(latest) = schedule
        .latest_at_or_before(now)
        .filter(|at| *at >= next_run_at)
    else {
        // Nothing due yet (or the schedule moved under us): keep waiting
        // for the stored instant if it is still ahead.
        return Due {
            fire: Vec::new(),
            skipped: 0,
            next_run_at: if next_run_at > now {
                Some(next_run_at)
            } else {
                next
            },
        };
    };
    let late = now - latest;
    let mut fire = match catch_up {
        CatchUp::Latest if late <= LATEST_WINDOW_MS => vec![latest],
        CatchUp::None if late <= ON_TIME_MS => vec![latest],
        CatchUp::Latest | CatchUp::None => Vec::new(),
        CatchUp::All => {
            let mut all = vec![latest];
            while all.len() < ALL_MAX {
                match all.last().and_then(|at| schedule.latest_before(*at)) {
                    Some(at) if at >= next_run_at => all.push(at),
                    _ => break,
                }
            }
            all.reverse();
            all
        }
    };
    fire.dedup();
    // Fired or not, `latest` and everything before the first fired instant
    // back to `next_run_at` was due.
    let skipped = count_between(
        schedule,
        next_run_at,
        fire.first().copied().unwrap_or(now.saturating_add(1)),
    );
    Due {
        fire,
        skipped,
        next_run_at: next,
    }
}

/// Instants in `[from, before)`, counted up to a bound (a log figure, not an
/// exact census of years of missed seconds).
fn count_between(schedule: &Schedule, from: Timestamp, before: Timestamp) -> u64 {
    const BOUND: u64 = 10_000;
    let mut n = 0;
    let mut at = schedule.latest_before(before);
    while let Some(t) = at {
        if t < from || n >= BOUND {
            break;
        }
        n += 1;
        at = schedule.latest_before(t);
    }
    n
}

#[cfg(test)]
#[path = "schedule_tests.rs"]
mod tests;
