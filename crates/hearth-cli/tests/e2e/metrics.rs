//! `/metrics` right after start: every counter and gauge family is there at
//! 0 with its known label sets, before anything happened, as Prometheus
//! users expect of `rate()` and alert rules.

use hearth_server::metrics::{Kind, METRICS};
use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_telegram::FakeTelegram;

use crate::harness::{Hearth, fake_config};

const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";

/// The value of the series `series` (name and labels as rendered), if shown.
fn value<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
}

#[tokio::test]
async fn every_counter_and_gauge_is_exported_at_zero_from_start() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let config = format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         allowed_users = [1001]\npoll_timeout_secs = 5\n",
        fake_config(&fake.base_url()),
        tg.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(dir.path(), Some(&config), &[("TG_TOKEN", TOKEN)]).await;
    let (status, body) = h.get("/metrics").await;
    assert_eq!(status, 200);
    let text = body.as_str().unwrap();

    // Labels that depend on what happens (a route's status, a provider) or
    // carry real values (budget pools) are not primed; histograms show with
    // their first observation.
    let event_labelled = [
        "hearth_http_requests_total",
        "hearth_budget_used",
        "hearth_budget_limit",
    ];
    let mut missing = Vec::new();
    for &(kind, name, _, _) in METRICS {
        if kind == Kind::Histogram || event_labelled.contains(&name) {
            continue;
        }
        let shown = text
            .lines()
            .any(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']));
        if !shown {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "not exported at start: {missing:?}\n{text}"
    );

    for series in [
        "hearth_outbox_pending{channel=\"telegram\"}",
        "hearth_outbox_failed_total{channel=\"telegram\"}",
        "hearth_outbox_sent_total{channel=\"telegram\"}",
        "hearth_runs_total{status=\"failed\"}",
        "hearth_runs_refused_total{reason=\"overloaded\"}",
        "hearth_http_refused_total{reason=\"origin\"}",
        "hearth_alerts_total{event=\"run.failed\"}",
        "hearth_tool_calls_total{tool=\"memory_search\",outcome=\"error\"}",
        "hearth_runs_in_flight",
        "hearth_auth_failures_total",
        "hearth_compactions_total",
    ] {
        assert_eq!(value(text, series), Some("0"), "{series} at 0:\n{text}");
    }
}
