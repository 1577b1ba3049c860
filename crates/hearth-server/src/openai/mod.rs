//! The OpenAI-compatible surface: `/openai/v1/models` and
//! `/openai/v1/chat/completions` (plain and streaming), so any OpenAI client
//! can talk to hearth's agent.
//!
//! It speaks OpenAI's shapes and error envelope (not `/v1`'s) and turns each
//! request into an ordinary run: hearth's tools, memory, skills, policy and
//! budget apply, and its tool calls are not shown to the client. OpenAI
//! clients resend the whole conversation, so the request's messages are the
//! run's history (`RunOverrides`); `threads` says which thread the run is
//! stored on (one per user, or per conversation for clients that send no
//! `user`, and apart for background prompts such as titles, which are not
//! the user's turn and leave the chat's confirmations alone). The header
//! `X-Hearth-Thread` runs the last user message on that thread with its
//! stored history instead. Model ids: `hearth` (the thread's model) and
//! `hearth/<provider>/<model>` (that model, for this run only). It never
//! touches the store: only `Runtime`.

mod dto;
mod error;
mod stream;
mod threads;

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any, get, post};
use axum::{Extension, Json, Router};
use hearth_core::records::StepKind;
use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunError, RunStatus, ThreadKey, UserKey};
use hearth_runtime::{RunOverrides, Runtime, RuntimeError, WaitOutcome};
use serde_json::json;

pub use error::OpenAiError;

use self::dto::{ChatCompletionRequest, ModelList, ModelObject, UsageBody};
use crate::AppState;
use crate::extract::BodyLimit;
use crate::routes::messages::Follow;

/// The model id that means "the thread's model".
const HEARTH_MODEL: &str = "hearth";

/// The header naming a thread whose stored history the run continues.
const THREAD_HEADER: &str = "x-hearth-thread";

/// The header Open WebUI names its chat in (when it forwards user
/// information): one thread per chat for clients that send no `user`.
const CHAT_ID_HEADER: &str = "x-openwebui-chat-id";

/// How long a plain (non-streaming) request waits for its run.
const WAIT: Duration = Duration::from_secs(600);

/// The routes under `/openai/v1` (served behind `require_token`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/openai/v1/models", only(get(models), "GET,HEAD"))
        .route(
            "/openai/v1/chat/completions",
            only(post(chat_completions), "POST"),
        )
        .route("/openai/{*rest}", any(unknown))
}

/// A method router that answers other methods with OpenAI's 405.
fn only(router: MethodRouter<AppState>, allow: &'static str) -> MethodRouter<AppState> {
    router.fallback(move |method: Method| async move {
        OpenAiError::MethodNotAllowed {
            method: method.to_string(),
            allow,
        }
    })
}

async fn unknown(method: Method, req: Request) -> OpenAiError {
    OpenAiError::NotFound(format!("{method} {}", req.uri().path()))
}

/// Bearer auth as on `/v1` (the same `Auth` checks), refusing in OpenAI's
/// envelope: an OpenAI client's API key is a hearth API token. OpenAI
/// clients always send a key, so while the server is open (loopback, no
/// token yet) any key passes, as no key does on `/v1`.
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, OpenAiError> {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let verdict = match state.auth.check(header).await {
        Err(crate::ApiError::Unauthorized) if header.is_some() => state.auth.check(None).await,
        other => other,
    };
    match verdict {
        Ok(()) => Ok(next.run(req).await),
        Err(crate::ApiError::Unauthorized) => Err(OpenAiError::Unauthorized),
        Err(crate::ApiError::Forbidden(m)) => Err(OpenAiError::Forbidden(m)),
        Err(e) => Err(OpenAiError::Internal(e.to_string())),
    }
}

/// `GET /openai/v1/models`: `hearth` and every configured model as `hearth/<provider>/<model>`.
#[utoipa::path(get, path = "/openai/v1/models", tag = "openai", operation_id = "openai_list_models",
    responses((status = 200, description = "`hearth` and `hearth/<provider>/<model>` for each configured model", body = ModelList)))]
pub(crate) async fn models(State(st): State<AppState>) -> Json<ModelList> {
    let list = st.runtime.models();
    let hearth = ModelObject {
        id: HEARTH_MODEL.to_owned(),
        object: "model",
        created: 0,
        owned_by: "hearth".to_owned(),
    };
    let data = std::iter::once(hearth)
        .chain(list.models.into_iter().map(|m| ModelObject {
            id: format!("{HEARTH_MODEL}/{}", m.model),
            object: "model",
            created: 0,
            owned_by: m.model.provider,
        }))
        .collect();
    Json(ModelList {
        object: "list",
        data,
    })
}

/// What every answer to one request carries.
pub(crate) struct Reply {
    id: String,
    run_id: String,
    created: i64,
    /// The request's `model`, echoed.
    model: String,
}

/// `POST /openai/v1/chat/completions`: the request's messages run as one
/// hearth run; the answer in OpenAI's shapes.
#[utoipa::path(post, path = "/openai/v1/chat/completions", tag = "openai",
    operation_id = "openai_chat_completions", request_body = ChatCompletionRequest,
    responses(
        (status = 200, description = "A `chat.completion` object; with `stream: true`, `chat.completion.chunk` events (`text/event-stream`) ending with `data: [DONE]`, and with `stream_options.include_usage` a usage chunk with `choices: []` before it", body = Object),
        (status = 400, description = "Bad input, or client-side `tools`, `functions`, `tool_choice` (`invalid_request_error`, `param` naming the field)", body = Object),
        (status = 404, description = "Unknown model (`model_not_found`)", body = Object),
        (status = 413, description = "Body over `[server] max_body_bytes` (`payload_too_large`)", body = Object),
        (status = 415, description = "The body is not `application/json` (`unsupported_media_type`)", body = Object),
        (status = 429, description = "Budget exceeded (`insufficient_quota`)", body = Object),
        (status = 500, description = "The run failed (`server_error`)", body = Object),
        (status = 503, description = "Shutting down or saturated (`server_error`)", body = Object),
        (status = 504, description = "The run did not finish in time (`timeout`)", body = Object)))]
pub(crate) async fn chat_completions(
    State(st): State<AppState>,
    limit: Option<Extension<BodyLimit>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    // A page on another site can post `text/plain` without a CORS
    // preflight; such a body never reaches the JSON parser.
    if let Err(why) = crate::door::json_content_type(&headers) {
        return OpenAiError::UnsupportedMediaType(why).into_response();
    }
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
            return OpenAiError::PayloadTooLarge(limit.map_or(0, |l| l.0.0)).into_response();
        }
        Err(e) => {
            return OpenAiError::InvalidRequest {
                message: format!("could not read the request body: {e}"),
                param: None,
                code: None,
            }
            .into_response();
        }
    };
    match chat(st, &headers, &body).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(),
    }
}

async fn chat(st: AppState, headers: &HeaderMap, body: &[u8]) -> Result<Response, OpenAiError> {
    let req: ChatCompletionRequest =
        serde_json::from_slice(body).map_err(|e| OpenAiError::InvalidRequest {
            message: format!("invalid JSON body: {e}"),
            param: None,
            code: None,
        })?;
    req.check_supported()?;
    let model = match req.model.as_str() {
        HEARTH_MODEL => None,
        m => Some(
            m.strip_prefix("hearth/")
                .ok_or_else(|| OpenAiError::ModelNotFound(req.model.clone()))?
                .to_owned(),
        ),
    };
    let conversation = req.conversation()?;
    let user = req.user.as_deref().map(str::trim).filter(|u| !u.is_empty());
    let named = match headers.get(THREAD_HEADER) {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| OpenAiError::InvalidRequest {
            message: "X-Hearth-Thread must be ASCII text".into(),
            param: None,
            code: None,
        })?),
    };
    // Only a hint: one that is not text leaves the conversation to its
    // first message.
    let chat_id = headers
        .get(CHAT_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|c| !c.is_empty());
    let placement = threads::place(
        &threads::Request {
            user,
            named,
            chat_id,
        },
        &conversation,
    );
    let mut thread_key = placement.thread_key;
    // An answer goes to the conversation that asked, also when the client
    // changed the first message since (a file's text added to it, say).
    if user.is_none()
        && threads::is_anonymous_conversation(&thread_key)
        && let Some(asked) = st
            .runtime
            .pending_confirmation_thread(&conversation.text)
            .await?
        && threads::is_anonymous_conversation(&asked)
    {
        thread_key = asked;
    }
    let background = conversation.is_background();
    let history = placement.supplied.then_some(conversation.history);
    let inbound = Inbound {
        source: "openai".into(),
        thread_key: ThreadKey::new(thread_key)?,
        user_key: UserKey::new(format!("openai:user:{}", user.unwrap_or("anonymous")))?,
        text: conversation.text,
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    };
    let env = st
        .runtime
        .ingest_with(
            inbound,
            RunOverrides {
                history,
                model,
                background,
                tools: None,
                max_steps: None,
                parent_run_id: None,
                mode: None,
            },
        )
        .await
        .map_err(|e| match e {
            RuntimeError::UnknownModel(_) => OpenAiError::ModelNotFound(req.model.clone()),
            other => other.into(),
        })?;
    let reply = Reply {
        id: format!("chatcmpl-{}", env.run_id),
        run_id: env.run_id.clone(),
        created: jiff::Timestamp::now().as_second(),
        model: req.model.clone(),
    };
    // A new run is queued; anything else is a run that `confirm <token>`
    // resumed, whose earlier events belong to an earlier answer.
    let fresh = env.status == RunStatus::Queued;
    if req.stream.unwrap_or(false) {
        let source = if fresh {
            stream::Source::Follow(Follow::new(st.runtime.events(&env.run_id).await?, 0))
        } else {
            stream::Source::Known(answer(&wait(&st.runtime, &env.run_id).await?))
        };
        return Ok(stream::respond(st, reply, req.include_usage(), source));
    }
    let env = wait(&st.runtime, &env.run_id).await?;
    let content = answer(&env)?;
    let usage = usage_of(&st.runtime, &env.run_id).await;
    let mut resp = Json(json!({
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "system_fingerprint": null,
        "choices": [{
            "index": 0,
            "message": { "role": "assistant", "content": content, "refusal": null },
            "logprobs": null,
            "finish_reason": "stop",
        }],
        "usage": usage,
    }))
    .into_response();
    tag_run(&mut resp, &reply.run_id);
    Ok(resp)
}

/// Waits for the run to end or to ask for a confirmation.
async fn wait(rt: &Runtime, run_id: &str) -> Result<RunEnvelope, OpenAiError> {
    Ok(match rt.wait(run_id, WAIT).await? {
        WaitOutcome::Finished(env) | WaitOutcome::Pending(env) => env,
    })
}

/// The assistant's text for a run that ended or waits for a confirmation.
fn answer(env: &RunEnvelope) -> Result<String, OpenAiError> {
    match env.status {
        RunStatus::Succeeded => Ok(env
            .output
            .as_ref()
            .map(|o| o.text.clone())
            .unwrap_or_default()),
        RunStatus::AwaitingConfirmation => Ok(match &env.confirmation {
            Some(c) => confirmation_prompt(&c.tool, &c.summary, c.token.as_deref()),
            None => "hearth is waiting for a confirmation of this run".to_owned(),
        }),
        RunStatus::Failed => Err(OpenAiError::from_run(env.error.clone().unwrap_or_else(
            || RunError {
                code: "run_failed".into(),
                message: "the run failed".into(),
            },
        ))),
        RunStatus::Cancelled => Err(OpenAiError::RunFailed(RunError {
            code: "cancelled".into(),
            message: "the run was cancelled".into(),
        })),
        RunStatus::Queued | RunStatus::Running => Err(OpenAiError::Timeout(env.run_id.clone())),
    }
}

/// What the client sees when a tool needs the user's yes: the answer is a
/// message on the same conversation, which ingest recognises.
pub(crate) fn confirmation_prompt(tool: &str, summary: &str, token: Option<&str>) -> String {
    match token {
        Some(t) => format!(
            "hearth asks before it runs {tool}: {summary}\n\
             Reply `confirm {t}` to go ahead, or `deny {t}` to refuse."
        ),
        None => format!("hearth asks before it runs {tool}: {summary}"),
    }
}

/// The tokens of every model call the run made (0 where a provider reported none).
pub(crate) async fn usage_of(rt: &Runtime, run_id: &str) -> UsageBody {
    let steps = match rt.trace(run_id).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(run_id, error = %e, "could not read a run's steps for its usage");
            return UsageBody::default();
        }
    };
    let mut u = UsageBody::default();
    for s in steps.iter().filter(|s| s.kind == StepKind::Llm) {
        let tokens = s.tokens.as_ref();
        let count = |k: &str| tokens.and_then(|t| t[k].as_u64()).unwrap_or(0);
        u.prompt_tokens += count("input_tokens");
        u.completion_tokens += count("output_tokens");
    }
    u.total_tokens = u.prompt_tokens + u.completion_tokens;
    u
}

/// Names the run in a header, so a client can find its trace in `/v1/runs`.
pub(crate) fn tag_run(resp: &mut Response, run_id: &str) {
    if let Ok(v) = HeaderValue::from_str(run_id) {
        resp.headers_mut().insert("x-hearth-run-id", v);
    }
}
