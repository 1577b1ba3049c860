//! The HELP text of every metric hearth exports at `/metrics`.
//!
//! Call `describe` once, after the recorder is installed: the Prometheus
//! exporter prints a `# HELP` line only for metrics described to it.

use metrics::Unit;

/// Every metric hearth records, with its unit and help text. A test keeps
/// this list complete against the `counter!`/`gauge!`/`histogram!` calls.
pub const METRICS: &[(Kind, &str, Unit, &str)] = &[
    (
        Kind::Counter,
        "hearth_http_requests_total",
        Unit::Count,
        "HTTP requests answered, by route template, method and status",
    ),
    (
        Kind::Histogram,
        "hearth_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request (to the response head), by route, method and status",
    ),
    (
        Kind::Counter,
        "hearth_http_panics_total",
        Unit::Count,
        "HTTP handlers that panicked and were answered 500 internal",
    ),
    (
        Kind::Counter,
        "hearth_http_refused_total",
        Unit::Count,
        "Requests refused at the door with 403, by reason: host (a Host this server does not answer to, DNS rebinding) or origin (a browser page of another origin)",
    ),
    (
        Kind::Counter,
        "hearth_auth_failures_total",
        Unit::Count,
        "Requests to /v1 refused with 401: missing, unknown or revoked bearer token",
    ),
    (
        Kind::Counter,
        "hearth_tool_calls_total",
        Unit::Count,
        "Tool calls executed, by tool and outcome",
    ),
    (
        Kind::Counter,
        "hearth_runs_accepted_total",
        Unit::Count,
        "Messages accepted as new runs",
    ),
    (
        Kind::Counter,
        "hearth_runs_refused_total",
        Unit::Count,
        "Messages refused with 503 overloaded because hearth was saturated",
    ),
    (
        Kind::Counter,
        "hearth_runs_total",
        Unit::Count,
        "Runs finished, by final status",
    ),
    (
        Kind::Gauge,
        "hearth_runs_in_flight",
        Unit::Count,
        "Runs executing in this process now",
    ),
    (
        Kind::Histogram,
        "hearth_run_duration_seconds",
        Unit::Seconds,
        "Wall time of finished runs",
    ),
    (
        Kind::Histogram,
        "hearth_llm_call_duration_seconds",
        Unit::Seconds,
        "Duration of model calls, by provider and outcome",
    ),
    (
        Kind::Gauge,
        "hearth_budget_used",
        Unit::Count,
        "Use of each budget pool in its current window (USD, tokens or requests; a scoped pool shows its most used subject)",
    ),
    (
        Kind::Gauge,
        "hearth_budget_limit",
        Unit::Count,
        "Limit of each budget pool per window (USD, tokens or requests)",
    ),
    (
        Kind::Counter,
        "hearth_compactions_total",
        Unit::Count,
        "Times the oldest turns of a thread were summarized to fit the model's window",
    ),
    (
        Kind::Counter,
        "hearth_alerts_total",
        Unit::Count,
        "Alerts queued for a chat or webhook, by event",
    ),
    (
        Kind::Counter,
        "hearth_spend_alerts_total",
        Unit::Count,
        "Times the daily spend alert threshold was crossed",
    ),
    (
        Kind::Counter,
        "hearth_store_commits_total",
        Unit::Count,
        "Store write transactions committed (one may hold many writes)",
    ),
    (
        Kind::Counter,
        "hearth_store_writes_total",
        Unit::Count,
        "Store writes committed",
    ),
    (
        Kind::Gauge,
        "hearth_outbox_pending",
        Unit::Count,
        "Chat replies queued and not yet delivered, by channel",
    ),
    (
        Kind::Counter,
        "hearth_outbox_sent_total",
        Unit::Count,
        "Chat replies delivered, by channel",
    ),
    (
        Kind::Counter,
        "hearth_outbox_failed_total",
        Unit::Count,
        "Chat replies given up (permanent platform error or older than outbox_max_age), by channel",
    ),
];

/// The kind of a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Only goes up.
    Counter,
    /// Goes up and down.
    Gauge,
    /// A distribution.
    Histogram,
}

/// Describes every metric in `METRICS` to the installed recorder.
pub fn describe() {
    for &(kind, name, unit, help) in METRICS {
        match kind {
            Kind::Counter => metrics::describe_counter!(name, unit, help),
            Kind::Gauge => metrics::describe_gauge!(name, unit, help),
            Kind::Histogram => metrics::describe_histogram!(name, unit, help),
        }
    }
}

/// The label sets a series can be known to have before anything happened.
#[derive(Debug, Default)]
pub struct KnownLabels {
    /// Enabled chat channels (the outbox's `channel`).
    pub channels: Vec<String>,
    /// Tools offered to someone (`hearth_tool_calls_total`'s `tool`).
    pub tools: Vec<String>,
}

/// Registers every counter and gauge of [`METRICS`] with its known label
/// sets, at 0 unless it already has a value, so a scrape right after start
/// shows each family (what `rate()` and `absent()`-style alerts need).
/// Idempotent: a counter is incremented by 0 and a gauge moved by 0.0, so
/// calling it on every scrape changes no value. Series whose labels cannot be
/// known ahead (an HTTP route's status, a model call's provider) appear with
/// their first event; histograms with their first observation.
pub fn prime(known: &KnownLabels) {
    let counter = |name: &'static str, labels: &[(&'static str, String)]| {
        metrics::counter!(name, labels).increment(0);
    };
    let gauge = |name: &'static str, labels: &[(&'static str, String)]| {
        metrics::gauge!(name, labels).increment(0.0);
    };
    for &(kind, name, _, _) in METRICS {
        let sets = label_sets(name, known);
        for labels in &sets {
            match kind {
                Kind::Counter => counter(name, labels),
                Kind::Gauge => gauge(name, labels),
                Kind::Histogram => {}
            }
        }
    }
}

/// The label sets of `name` known ahead; one empty set for a metric without
/// labels, none for one whose labels only its events tell.
fn label_sets(name: &str, known: &KnownLabels) -> Vec<Vec<(&'static str, String)>> {
    let each = |label: &'static str, values: &[String]| -> Vec<Vec<(&'static str, String)>> {
        values.iter().map(|v| vec![(label, v.clone())]).collect()
    };
    let fixed = |label: &'static str, values: &[&str]| -> Vec<Vec<(&'static str, String)>> {
        values
            .iter()
            .map(|v| vec![(label, (*v).to_owned())])
            .collect()
    };
    match name {
        "hearth_http_requests_total"
        | "hearth_http_request_duration_seconds"
        | "hearth_llm_call_duration_seconds"
        // Set with their real values by the budget on every scrape.
        | "hearth_budget_used"
        | "hearth_budget_limit" => Vec::new(),
        "hearth_http_refused_total" => fixed("reason", &["host", "origin"]),
        "hearth_runs_refused_total" => fixed("reason", &["overloaded"]),
        "hearth_runs_total" => fixed("status", &["succeeded", "failed", "cancelled"]),
        "hearth_alerts_total" => fixed("event", &hearth_runtime::config::ALERT_EVENTS),
        "hearth_outbox_pending" | "hearth_outbox_sent_total" | "hearth_outbox_failed_total" => {
            each("channel", &known.channels)
        }
        "hearth_tool_calls_total" => known
            .tools
            .iter()
            .flat_map(|tool| {
                ["ok", "error"].map(|outcome| {
                    vec![("tool", tool.clone()), ("outcome", outcome.to_owned())]
                })
            })
            .collect(),
        _ => vec![Vec::new()],
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::METRICS;

    fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// Every metric name recorded in the workspace's sources has HELP text.
    #[test]
    fn every_recorded_metric_is_described() {
        let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut files = Vec::new();
        rust_files(&crates, &mut files);
        let mut missing = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for macro_name in ["counter!(", "gauge!(", "histogram!("] {
                for (at, _) in text.match_indices(macro_name) {
                    let rest = text[at + macro_name.len()..].trim_start();
                    let Some(name) = rest.strip_prefix('"').and_then(|r| r.split('"').next())
                    else {
                        continue;
                    };
                    if name.starts_with("hearth_") && !METRICS.iter().any(|m| m.1 == name) {
                        missing.push(format!("{name} ({})", file.display()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "metrics without HELP text: {missing:?}");
    }
}
