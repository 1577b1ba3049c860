//! Messages and runs: ingest, read, wait, follow (SSE), cancel, trace.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::{Extension, Json};
use futures_util::Stream;
use hearth_core::records::RunFilter;
use hearth_core::{
    DeliveryMode, Inbound, RunEnvelope, RunEvent, RunStatus, ThreadKey, UserKey, rfc3339,
};
use hearth_runtime::{RunEvents, WaitOutcome};
use tokio::sync::watch;

use crate::AppState;
use crate::auth::Caller;
use crate::dto::{MessageRequest, RunList, RunQuery, Trace, TraceStep};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath, ApiQuery, page_limit};

const DEFAULT_WAIT_SECS: u64 = 60;
const DEFAULT_RUNS_LIMIT: u32 = 50;
const MAX_WAIT_SECS: u64 = 600;

/// Accepts a message and returns its run.
#[utoipa::path(post, path = "/v1/messages", tag = "runs", request_body = MessageRequest,
    params(("Idempotency-Key" = Option<String>, Header, nullable = false, description = "Idempotency key (as the body's idempotency_key; when both are given they must be equal): 1 to 256 visible ASCII characters or spaces, not starting or ending with a space", pattern = r"^[\u0021-\u007E]([\u0020-\u007E]{0,254}[\u0021-\u007E])?$")),
    responses(
        (status = 200, description = "Finished within the wait", body = RunEnvelope),
        (status = 202, description = "Accepted, not finished", body = RunEnvelope),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 403, description = "A token bound to a user sending as another user (`forbidden`)", body = crate::dto::ErrorBody),
        (status = 404, description = "For a token bound to a user, a thread another user's runs are on (`not_found`, as an unknown one)", body = crate::dto::ErrorBody),
        (status = 409, description = "The thread is incognito and another replica holds it (`incognito_elsewhere`, naming it)", body = crate::dto::ErrorBody),
        (status = 413, description = "Body too large", body = crate::dto::ErrorBody),
        (status = 503, description = "Shutting down (`unavailable`), or saturated (`overloaded`, with a Retry-After header)", body = crate::dto::ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (with `overloaded`)")))))]
pub async fn post_message(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    ApiJson(mut body): ApiJson<MessageRequest>,
) -> Result<(StatusCode, Json<RunEnvelope>), ApiError> {
    if let Some(user) = caller.as_ref().and_then(|c| c.member()) {
        member_message(&st, user, &mut body).await?;
    }
    let header_key = match headers.get("idempotency-key") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::InvalidRequest("Idempotency-Key must be ASCII text".into()))?
                .to_owned(),
        ),
        None => None,
    };
    let idempotency_key = match (header_key, body.idempotency_key) {
        (Some(h), Some(b)) if h != b => return Err(ApiError::IdempotencyMismatch),
        (h, b) => h.or(b),
    };
    let wait_secs = body.wait_timeout_secs.unwrap_or(DEFAULT_WAIT_SECS);
    if wait_secs > MAX_WAIT_SECS {
        return Err(ApiError::InvalidRequest(format!(
            "wait_timeout_secs must be at most {MAX_WAIT_SECS}"
        )));
    }
    let env = st
        .runtime
        .ingest(Inbound {
            source: body.source.unwrap_or_else(|| "api".into()),
            thread_key: ThreadKey::new(body.thread_key.as_deref().unwrap_or("api:default"))?,
            user_key: UserKey::new(body.user_key.as_deref().unwrap_or("api:user:anonymous"))?,
            text: body.text,
            delivery_mode: body.delivery_mode.unwrap_or(DeliveryMode::FollowUp),
            idempotency_key,
            scope: None,
            roles: Vec::new(),
        })
        .await?;
    if !body.wait.unwrap_or(false) {
        return Ok((StatusCode::ACCEPTED, Json(env)));
    }
    match st
        .runtime
        .wait(&env.run_id, Duration::from_secs(wait_secs))
        .await?
    {
        WaitOutcome::Finished(env) => Ok((StatusCode::OK, Json(env))),
        WaitOutcome::Pending(env) => Ok((StatusCode::ACCEPTED, Json(env))),
    }
}

/// A message from a token bound to `user`: it speaks as that user only,
/// and only on a thread no other user's runs are on (404 otherwise, as an
/// unknown thread: another user's conversation is not theirs to join).
async fn member_message(
    st: &AppState,
    user: &str,
    body: &mut MessageRequest,
) -> Result<(), ApiError> {
    match &body.user_key {
        Some(u) if u != user => {
            return Err(ApiError::Forbidden(format!(
                "this token acts as {user}; it cannot send as {u} (leave user_key out)"
            )));
        }
        _ => body.user_key = Some(user.to_owned()),
    }
    let thread = body
        .thread_key
        .clone()
        .unwrap_or_else(|| "api:default".into());
    if !crate::auth::member_owns_thread(&st.runtime, user, &thread).await? {
        return Err(ApiError::NotFound(format!("no thread {thread}")));
    }
    Ok(())
}

/// One run.
#[utoipa::path(get, path = "/v1/runs/{run_id}", tag = "runs",
    params(("run_id" = String, Path, description = "Run id", min_length = 1)),
    responses((status = 200, description = "The run", body = RunEnvelope),
        (status = 400, body = crate::dto::ErrorBody), (status = 404, body = crate::dto::ErrorBody)))]
pub async fn get_run(
    State(st): State<AppState>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<RunEnvelope>, ApiError> {
    Ok(Json(st.runtime.get_run(&run_id).await?))
}

/// Runs, newest first.
#[utoipa::path(get, path = "/v1/runs", tag = "runs", params(RunQuery),
    responses((status = 200, description = "Runs, newest first", body = RunList), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn list_runs(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiQuery(q): ApiQuery<RunQuery>,
) -> Result<Json<RunList>, ApiError> {
    let status = match q.status.as_deref() {
        None => None,
        Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
            ApiError::InvalidRequest(format!(
                "unknown status {s:?}; one of queued, running, awaiting_confirmation, succeeded, failed, cancelled"
            ))
        })?),
    };
    if let Some(t) = &q.thread_key {
        hearth_runtime::check_key("thread_key", t)?;
    }
    let filter = RunFilter {
        thread_key: q.thread_key,
        status,
        limit: page_limit(q.limit, DEFAULT_RUNS_LIMIT)?,
        // A token bound to a user lists that user's runs only.
        user_key: caller.as_ref().and_then(|c| c.member()).map(str::to_owned),
        ..Default::default()
    };
    Ok(Json(RunList {
        runs: st.runtime.list_runs(&filter).await?,
    }))
}

/// Cancels a run.
#[utoipa::path(post, path = "/v1/runs/{run_id}/cancel", tag = "runs",
    params(("run_id" = String, Path, description = "Run id", min_length = 1)),
    responses((status = 200, description = "The run, cancelled unless it had finished", body = RunEnvelope),
        (status = 400, body = crate::dto::ErrorBody), (status = 404, body = crate::dto::ErrorBody)))]
pub async fn cancel_run(
    State(st): State<AppState>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<RunEnvelope>, ApiError> {
    Ok(Json(st.runtime.cancel(&run_id).await?))
}

/// A run's steps, without prompts, arguments or outputs.
#[utoipa::path(get, path = "/v1/runs/{run_id}/trace", tag = "runs",
    params(("run_id" = String, Path, description = "Run id", min_length = 1)),
    responses((status = 200, description = "The run's steps", body = Trace),
        (status = 400, body = crate::dto::ErrorBody), (status = 404, body = crate::dto::ErrorBody)))]
pub async fn run_trace(
    State(st): State<AppState>,
    ApiPath(run_id): ApiPath<String>,
) -> Result<Json<Trace>, ApiError> {
    let steps = st.runtime.trace(&run_id).await?;
    Ok(Json(Trace {
        run_id,
        steps: steps
            .into_iter()
            .map(|s| TraceStep {
                detail: step_detail(&s),
                index: s.index,
                kind: step_kind(&s).to_owned(),
                name: s.name,
                status: s.status.as_str().to_owned(),
                started_at: rfc3339(s.started_at),
                finished_at: s.finished_at.map(rfc3339),
                tokens: s.tokens,
            })
            .collect(),
    }))
}

/// A step's kind on the wire: a `delegate` call that started a sub-agent
/// is a `delegate` step (its detail names the child), not a plain tool call.
fn step_kind(s: &hearth_core::records::StepRecord) -> &'static str {
    let child = s.payload.pointer("/detail/child_run_id").is_some();
    if s.kind == hearth_core::records::StepKind::Tool && s.name == "delegate" && child {
        "delegate"
    } else {
        s.kind.as_str()
    }
}

/// What a trace shows of a step beyond its name and status. Only what holds
/// no prompt or output: how a compaction or route step went, and why a model
/// call failed (the provider's error, journaled with secrets redacted). An
/// answered model call's or a tool call's payload is its prompt and output.
fn step_detail(s: &hearth_core::records::StepRecord) -> Option<serde_json::Value> {
    use hearth_core::records::{StepKind, StepStatus};
    match (s.kind, s.status) {
        (StepKind::Compaction | StepKind::Route, _) => s.payload.get("detail").cloned(),
        (StepKind::Llm, StepStatus::Failed) => s.payload.get("error").cloned(),
        // The permission mode of the run and what it decided for the call.
        (StepKind::Tool, _) => s.payload.get("detail").cloned(),
        (StepKind::Llm, _) => None,
    }
}

/// The run's events as Server-Sent Events; past ones first, then live ones,
/// ending after the terminal event. `Last-Event-ID` resumes after that id.
#[utoipa::path(get, path = "/v1/runs/{run_id}/events", tag = "runs",
    params(("run_id" = String, Path, description = "Run id", min_length = 1),
           ("Last-Event-ID" = Option<i64>, Header, nullable = false, description = "Resume after this event id: decimal digits, at most 9223372036854775807", minimum = 0)),
    responses((status = 200, description = "Event stream", content_type = "text/event-stream"),
              (status = 400, description = "A Last-Event-ID that is not an event id, or a bad run id", body = crate::dto::ErrorBody),
              (status = 404, body = crate::dto::ErrorBody)))]
pub async fn run_events(
    State(st): State<AppState>,
    ApiPath(run_id): ApiPath<String>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(v) => event_id(v.as_bytes()).ok_or_else(|| {
            ApiError::InvalidRequest(
                "Last-Event-ID must be an event id: decimal digits, at most 9223372036854775807"
                    .into(),
            )
        })?,
    };
    let source = st.runtime.events(&run_id).await?;
    let state = Follow::new(source, after);
    let stream = futures_util::stream::unfold(state, |mut f| async move {
        let ev = f.next().await?;
        Some((Ok(to_sse(&ev)), f))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// An event id as sent in `id:`: decimal digits only (no sign), at most
/// `i64::MAX`, the document's `int64` with `minimum: 0`.
fn event_id(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok().and_then(|n| u64::try_from(n).ok())
}

/// Follows one run's events: past ones first, then live ones, up to and
/// including the terminal event (also used by the OpenAI-compatible stream).
pub(crate) struct Follow {
    source: RunEvents,
    rx: Option<watch::Receiver<(u64, RunStatus)>>,
    cursor: u64,
    pending: VecDeque<RunEvent>,
    done: bool,
}

impl Follow {
    /// Follows `source` from after the event numbered `after` (0: from the start).
    pub(crate) fn new(source: RunEvents, after: u64) -> Self {
        let rx = match &source {
            RunEvents::Live(log) => Some(log.subscribe()),
            RunEvents::Stored(_) => None,
        };
        Self {
            source,
            rx,
            cursor: after,
            pending: VecDeque::new(),
            done: false,
        }
    }

    /// The next event; `None` after the terminal one.
    pub(crate) async fn next(&mut self) -> Option<RunEvent> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                self.cursor = ev.seq;
                if ev.kind.is_terminal() {
                    self.done = true;
                    self.pending.clear();
                }
                return Some(ev);
            }
            if self.done {
                return None;
            }
            let fresh = match &self.source {
                RunEvents::Live(log) => {
                    // The status first: a terminal event is in the log
                    // before its status is published, so a run seen ended
                    // here has all its events in `since`.
                    let ended = log.status().is_terminal();
                    let fresh = log.since(self.cursor);
                    if fresh.is_empty() && ended {
                        // Resumed after the terminal event, or ended without
                        // one (a run another caller settled): nothing will
                        // come, so the stream ends instead of waiting.
                        self.done = true;
                        return None;
                    }
                    fresh
                }
                RunEvents::Stored(all) => {
                    self.done = true;
                    all.iter()
                        .filter(|e| e.seq > self.cursor)
                        .cloned()
                        .collect()
                }
            };
            if fresh.is_empty() {
                if let Some(rx) = self.rx.as_mut() {
                    if rx.changed().await.is_err() {
                        return None;
                    }
                } else {
                    return None;
                }
            }
            self.pending.extend(fresh);
        }
    }
}

fn to_sse(ev: &RunEvent) -> Event {
    Event::default()
        .id(ev.seq.to_string())
        .event(ev.kind.as_str())
        .data(ev.data.to_string())
}
