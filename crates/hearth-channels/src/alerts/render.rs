//! What an alert says: one line per event (ids and numbers, never message
//! text), the chat text around it, and the webhook's JSON body.

use std::time::Duration;

use hearth_runtime::Notice;
use serde_json::{Value, json};

fn field<'a>(data: &'a Value, key: &str) -> &'a str {
    data.get(key).and_then(Value::as_str).unwrap_or("?")
}

fn number(data: &Value, key: &str) -> String {
    match data.get(key).and_then(Value::as_f64) {
        Some(n) if n.fract() == 0.0 && n.abs() < 1e15 => format!("{n:.0}"),
        Some(n) => format!("{n:.2}"),
        None => "?".to_owned(),
    }
}

/// One sentence saying what happened.
pub(crate) fn summary(n: &Notice) -> String {
    let d = &n.data;
    match n.event.as_str() {
        "run.failed" => format!(
            "run {} on {} failed ({})",
            field(d, "run_id"),
            field(d, "thread_key"),
            field(d, "code")
        ),
        "job.failed" => format!(
            "job {} failed: run {} on {} ({})",
            field(d, "job_id"),
            field(d, "run_id"),
            field(d, "thread_key"),
            field(d, "code")
        ),
        "budget.threshold" => {
            let subject = d
                .get("subject")
                .and_then(Value::as_str)
                .map(|s| format!(" for {s}"))
                .unwrap_or_default();
            format!(
                "budget pool {}{subject} passed {}% ({} of {} {}); resets {}",
                field(d, "pool"),
                number(d, "percent"),
                number(d, "used"),
                number(d, "limit"),
                field(d, "kind"),
                field(d, "resets_at")
            )
        }
        "spend.daily_exceeded" => format!(
            "today's estimated spend, ${}, reached the alert threshold of ${}",
            number(d, "spent_usd"),
            number(d, "threshold_usd")
        ),
        "channel.degraded" => format!(
            "channel {} is degraded: {}",
            field(d, "channel"),
            field(d, "error")
        ),
        "outbox.failed" => format!(
            "a {} to {} {} could not be delivered: {}",
            field(d, "kind"),
            field(d, "channel"),
            field(d, "target"),
            field(d, "error")
        ),
        other => format!("{other}: {d}"),
    }
}

fn held_back(suppressed: u64, interval: Duration) -> String {
    let mins = interval.as_secs() / 60;
    let span = if mins >= 1 {
        format!("{mins} min")
    } else {
        format!("{} s", interval.as_secs())
    };
    match suppressed {
        0 => String::new(),
        1 => format!("\n(1 more like it held back; at most one alert per {span})"),
        n => format!("\n({n} more like it held back; at most one alert per {span})"),
    }
}

/// The text a chat gets.
pub(crate) fn chat_text(n: &Notice, suppressed: u64, interval: Duration) -> String {
    format!(
        "⚠️ hearth alert ({}): {}{}",
        n.event,
        summary(n),
        held_back(suppressed, interval)
    )
}

/// The webhook's body: `{"event","at","summary","data","suppressed"}`.
pub(crate) fn webhook_body(n: &Notice, suppressed: u64) -> String {
    json!({
        "event": n.event,
        "at": hearth_core::rfc3339(n.at),
        "summary": summary(n),
        "data": n.data,
        "suppressed": suppressed,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(event: &str, data: Value) -> Notice {
        Notice {
            event: event.into(),
            at: 1_700_000_000_000,
            data,
        }
    }

    #[test]
    fn every_event_reads_as_a_sentence_with_its_numbers() {
        let cases = [
            (
                notice(
                    "run.failed",
                    json!({"run_id": "r1", "thread_key": "telegram:chat:5", "code": "provider_error"}),
                ),
                "run r1 on telegram:chat:5 failed (provider_error)",
            ),
            (
                notice(
                    "budget.threshold",
                    json!({"pool": "cloud", "kind": "cost_usd", "subject": null, "percent": 80,
                           "used": 16.5, "limit": 20.0, "resets_at": "2026-12-01T00:00:00Z"}),
                ),
                "budget pool cloud passed 80% (16.50 of 20 cost_usd); resets 2026-12-01T00:00:00Z",
            ),
            (
                notice(
                    "spend.daily_exceeded",
                    json!({"spent_usd": 5.25, "threshold_usd": 5.0}),
                ),
                "today's estimated spend, $5.25, reached the alert threshold of $5",
            ),
            (
                notice(
                    "channel.degraded",
                    json!({"channel": "discord", "error": "HTTP 502"}),
                ),
                "channel discord is degraded: HTTP 502",
            ),
            (
                notice(
                    "outbox.failed",
                    json!({"kind": "message", "channel": "telegram", "target": "42", "error": "Forbidden: bot was blocked by the user"}),
                ),
                "a message to telegram 42 could not be delivered: Forbidden: bot was blocked by the user",
            ),
            (
                notice(
                    "job.failed",
                    json!({"job_id": "j1", "run_id": "r2", "thread_key": "api:x", "code": "budget_exceeded"}),
                ),
                "job j1 failed: run r2 on api:x (budget_exceeded)",
            ),
        ];
        for (n, want) in cases {
            assert_eq!(summary(&n), want);
        }
    }

    #[test]
    fn the_body_and_the_chat_text_count_what_was_held_back() {
        let n = notice(
            "channel.degraded",
            json!({"channel": "slack", "error": "x"}),
        );
        let body: Value = serde_json::from_str(&webhook_body(&n, 3)).unwrap();
        assert_eq!(body["event"], "channel.degraded");
        assert_eq!(body["at"], "2023-11-14T22:13:20.000Z");
        assert_eq!(body["suppressed"], 3);
        assert_eq!(body["data"]["channel"], "slack");
        assert_eq!(body["summary"], "channel slack is degraded: x");
        let text = chat_text(&n, 3, Duration::from_secs(600));
        assert!(text.contains("3 more like it held back"), "{text}");
        assert!(text.contains("10 min"), "{text}");
        assert!(!chat_text(&n, 0, Duration::from_secs(600)).contains("held back"));
    }
}
