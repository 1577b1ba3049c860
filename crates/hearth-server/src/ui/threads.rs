//! `/ui/threads` and `/ui/threads/{key}`: threads, a thread's history and
//! settings, and a form to send to it whose answer streams in.

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::{Extension, Json};
use hearth_core::mode::RUN_PLAN_PREFIX;
use hearth_core::{DeliveryMode, Inbound, PermissionMode, ThreadKey, UserKey};
use hearth_runtime::ModeSetter;
use maud::html;
use serde::Deserialize;

use super::layout::{self, PageResult, button_form, csrf_field, empty, fail, page, time, time_str};
use super::session::{Viewer, encode, form_field};
use crate::AppState;
use crate::dto::HistoryQuery;
use crate::extract::{ApiPath, ApiQuery};
use crate::routes::history;

/// Threads listed at once.
const THREADS: u32 = 100;
/// Messages on one page of a thread's history.
const MESSAGES: u32 = 50;

/// `?q=&after=&before=`: a search of every thread (see [`super::search`]).
#[derive(Debug, Default, Deserialize)]
pub struct Search {
    q: Option<String>,
    after: Option<String>,
    before: Option<i64>,
}

/// The most recently active threads, or a search of every thread.
pub async fn list(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(s): Query<Search>,
) -> PageResult {
    let q = s.q.unwrap_or_default();
    let q = q.trim();
    let form = html! {
        form.filters method="get" action="/ui/threads" role="search" {
            label { "Search threads by key or words " input type="search" name="q" value=(q); }
            button type="submit" { "Search" }
        }
    };
    if !q.is_empty() {
        let query = super::search::Query {
            q,
            after: s.after.as_deref(),
            before: s.before,
        };
        let found = super::search::results(&st, &viewer, &query)
            .await
            .map_err(fail)?;
        let body = html! { (form) (found) };
        return Ok(page(&viewer, "/ui/threads", "Threads", None, body).into_response());
    }
    let threads = match viewer.member() {
        None => st.runtime.list_threads(THREADS).await.map_err(fail)?,
        Some(user) => member_threads(&st, user).await.map_err(fail)?,
    };
    let shown: Vec<_> = threads.iter().collect();
    let body = html! {
        (form)
        form.filters method="get" action="/ui/threads/open" {
            label { "Open or start thread " input type="text" name="key" placeholder="api:my-thread" required; }
            button type="submit" { "Open" }
        }
        @if shown.is_empty() {
            (empty("No threads yet. Send a message to start one."))
        } @else {
            div.scroll { table {
                thead { tr { th { "Thread" } th { "Runs" } th { "Last run" } } }
                tbody { @for t in shown {
                    tr {
                        td { a href={ "/ui/threads/" (encode(&t.thread_key)) } { (t.thread_key) } }
                        td.num { (t.runs) }
                        td { (time(t.last_run_at)) }
                    }
                } }
            } }
        }
    };
    Ok(page(&viewer, "/ui/threads", "Threads", None, body).into_response())
}

/// `/ui/threads/open?key=`: the thread page of a typed key.
pub async fn open(Query(k): Query<OpenKey>) -> PageResult {
    Ok(Redirect::to(&format!("/ui/threads/{}", encode(k.key.trim()))).into_response())
}

/// `?key=` of the open form.
#[derive(Debug, Deserialize)]
pub struct OpenKey {
    key: String,
}

/// `?before=` of the history.
#[derive(Debug, Default, Deserialize)]
pub struct Page {
    before: Option<i64>,
    part: Option<String>,
}

/// A thread: settings, history (a page), and the send form.
pub async fn detail(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(key): ApiPath<String>,
    Query(p): Query<Page>,
) -> PageResult {
    let tk = ThreadKey::new(key.clone()).map_err(fail)?;
    owns(&st, &viewer, &key).await?;
    let settings = st.runtime.thread_runtime(&tk).await.map_err(fail)?;
    let mode = st.runtime.thread_mode(&tk).await.map_err(fail)?;
    let models: Vec<String> = st
        .runtime
        .models()
        .models
        .iter()
        .map(|m| m.model.to_string())
        .collect();
    let hist = history::history(
        State(st),
        ApiPath(key.clone()),
        ApiQuery(HistoryQuery {
            limit: Some(MESSAGES),
            before: p.before,
        }),
    )
    .await
    .map_err(fail)?
    .0;
    let enc = encode(&key);
    let mut msgs = hist.messages;
    msgs.reverse();
    let history = html! {
        @if let Some(b) = &hist.next_before {
            p { a href={ "/ui/threads/" (enc) "?before=" (b) } { "Older messages" } }
        }
        @if msgs.is_empty() {
            (empty("No messages on this page."))
        } @else {
            ol.messages #history {
                @for m in &msgs {
                    li class={ "msg r-" (m.role) @if m.compacted { " compacted" } } {
                        span.role { (m.role) }
                        @if m.compacted { " " span.badge title="replaced by a summary in what the model sees" { "compacted" } }
                        " " (time_str(&m.created_at))
                        @if let Some(r) = &m.run_id { " · " a.mono href={ "/ui/runs/" (encode(r)) } { (r) } }
                        p { (m.text.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    };
    if p.part.as_deref() == Some("history") {
        return Ok(layout::Fragment(history).into_response());
    }
    let body = html! {
        dl.facts {
            dt { "Model" } dd { (settings.model) }
            dt { "Thinking" } dd { (settings.thinking) }
            dt { "Permission mode" } dd #mode {
                (mode.mode)
                @if let Some(at) = mode.expires_at { " until " (time_str(&hearth_core::rfc3339(at))) }
            }
            dt { "Incognito" } dd { @if settings.incognito { "on" } @else { "off" } }
            dt { "Messages" } dd { (settings.message_count) }
        }
        @if viewer.member().is_none() {
        form.filters method="post" action={ "/ui/threads/" (enc) "/settings" } {
            (csrf_field(&viewer))
            label { "Model "
                select name="model" {
                    @for m in &models {
                        option value=(m) selected[*m == settings.model] { (m) }
                    }
                }
            }
            label { "Thinking "
                select name="thinking" {
                    @for l in ["off", "low", "medium", "high"] {
                        option value=(l) selected[l == settings.thinking] { (l) }
                    }
                }
            }
            label { "Permission mode "
                select name="mode" {
                    @for m in PermissionMode::ALL {
                        option value=(m.as_str()) selected[m == mode.mode] { (m.as_str()) }
                    }
                }
            }
            button type="submit" { "Save settings" }
        }
        @if mode.mode == PermissionMode::Plan {
            form.filters method="post" action={ "/ui/threads/" (enc) "/run-plan" } {
                (csrf_field(&viewer))
                label { "Then work in mode "
                    select name="mode" {
                        @for m in [PermissionMode::Ask, PermissionMode::AcceptEdits, PermissionMode::Auto] {
                            option value=(m.as_str()) { (m.as_str()) }
                        }
                    }
                }
                button type="submit" { "Run the plan" }
            }
        }
        (button_form(&viewer, &format!("/ui/threads/{enc}/session"), "New session", ""))
        }
        h2 { "History" }
        div #history-box data-src={ "/ui/threads/" (enc) "?part=history" } { (history) }
        h2 { "Send" }
        form #send method="post" action={ "/ui/threads/" (enc) "/send" } {
            (csrf_field(&viewer))
            label for="text" { "Message" }
            textarea #text name="text" rows="3" required {}
            button type="submit" { "Send" }
        }
        div #answer aria-live="polite" {}
    };
    Ok(page(&viewer, "/ui/threads", &format!("Thread {key}"), None, body).into_response())
}

/// Sends a message to the thread as the viewer; a script gets the run's
/// id as JSON and streams the answer, a plain form goes to the run's page.
pub async fn send(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(key): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> PageResult {
    owns(&st, &viewer, &key).await?;
    let text = form_field(&body, "text").unwrap_or_default();
    if text.trim().is_empty() {
        return Err(layout::status_page(
            StatusCode::BAD_REQUEST,
            "Refused",
            "Write a message to send.",
        ));
    }
    let env = st
        .runtime
        .ingest(Inbound {
            source: "api".into(),
            thread_key: ThreadKey::new(key).map_err(fail)?,
            user_key: UserKey::new(viewer.caller.operator_key()).map_err(fail)?,
            text,
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .map_err(fail)?;
    if headers.contains_key("x-csrf-token") {
        return Ok(Json(serde_json::json!({ "run_id": env.run_id })).into_response());
    }
    Ok(Redirect::to(&format!("/ui/runs/{}", encode(&env.run_id))).into_response())
}

/// Starts a new session on the thread (cancels its run, clears history).
pub async fn new_session(State(st): State<AppState>, ApiPath(key): ApiPath<String>) -> PageResult {
    let tk = ThreadKey::new(key.clone()).map_err(fail)?;
    st.runtime.new_session(&tk).await.map_err(fail)?;
    Ok(Redirect::to(&format!("/ui/threads/{}", encode(&key))).into_response())
}

/// Sets the thread's model and thinking level (as `PUT
/// /v1/threads/{key}/model` and `/thinking` do).
pub async fn settings(
    State(st): State<AppState>,
    ApiPath(key): ApiPath<String>,
    body: Bytes,
) -> PageResult {
    let tk = ThreadKey::new(key.clone()).map_err(fail)?;
    if let Some(model) = form_field(&body, "model").filter(|m| !m.is_empty()) {
        st.runtime.set_model(&tk, &model).await.map_err(fail)?;
    }
    if let Some(level) = form_field(&body, "thinking").filter(|l| !l.is_empty()) {
        let level = hearth_core::ThinkingLevel::parse(&level).ok_or_else(|| {
            layout::status_page(
                StatusCode::BAD_REQUEST,
                "Refused",
                "Thinking is one of off, low, medium, high.",
            )
        })?;
        st.runtime.set_thinking(&tk, level).await.map_err(fail)?;
    }
    if let Some(mode) = form_field(&body, "mode").filter(|m| !m.is_empty()) {
        // The form always carries the mode: set it only when it changes, so
        // the audit log holds changes, not every save of the form.
        let now = st.runtime.thread_mode(&tk).await.map_err(fail)?;
        if mode != now.mode.as_str() {
            st.runtime
                .set_mode(&tk, &mode, None, ModeSetter::Operator)
                .await
                .map_err(fail)?;
        }
    }
    Ok(Redirect::to(&format!("/ui/threads/{}", encode(&key))).into_response())
}

/// Approves the plan a `plan`-mode answer made: switches the thread to the
/// chosen mode, then sends that answer back as the next message (as
/// `hearth mode set --run-plan` and `/runplan` do), and opens its run.
pub async fn run_plan(
    State(st): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    ApiPath(key): ApiPath<String>,
    body: Bytes,
) -> PageResult {
    let tk = ThreadKey::new(key.clone()).map_err(fail)?;
    let mode = form_field(&body, "mode").unwrap_or_else(|| "ask".to_owned());
    let plan = st
        .runtime
        .last_answer(&tk)
        .await
        .map_err(fail)?
        .ok_or_else(|| {
            layout::status_page(
                StatusCode::CONFLICT,
                "No plan yet",
                "There is no answer to carry out yet: ask for a plan in plan mode first.",
            )
        })?;
    st.runtime
        .set_mode(&tk, &mode, None, ModeSetter::Operator)
        .await
        .map_err(fail)?;
    let env = st
        .runtime
        .ingest(Inbound {
            source: "api".into(),
            thread_key: tk,
            user_key: UserKey::new(viewer.caller.operator_key()).map_err(fail)?,
            text: format!("{RUN_PLAN_PREFIX}{plan}"),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .map_err(fail)?;
    Ok(Redirect::to(&format!("/ui/runs/{}", encode(&env.run_id))).into_response())
}

/// Ok when the viewer may see thread `key`: an operator any, a member only
/// their own (no other user's run on it); else a 403 page.
async fn owns(st: &AppState, viewer: &Viewer, key: &str) -> Result<(), axum::response::Response> {
    let Some(user) = viewer.member() else {
        return Ok(());
    };
    if crate::auth::member_owns_thread(&st.runtime, user, key)
        .await
        .map_err(fail)?
    {
        Ok(())
    } else {
        Err(layout::status_page(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "This thread holds another user's messages; your token shows only your own threads.",
        ))
    }
}

/// A member's threads: those of their newest runs, most recent first.
async fn member_threads(
    st: &AppState,
    user: &str,
) -> Result<Vec<hearth_core::records::ThreadActivity>, crate::ApiError> {
    let runs = st
        .runtime
        .list_runs(&hearth_core::records::RunFilter {
            user_key: Some(user.to_owned()),
            limit: THREADS * 2,
            ..Default::default()
        })
        .await?;
    let mut out: Vec<hearth_core::records::ThreadActivity> = Vec::new();
    for r in runs {
        let at = r
            .created_at
            .parse::<jiff::Timestamp>()
            .map_or(0, |t| t.as_millisecond());
        match out.iter_mut().find(|t| t.thread_key == r.thread_key) {
            Some(t) => t.runs += 1,
            None => out.push(hearth_core::records::ThreadActivity {
                thread_key: r.thread_key,
                runs: 1,
                last_run_at: at,
            }),
        }
    }
    out.truncate(THREADS as usize);
    Ok(out)
}
