//! `/ui/runs` and `/ui/runs/{id}`: the run list and one run's trace.

use axum::Extension;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use hearth_core::records::RunFilter;
use hearth_core::{RunEnvelope, RunStatus};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{self, PageResult, badge, button_form, empty, fail, page, time_str};
use super::session::{Viewer, encode};
use crate::AppState;
use crate::dto::HistoryQuery;
use crate::extract::{ApiPath, ApiQuery};
use crate::routes::{history, messages};

/// Rows on one page of the run list.
const PAGE: u32 = 50;

/// The run list's filters (all optional).
#[derive(Debug, Default, Deserialize)]
pub struct RunFilters {
    status: Option<String>,
    thread: Option<String>,
    user: Option<String>,
    source: Option<String>,
    model: Option<String>,
    /// Accepted at or after: RFC 3339, `today`, or an age (`24h`, `7d`).
    since: Option<String>,
    /// Accepted before, in the same forms.
    until: Option<String>,
    /// The cursor: runs older than this one.
    before: Option<String>,
    /// `part=rows`: only the table, for the live redraw.
    part: Option<String>,
}

impl RunFilters {
    fn query(&self) -> String {
        let mut q = Vec::new();
        for (k, v) in [
            ("status", &self.status),
            ("thread", &self.thread),
            ("user", &self.user),
            ("source", &self.source),
            ("model", &self.model),
            ("since", &self.since),
            ("until", &self.until),
        ] {
            if let Some(v) = v.as_deref().filter(|v| !v.is_empty()) {
                q.push(format!("{k}={}", encode(v)));
            }
        }
        q.join("&")
    }
}

/// The rows of runs, newest first.
pub fn run_table(runs: &[RunEnvelope]) -> Markup {
    html! {
        @if runs.is_empty() {
            (empty("No runs match."))
        } @else {
            div.scroll {
                table #runs {
                    thead { tr { th { "Run" } th { "Status" } th { "Thread" } th { "User" } th { "Source" } th { "Model" } th { "Created" } } }
                    tbody {
                        @for r in runs {
                            tr #{ "run-" (r.run_id) } {
                                td { a.mono href={ "/ui/runs/" (encode(&r.run_id)) } { (r.run_id) } }
                                td { (badge(r.status.as_str())) }
                                td { a href={ "/ui/threads/" (encode(&r.thread_key)) } { (r.thread_key) } }
                                td { (r.user_key) }
                                td { (r.source) }
                                td { (r.model.as_deref().unwrap_or("–")) }
                                td { (time_str(&r.created_at)) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The run list with its filters; new runs appear live.
pub async fn list(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(f): Query<RunFilters>,
) -> PageResult {
    let status = match f.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            fail(crate::ApiError::InvalidRequest(format!(
                "unknown status {s:?}"
            )))
        })?),
    };
    let thread_key = f.thread.clone().filter(|s| !s.is_empty());
    if let Some(t) = &thread_key {
        hearth_runtime::check_key("thread_key", t).map_err(fail)?;
    }
    let text = |v: &Option<String>| v.clone().filter(|s| !s.trim().is_empty());
    let now = hearth_core::now_ms();
    let time = |v: &Option<String>| {
        text(v)
            .map(|t| crate::routes::usage::parse_time(t.trim(), now))
            .transpose()
    };
    let filter = RunFilter {
        thread_key,
        status,
        limit: PAGE,
        before: text(&f.before),
        // A member lists their own runs only, whatever the form says.
        user_key: viewer.member().map(str::to_owned).or_else(|| text(&f.user)),
        source: text(&f.source),
        model: text(&f.model),
        since: time(&f.since).map_err(fail)?,
        until: time(&f.until).map_err(fail)?,
    };
    let runs = st.runtime.list_runs(&filter).await.map_err(fail)?;
    // The cursor of the next page is the last run read, kept or not.
    let next = (runs.len() >= PAGE as usize)
        .then(|| runs.last().map(|r| r.run_id.clone()))
        .flatten();
    let older = next.map(|n| match f.query() {
        q if q.is_empty() => format!("/ui/runs?before={}", encode(&n)),
        q => format!("/ui/runs?{q}&before={}", encode(&n)),
    });
    let table = html! {
        (run_table(&runs))
        @if let Some(o) = &older { p { a rel="next" href=(o) { "Older runs" } } }
    };
    if f.part.as_deref() == Some("rows") {
        return Ok(layout::Fragment(table).into_response());
    }
    let src = match f.query() {
        q if q.is_empty() => "/ui/runs?part=rows".to_owned(),
        q => format!("/ui/runs?{q}&part=rows"),
    };
    let statuses = [
        "",
        "queued",
        "running",
        "awaiting_confirmation",
        "succeeded",
        "failed",
        "cancelled",
    ];
    let body = html! {
        form.filters method="get" action="/ui/runs" {
            label { "Status "
                select name="status" {
                    @for s in statuses {
                        option value=(s) selected[f.status.as_deref().unwrap_or("") == s] { @if s.is_empty() { "any" } @else { (s) } }
                    }
                }
            }
            label { "Thread " input type="text" name="thread" value=[f.thread.as_deref()]; }
            label { "User " input type="text" name="user" value=[f.user.as_deref()]; }
            label { "Source " input type="text" name="source" value=[f.source.as_deref()]; }
            label { "Model " input type="text" name="model" value=[f.model.as_deref()] placeholder="provider/model"; }
            label { "Since " input type="text" name="since" value=[f.since.as_deref()] placeholder="24h, 7d, today"; }
            label { "Until " input type="text" name="until" value=[f.until.as_deref()] placeholder="RFC 3339 or age"; }
            button type="submit" { "Filter" }
        }
        @if f.before.is_some() {
            p.hint { (PAGE) " runs of the filter, older than " span.mono { (f.before.as_deref().unwrap_or("")) } ". " a href="/ui/runs" { "Newest runs" } }
            (table)
        } @else {
            p.hint { "The newest " (PAGE) " runs of the filter; this list updates itself." }
            div #live data-src=(src) { (table) }
        }
    };
    let live = f.before.is_none().then_some("runs");
    Ok(page(&viewer, "/ui/runs", "Runs", live, body).into_response())
}

fn tokens_cell(tokens: Option<&serde_json::Value>) -> Markup {
    let num = |k: &str| {
        tokens
            .and_then(|t| t.get(k))
            .and_then(serde_json::Value::as_f64)
    };
    html! {
        @if let Some(i) = num("input_tokens") { (i) " in" }
        @if let Some(o) = num("output_tokens") { " / " (o) " out" }
        @if tokens.is_none() { "–" }
    }
}

fn cost_cell(tokens: Option<&serde_json::Value>) -> String {
    tokens
        .and_then(|t| t.get("cost_usd"))
        .and_then(serde_json::Value::as_f64)
        .map_or_else(|| "–".to_owned(), layout::usd)
}

fn latency(started: &str, finished: Option<&str>) -> String {
    let parse = |s: &str| s.parse::<jiff::Timestamp>().ok();
    match (parse(started), finished.and_then(parse)) {
        (Some(a), Some(b)) => {
            let ms = b.as_millisecond() - a.as_millisecond();
            if ms < 1000 {
                format!("{ms} ms")
            } else {
                format!("{:.1} s", ms as f64 / 1000.0)
            }
        }
        _ => "–".into(),
    }
}

/// Each tool call's arguments by step index, as the engine journaled them:
/// with every secret the scanner finds already replaced by its
/// `[REDACTED:<kind>:<tag>]` placeholder before the call ran (the tool got
/// the same). The API's trace leaves them out; the run's own page, which
/// only its owner or an operator opens, shows them.
async fn tool_arguments(
    st: &AppState,
    run_id: &str,
) -> Result<std::collections::BTreeMap<u32, String>, crate::ApiError> {
    let steps = st.runtime.trace(run_id).await?;
    Ok(steps
        .into_iter()
        .filter(|s| s.kind == hearth_core::records::StepKind::Tool)
        .filter_map(|s| {
            let raw = s.payload.get("arguments")?.as_str()?.to_owned();
            // Pretty when it is JSON; as journaled otherwise.
            let shown = serde_json::from_str::<serde_json::Value>(&raw)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or(raw);
            Some((s.index, shown))
        })
        .collect())
}

/// One run: its envelope, trace timeline, messages and Cancel.
pub async fn detail(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(id): ApiPath<String>,
    Query(part): Query<Part>,
) -> PageResult {
    let run = messages::get_run(State(st.clone()), ApiPath(id.clone()))
        .await
        .map_err(fail)?
        .0;
    if !viewer.may_see(&run.user_key) {
        return Err(super::session::forbidden_run());
    }
    let trace = messages::run_trace(State(st.clone()), ApiPath(id.clone()))
        .await
        .map_err(fail)?
        .0;
    let arguments = tool_arguments(&st, &id).await.map_err(fail)?;
    let hist = history::history(
        State(st),
        ApiPath(run.thread_key.clone()),
        ApiQuery(HistoryQuery {
            limit: Some(100),
            before: None,
        }),
    )
    .await
    .map_err(fail)?
    .0;
    let mut messages: Vec<_> = hist
        .messages
        .into_iter()
        .filter(|m| m.run_id.as_deref() == Some(id.as_str()))
        .collect();
    messages.reverse();
    let live = html! {
        dl.facts {
            dt { "Run" } dd.mono #run-id { (run.run_id) }
            dt { "Status" } dd #run-status { (badge(run.status.as_str())) }
            dt { "Thread" } dd { a href={ "/ui/threads/" (encode(&run.thread_key)) } { (run.thread_key) } }
            dt { "User" } dd { (run.user_key) }
            dt { "Source" } dd { (run.source) }
            dt { "Model" } dd { (run.model.as_deref().unwrap_or("–"))
                @if let Some(r) = &run.requested_model { " (asked for " (r) ")" } }
            @if let Some(parent) = &run.parent_run_id {
                dt { "Sub-agent of" } dd { a.mono href={ "/ui/runs/" (encode(parent)) } { (parent) } }
            }
            dt { "Created" } dd { (time_str(&run.created_at)) }
            dt { "Updated" } dd { (time_str(&run.updated_at)) }
        }
        @if let Some(e) = &run.error {
            p.error role="status" { strong { (e.code) } ": " (e.message) }
        }
        @if let Some(c) = &run.confirmation {
            p.notice { "Waiting for confirmation of " strong { (c.tool) } ": " (c.summary) " — "
                a href="/ui/confirmations" { "answer it" } }
        }
        @if !run.status.is_terminal() {
            (button_form(&viewer, &format!("/ui/runs/{}/cancel", encode(&run.run_id)), "Cancel run", "danger"))
        }
        h2 { "Trace" }
        @if trace.steps.is_empty() {
            (empty("No steps yet."))
        } @else {
            ol.timeline #trace {
                @for s in &trace.steps {
                    li class={ "step k-" (s.kind) } {
                        span.kind { (s.kind) }
                        strong { (s.name) }
                        " " (badge(&s.status))
                        span.meta {
                            span title="latency" { (latency(&s.started_at, s.finished_at.as_deref())) }
                            span title="tokens" { (tokens_cell(s.tokens.as_ref())) }
                            span title="cost" { (cost_cell(s.tokens.as_ref())) }
                        }
                        @if let Some(a) = arguments.get(&s.index) {
                            details.args {
                                summary { "Arguments" }
                                pre.arguments { (a) }
                            }
                        }
                        @if let Some(d) = &s.detail {
                            pre.detail { (serde_json::to_string_pretty(d).unwrap_or_default()) }
                        }
                    }
                }
            }
        }
        @if !run.children.is_empty() {
            h2 { "Sub-agents" }
            ul #children {
                @for c in &run.children {
                    li {
                        a.mono href={ "/ui/runs/" (encode(&c.run_id)) } { (c.run_id) }
                        " " (badge(c.status.as_str()))
                        " " (c.model.as_deref().unwrap_or("–")) " · " (c.thread_key)
                    }
                }
            }
        }
        h2 { "Messages" }
        @if messages.is_empty() {
            (empty("No stored messages for this run (incognito, or not written yet)."))
        } @else {
            ol.messages {
                @for m in &messages {
                    li class={ "msg r-" (m.role) } {
                        span.role { (m.role) }
                        @if m.compacted { span.badge { "compacted" } }
                        p { (m.text.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
        @if let Some(o) = &run.output {
            h2 { "Answer" }
            p.answer { (o.text) }
        }
    };
    if part.part.as_deref() == Some("live") {
        return Ok(layout::Fragment(live).into_response());
    }
    let src = format!("/ui/runs/{}?part=live", encode(&id));
    let body = html! { div #live data-src=(src) data-run=(id) { (live) } };
    Ok(page(&viewer, "/ui/runs", &format!("Run {id}"), Some("run"), body).into_response())
}

/// `?part=live`: only the part a live redraw replaces.
#[derive(Debug, Default, Deserialize)]
pub struct Part {
    part: Option<String>,
}

/// The run's events (as `/v1/runs/{id}/events`), for a thread page
/// streaming an answer.
pub async fn events(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
) -> Response {
    if let Err(page) = owned(&st, &viewer, &id).await {
        return page;
    }
    match messages::run_events(State(st), ApiPath(id), headers).await {
        Ok(sse) => sse.into_response(),
        Err(e) => fail(e),
    }
}

/// Cancels the run, then shows it.
pub async fn cancel(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(id): ApiPath<String>,
) -> PageResult {
    owned(&st, &viewer, &id).await?;
    let _ = messages::cancel_run(State(st), ApiPath(id.clone()))
        .await
        .map_err(fail)?;
    Ok(Redirect::to(&format!("/ui/runs/{}", encode(&id))).into_response())
}

/// Ok when the viewer may see run `id` (a member: only their own).
async fn owned(st: &AppState, viewer: &Viewer, id: &str) -> Result<(), Response> {
    if viewer.member().is_none() {
        return Ok(());
    }
    let run = st.runtime.get_run(id).await.map_err(fail)?;
    if viewer.may_see(&run.user_key) {
        Ok(())
    } else {
        Err(super::session::forbidden_run())
    }
}
