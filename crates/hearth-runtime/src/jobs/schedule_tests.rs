//! The schedule logic under a clock the tests choose: every form, time
//! zones, DST gaps and overlaps, and catch-up.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;

use super::*;

/// Unix ms of a UTC instant in RFC 3339.
fn utc(s: &str) -> Timestamp {
    s.parse::<jiff::Timestamp>().unwrap().as_millisecond()
}

/// Unix ms of a wall clock time in `tz` (the earlier instant if repeated).
fn local(tz: &str, s: &str) -> Timestamp {
    let dt: DateTime = s.parse().unwrap();
    TimeZone::get(tz)
        .unwrap()
        .to_ambiguous_zoned(dt)
        .earlier()
        .unwrap()
        .timestamp()
        .as_millisecond()
}

/// `ms` as a wall clock time in `tz`, `YYYY-MM-DDTHH:MM`.
fn wall(tz: &str, ms: Timestamp) -> String {
    let z = jiff::Timestamp::from_millisecond(ms)
        .unwrap()
        .to_zoned(TimeZone::get(tz).unwrap());
    z.strftime("%Y-%m-%dT%H:%M").to_string()
}

/// The first `n` instants after `from`.
fn instants(s: &Schedule, from: Timestamp, n: usize) -> Vec<Timestamp> {
    let mut out = Vec::new();
    let mut at = from;
    for _ in 0..n {
        at = s.next_after(at).unwrap();
        out.push(at);
    }
    out
}

#[test]
fn every_is_anchored_at_creation() {
    let created = utc("2026-01-01T10:07:13.250Z");
    let s = Schedule::parse("every 15m", "UTC", created).unwrap();
    assert_eq!(s.next_after(created), Some(created + 900_000));
    assert_eq!(s.next_after(created + 900_000), Some(created + 1_800_000));
    assert_eq!(s.next_after(created - 5_000), Some(created + 900_000));
    assert_eq!(s.latest_at_or_before(created + 899_999), None);
    assert_eq!(
        s.latest_at_or_before(created + 2_000_000),
        Some(created + 1_800_000)
    );
    let seconds = Schedule::parse("every 1s", "UTC", 0).unwrap();
    assert_eq!(instants(&seconds, 0, 3), [1_000, 2_000, 3_000]);
    let days = Schedule::parse("every 2d", "UTC", 0).unwrap();
    assert_eq!(days.next_after(0), Some(2 * 86_400_000));
}

#[test]
fn cron_with_five_or_six_fields() {
    let five = Schedule::parse("0 9 * * *", "UTC", 0).unwrap();
    assert_eq!(
        five.next_after(utc("2026-01-01T10:00:00Z")),
        Some(utc("2026-01-02T09:00:00Z"))
    );
    assert_eq!(
        five.latest_at_or_before(utc("2026-01-01T10:00:00Z")),
        Some(utc("2026-01-01T09:00:00Z"))
    );
    let six = Schedule::parse("*/10 * * * * *", "UTC", 0).unwrap();
    assert_eq!(
        instants(&six, utc("2026-01-01T00:00:01Z"), 2),
        [utc("2026-01-01T00:00:10Z"), utc("2026-01-01T00:00:20Z")]
    );
    // A weekday name with a T is still cron, not an instant.
    let tue = Schedule::parse("0 9 * * TUE", "UTC", 0).unwrap();
    assert_eq!(
        tue.next_after(utc("2026-11-23T00:00:00Z")),
        Some(utc("2026-11-24T09:00:00Z"))
    );
}

#[test]
fn cron_is_read_in_the_job_time_zone() {
    let s = Schedule::parse("0 9 * * *", "Europe/Paris", 0).unwrap();
    // 09:00 in Paris is 08:00Z in winter and 07:00Z in summer.
    assert_eq!(
        s.next_after(utc("2026-01-10T12:00:00Z")),
        Some(utc("2026-01-11T08:00:00Z"))
    );
    assert_eq!(
        s.next_after(utc("2026-07-10T12:00:00Z")),
        Some(utc("2026-07-11T07:00:00Z"))
    );
}

#[test]
fn an_instant_fires_once() {
    let at = utc("2026-12-24T17:00:00Z");
    let s = Schedule::parse("2026-12-24T18:00:00+01:00", "Asia/Tokyo", 0).unwrap();
    assert!(s.is_once());
    assert_eq!(s.next_after(at - 1), Some(at));
    assert_eq!(s.next_after(at), None);
    assert_eq!(s.latest_at_or_before(at + 10), Some(at));
    assert_eq!(s.latest_at_or_before(at - 1), None);
}

#[test]
fn bad_schedules_and_zones_are_refused_with_what_was_given() {
    let cases = [
        "",
        "0 9 * *",
        "0 0 9 * * * 2026",
        "61 * * * *",
        "every",
        "every 0m",
        "every 5x",
        "every m",
        "every 400d",
        "2026-13-01T00:00:00Z",
        "tomorrow",
    ];
    for bad in cases {
        let e = Schedule::parse(bad, "UTC", 0).unwrap_err();
        assert!(
            matches!(e, ScheduleError::Unparsable { ref given, .. } if given == bad),
            "{bad:?}: {e:?}"
        );
        assert!(e.to_string().contains("every 15m"), "{e}");
    }
    let e = Schedule::parse("0 9 * * *", "Mars/Olympus", 0).unwrap_err();
    assert_eq!(e, ScheduleError::UnknownTimeZone("Mars/Olympus".into()));
}

#[test]
fn a_time_in_the_spring_gap_fires_once_that_day() {
    // Berlin skips 02:00-03:00 on 2026-03-29.
    let tz = "Europe/Berlin";
    let s = Schedule::parse("30 2 * * *", tz, 0).unwrap();
    let got: Vec<String> = instants(&s, local(tz, "2026-03-27T12:00:00"), 3)
        .into_iter()
        .map(|ms| wall(tz, ms))
        .collect();
    assert_eq!(
        got,
        ["2026-03-28T02:30", "2026-03-29T03:00", "2026-03-30T02:30"]
    );
}

#[test]
fn a_time_in_the_autumn_overlap_fires_once_that_day() {
    // Berlin repeats 02:00-03:00 on 2026-10-25.
    let tz = "Europe/Berlin";
    let s = Schedule::parse("30 2 * * *", tz, 0).unwrap();
    let got = instants(&s, local(tz, "2026-10-24T12:00:00"), 3);
    let walls: Vec<String> = got.iter().map(|ms| wall(tz, *ms)).collect();
    assert_eq!(
        walls,
        ["2026-10-25T02:30", "2026-10-26T02:30", "2026-10-27T02:30"]
    );
    // The first pass (+02:00), never the second as well.
    assert_eq!(got[0], utc("2026-10-25T00:30:00Z"));
}

#[test]
fn a_daily_job_fires_once_on_every_day_of_a_year_with_two_transitions() {
    for (tz, time) in [
        ("America/New_York", "30 2 * * *"),
        ("Europe/London", "30 1 * * *"),
    ] {
        let s = Schedule::parse(time, tz, 0).unwrap();
        let year = instants(&s, local(tz, "2025-12-31T12:00:00"), 365);
        let mut day = jiff::civil::date(2026, 1, 1);
        for ms in &year {
            assert_eq!(&wall(tz, *ms)[..10], day.to_string(), "{tz}");
            day = day.tomorrow().unwrap();
        }
        assert_eq!(day, jiff::civil::date(2027, 1, 1));
    }
}

#[test]
fn an_interval_pattern_follows_real_time_through_the_overlap() {
    let tz = "Europe/Berlin";
    let s = Schedule::parse("0 * * * *", tz, 0).unwrap();
    let got = instants(&s, utc("2026-10-24T23:30:00Z"), 4);
    // Hourly in real time: the repeated 02:00 is a different hour.
    for pair in got.windows(2) {
        assert_eq!(pair[1] - pair[0], 3_600_000);
    }
}

#[test]
fn due_on_time_fires_the_instant_under_every_policy() {
    let s = Schedule::parse("every 1m", "UTC", 0).unwrap();
    for policy in CatchUp::ALL {
        let d = due(&s, policy, 60_000, 60_250);
        assert_eq!(d.fire, [60_000], "{policy:?}");
        assert_eq!(d.skipped, 0);
        assert_eq!(d.next_run_at, Some(120_000));
    }
}

#[test]
fn nothing_is_due_before_the_next_instant() {
    let s = Schedule::parse("every 1m", "UTC", 0).unwrap();
    let d = due(&s, CatchUp::All, 60_000, 59_999);
    assert!(d.fire.is_empty());
    assert_eq!(d.next_run_at, Some(60_000));
}

#[test]
fn catch_up_latest_fires_the_most_recent_missed_instant_within_a_day() {
    let s = Schedule::parse("0 * * * *", "UTC", 0).unwrap();
    let next = utc("2026-01-01T10:00:00Z");
    let now = utc("2026-01-01T13:20:00Z");
    let d = due(&s, CatchUp::Latest, next, now);
    assert_eq!(d.fire, [utc("2026-01-01T13:00:00Z")]);
    assert_eq!(d.skipped, 3);
    assert_eq!(d.next_run_at, Some(utc("2026-01-01T14:00:00Z")));

    // Down for more than a day since the last instant: nothing to catch up.
    let daily = Schedule::parse("0 9 * * 1", "UTC", 0).unwrap();
    let d = due(
        &daily,
        CatchUp::Latest,
        utc("2026-11-16T09:00:00Z"),
        utc("2026-11-21T09:00:00Z"),
    );
    assert!(d.fire.is_empty());
    assert_eq!(d.skipped, 1);
    assert_eq!(d.next_run_at, Some(utc("2026-11-23T09:00:00Z")));
}

#[test]
fn catch_up_all_fires_every_missed_instant_in_order_up_to_a_cap() {
    let s = Schedule::parse("0 * * * *", "UTC", 0).unwrap();
    let d = due(
        &s,
        CatchUp::All,
        utc("2026-01-01T10:00:00Z"),
        utc("2026-01-01T12:59:59Z"),
    );
    assert_eq!(
        d.fire,
        [
            utc("2026-01-01T10:00:00Z"),
            utc("2026-01-01T11:00:00Z"),
            utc("2026-01-01T12:00:00Z")
        ]
    );
    assert_eq!(d.skipped, 0);

    let seconds = Schedule::parse("every 1s", "UTC", 0).unwrap();
    let d = due(&seconds, CatchUp::All, 1_000, 1_000_000);
    assert_eq!(d.fire.len(), ALL_MAX);
    assert_eq!(d.fire.last(), Some(&1_000_000));
    assert_eq!(d.fire.first(), Some(&(1_000_000 - 99_000)));
    assert_eq!(d.skipped, 1_000 - ALL_MAX as u64);
}

#[test]
fn catch_up_none_skips_what_was_missed() {
    let s = Schedule::parse("0 * * * *", "UTC", 0).unwrap();
    let d = due(
        &s,
        CatchUp::None,
        utc("2026-01-01T10:00:00Z"),
        utc("2026-01-01T12:30:00Z"),
    );
    assert!(d.fire.is_empty());
    assert_eq!(d.skipped, 3);
    assert_eq!(d.next_run_at, Some(utc("2026-01-01T13:00:00Z")));
}

#[test]
fn a_missed_instant_fires_once_then_nothing_is_left() {
    let at = utc("2026-01-01T10:00:00Z");
    let s = Schedule::parse("2026-01-01T10:00:00Z", "UTC", 0).unwrap();
    let d = due(&s, CatchUp::Latest, at, at + 3_600_000);
    assert_eq!(d.fire, [at]);
    assert_eq!(d.next_run_at, None);
}
