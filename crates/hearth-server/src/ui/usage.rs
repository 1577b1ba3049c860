//! `/ui/usage` (a bar chart per day over the last 30 days, each bar split
//! by model, and tables by model and provider) and `/ui/usage.csv`
//! (exactly the rows of `/v1/usage` for the same query). The page's window
//! starts at a UTC midnight, so the store answers it from its daily
//! rollup alone, without reading a single call.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::response::IntoResponse;
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{PageResult, empty, fail, page, usd};
use super::session::Viewer;
use crate::AppState;
use crate::dto::{UsageParams, UsageRow};
use crate::extract::ApiQuery;
use crate::routes::usage::usage;

/// Days the chart shows, today included.
const DAYS: i64 = 30;

/// The first millisecond of the chart's window: UTC midnight `DAYS - 1`
/// days before today's.
fn window_start(now_ms: i64) -> i64 {
    let day = 86_400_000;
    now_ms - now_ms.rem_euclid(day) - (DAYS - 1) * day
}

/// A runtime usage report as `/v1/usage` gives it (cost rounded alike).
fn api_row(r: hearth_runtime::UsageReport) -> UsageRow {
    UsageRow {
        key: r.key,
        calls: r.calls,
        input_tokens: r.input_tokens,
        output_tokens: r.output_tokens,
        cached_tokens: r.cached_tokens,
        cost_usd: r.cost_usd.map(|c| (c * 1e9).round() / 1e9),
        untracked_calls: r.untracked_calls,
    }
}

async fn rows(
    st: &AppState,
    since: Option<&str>,
    until: Option<&str>,
    group_by: Option<&str>,
) -> Result<Vec<UsageRow>, crate::ApiError> {
    let q = UsageParams {
        since: since.map(str::to_owned),
        until: until.map(str::to_owned),
        group_by: group_by.map(str::to_owned),
    };
    Ok(usage(State(st.clone()), ApiQuery(q)).await?.0.rows)
}

/// `?metric=calls|tokens|cost` of the chart.
#[derive(Debug, Default, Deserialize)]
pub struct Metric {
    metric: Option<String>,
}

fn value(r: &UsageRow, metric: &str) -> f64 {
    match metric {
        "tokens" => (r.input_tokens + r.output_tokens) as f64,
        "cost" => r.cost_usd.unwrap_or(0.0),
        _ => r.calls as f64,
    }
}

/// An SVG bar chart, one bar per day scaled to the largest, each bar a
/// stack of its models' segments (`rect.bar`, coloured by the model's
/// place in the legend).
fn chart(days: &[UsageRow], splits: &[Vec<UsageRow>], models: &[String], metric: &str) -> Markup {
    let (w, h, pad) = (600.0_f64, 200.0_f64, 20.0_f64);
    let max = days
        .iter()
        .map(|r| value(r, metric))
        .fold(0.0, f64::max)
        .max(1e-12);
    let slot = (w - pad) / days.len().max(1) as f64;
    let label = match metric {
        "tokens" => "tokens",
        "cost" => "cost (USD)",
        _ => "model calls",
    };
    let colour = |model: &str| models.iter().position(|m| m == model).unwrap_or(0) % SERIES;
    let shown = |v: f64| {
        if metric == "cost" {
            usd(v)
        } else {
            v.to_string()
        }
    };
    html! {
        svg.chart #usage-chart viewBox={ "0 0 " (w) " " (h + pad) } role="img" aria-labelledby="chart-title" {
            title #chart-title { (label) " per day by model, last 30 days" }
            line.axis x1=(pad) y1=(h) x2=(w) y2=(h) {}
            @for (i, (day, split)) in days.iter().zip(splits).enumerate() {
                g.day data-day=(day.key) {
                    @let mut top = h;
                    @for m in split {
                        @let v = value(m, metric);
                        @let bh = (v / max * (h - pad)).max(1.0);
                        @let y = { top -= bh; top };
                        rect class={ "bar s" (colour(&m.key)) } data-model=(m.key)
                            x=(pad + i as f64 * slot + 1.0) y=(y) width=((slot - 2.0).max(1.0)) height=(bh) {
                            title { (day.key) " " (m.key) ": " (shown(v)) }
                        }
                    }
                }
            }
            text.label x=(pad) y=(h + pad - 4.0) { (days.first().map_or("", |r| r.key.as_str())) }
            text.label x=(w) y=(h + pad - 4.0) text-anchor="end" { (days.last().map_or("", |r| r.key.as_str())) }
        }
        ul.legend #usage-legend {
            @for (i, m) in models.iter().enumerate() {
                li { svg.swatch viewBox="0 0 10 10" aria-hidden="true" { rect class={ "bar s" (i % SERIES) } width="10" height="10" {} } " " (m) }
            }
        }
    }
}

/// Colours the chart's series cycle through (`.s0` to `.s5` in the CSS).
const SERIES: usize = 6;

fn table(id: &str, title: &str, rows: &[UsageRow]) -> Markup {
    html! {
        h2 { (title) }
        @if rows.is_empty() { (empty("No model calls in this period.")) } @else {
            div.scroll { table id=(id) {
                thead { tr { th { "Key" } th { "Calls" } th { "Input tokens" } th { "Output tokens" } th { "Cached" } th { "Cost" } } }
                tbody { @for r in rows { tr {
                    td { (r.key) } td.num { (r.calls) } td.num { (r.input_tokens) } td.num { (r.output_tokens) }
                    td.num { (r.cached_tokens) } td.num { (r.cost_usd.map_or_else(|| "–".to_owned(), usd)) }
                } } }
            } }
        }
    }
}

/// The rows by model (`<provider>/<model>`) summed by provider; a cost is
/// known only when every model's is.
fn by_provider(models: &[UsageRow]) -> Vec<UsageRow> {
    let mut out: Vec<UsageRow> = Vec::new();
    for m in models {
        let provider = m.key.split_once('/').map_or(m.key.as_str(), |(p, _)| p);
        let row = match out.iter_mut().find(|r| r.key == provider) {
            Some(r) => r,
            None => {
                out.push(UsageRow {
                    key: provider.to_owned(),
                    calls: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    cached_tokens: 0,
                    cost_usd: Some(0.0),
                    untracked_calls: 0,
                });
                let last = out.len() - 1;
                &mut out[last]
            }
        };
        row.calls += m.calls;
        row.input_tokens += m.input_tokens;
        row.output_tokens += m.output_tokens;
        row.cached_tokens += m.cached_tokens;
        row.untracked_calls += m.untracked_calls;
        row.cost_usd = row.cost_usd.zip(m.cost_usd).map(|(a, b)| a + b);
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// `GET /ui/usage`.
pub async fn show(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(m): Query<Metric>,
) -> PageResult {
    let metric = match m.metric.as_deref() {
        Some("tokens") => "tokens",
        Some("cost") => "cost",
        _ => "calls",
    };
    let since = window_start(hearth_core::now_ms());
    let query = |group_by| hearth_core::records::UsageQuery {
        since: Some(since),
        until: None,
        group_by,
    };
    let (days, splits): (Vec<UsageRow>, Vec<Vec<UsageRow>>) = st
        .runtime
        .usage_by_model(&query(hearth_core::records::UsageGroup::Day))
        .await
        .map_err(fail)?
        .into_iter()
        .map(|(day, split)| (api_row(day), split.into_iter().map(api_row).collect()))
        .collect();
    let models: Vec<UsageRow> = st
        .runtime
        .usage(&query(hearth_core::records::UsageGroup::Model))
        .await
        .map_err(fail)?
        .into_iter()
        .map(api_row)
        .collect();
    let names: Vec<String> = models.iter().map(|m| m.key.clone()).collect();
    let since_text = hearth_core::rfc3339(since);
    // Each provider's row is the sum of its models' (one query less).
    let providers = by_provider(&models);
    let body = html! {
        nav.tabs aria-label="Chart metric" {
            @for (k, l) in [("calls", "Calls"), ("tokens", "Tokens"), ("cost", "Cost")] {
                @if k == metric { a href={ "/ui/usage?metric=" (k) } aria-current="page" { (l) } }
                @else { a href={ "/ui/usage?metric=" (k) } { (l) } }
            }
        }
        @if days.is_empty() { (empty("No model calls in the last 30 days.")) } @else { (chart(&days, &splits, &names, metric)) }
        p { "Export as CSV: "
            a href={ "/ui/usage.csv?since=" (since_text) "&group_by=day" } { "by day" } ", "
            a href={ "/ui/usage.csv?since=" (since_text) "&group_by=model" } { "by model" } ", "
            a href={ "/ui/usage.csv?since=" (since_text) "&group_by=provider" } { "by provider" } "." }
        (table("by-model", "By model", &models))
        (table("by-provider", "By provider", &providers))
        (table("by-day", "By day", &days))
    };
    Ok(page(&viewer, "/ui/usage", "Usage", None, body).into_response())
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// `GET /ui/usage.csv?since=&until=&group_by=`: the rows of `/v1/usage`
/// for the same query, one line each, with a header line.
pub async fn csv(State(st): State<AppState>, ApiQuery(q): ApiQuery<UsageParams>) -> PageResult {
    let rows = rows(
        &st,
        q.since.as_deref(),
        q.until.as_deref(),
        q.group_by.as_deref(),
    )
    .await
    .map_err(fail)?;
    let mut out = String::from(
        "key,calls,input_tokens,output_tokens,cached_tokens,cost_usd,untracked_calls\n",
    );
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            field(&r.key),
            r.calls,
            r.input_tokens,
            r.output_tokens,
            r.cached_tokens,
            r.cost_usd.map(|c| c.to_string()).unwrap_or_default(),
            r.untracked_calls
        ));
    }
    Ok((
        [
            (CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                CONTENT_DISPOSITION,
                "attachment; filename=\"hearth-usage.csv\"",
            ),
        ],
        out,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, calls: u64, cost: Option<f64>) -> UsageRow {
        UsageRow {
            key: key.into(),
            calls,
            input_tokens: calls * 10,
            output_tokens: calls,
            cached_tokens: 0,
            cost_usd: cost,
            untracked_calls: 0,
        }
    }

    #[test]
    fn providers_sum_their_models_and_an_unknown_cost_stays_unknown() {
        let rows = by_provider(&[
            row("openai/a", 2, Some(0.5)),
            row("fake/x", 1, Some(1.0)),
            row("openai/b", 3, Some(0.25)),
            row("fake/y", 4, None),
        ]);
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.key.as_str(), r.calls, r.input_tokens, r.cost_usd))
            .collect();
        assert_eq!(got, [("fake", 5, 50, None), ("openai", 5, 50, Some(0.75))]);
    }
}
