//! The fake REST API (`/api/v10`): the routes the bot calls, each checking
//! the token and the body as Discord documents them.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use serde_json::{Value, json};

use super::{APP_ID, BOT_ID, SentMessage, Shared};

type S = State<Arc<Shared>>;

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/v10/users/@me", get(me))
        .route("/api/v10/applications/@me", get(application))
        .route("/api/v10/gateway/bot", get(gateway_bot))
        .route("/api/v10/channels/{channel}/messages", post(create_message))
        .route(
            "/api/v10/channels/{channel}/messages/{message}",
            patch(edit_message).delete(delete_message),
        )
        .route("/api/v10/channels/{channel}/typing", post(typing))
        .route("/api/v10/guilds/{guild}/members/{user}", get(member))
        .route("/api/v10/applications/{app}/commands", put(commands))
        .route(
            "/api/v10/interactions/{id}/{token}/callback",
            post(callback),
        )
        .route(
            "/api/v10/webhooks/{app}/{token}/messages/@original",
            patch(edit_original),
        )
        .fallback(unknown)
        .with_state(shared)
}

fn error(status: StatusCode, code: u64, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "code": code, "message": message })),
    )
        .into_response()
}

/// Records `problems` of a request to `what` and answers as Discord does a
/// body that breaks its rules: 400 `Invalid Form Body`, nothing changed.
fn invalid_form(shared: &Shared, what: &str, problems: &[String]) -> Response {
    shared.with(|s| {
        s.violations
            .extend(problems.iter().map(|p| format!("{what}: {p}")));
    });
    error(StatusCode::BAD_REQUEST, 50035, "Invalid Form Body")
}

/// Checks the token; the 401 to answer when it is wrong.
fn auth(shared: &Shared, headers: &HeaderMap, what: &str) -> Option<Response> {
    let expected = format!("Bot {}", shared.token);
    let got = headers.get("authorization").and_then(|v| v.to_str().ok());
    if got == Some(expected.as_str()) {
        return None;
    }
    shared.violation(format!(
        "{what}: missing or wrong `Authorization: Bot <token>`"
    ));
    Some(error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized"))
}

fn json_body(shared: &Shared, body: &Bytes, what: &str) -> Option<Value> {
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if v.is_object() || v.is_array() => Some(v),
        _ => {
            shared.violation(format!("{what}: the body is not a JSON object or array"));
            None
        }
    }
}

fn snowflake(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Content, components and nonce as Discord checks them; the problems.
fn check_message(body: &Value, creating: bool) -> Vec<String> {
    let mut out = Vec::new();
    let content = body.get("content");
    match content {
        Some(Value::String(c)) if c.chars().count() > 2000 => {
            out.push(format!(
                "content of {} characters (limit 2000)",
                c.chars().count()
            ));
        }
        Some(Value::String(c))
            if creating && c.trim().is_empty() && body.get("components").is_none() =>
        {
            out.push("an empty message".into());
        }
        Some(Value::String(_)) | Some(Value::Null) | None => {}
        Some(other) => out.push(format!("content is not a string: {other}")),
    }
    if creating && content.is_none() && body.get("components").is_none() {
        out.push("a message without content".into());
    }
    let rows = body["components"].as_array().map_or(0, Vec::len);
    if rows > 5 {
        out.push(format!("{rows} action rows (limit 5)"));
    }
    for row in body["components"].as_array().into_iter().flatten() {
        if row["type"] != 1 {
            out.push("a top-level component that is not an action row".into());
        }
        let buttons = row["components"].as_array().map_or(0, Vec::len);
        if buttons > 5 {
            out.push(format!("an action row of {buttons} buttons (limit 5)"));
        }
        for c in row["components"].as_array().into_iter().flatten() {
            let id = c["custom_id"].as_str().unwrap_or("");
            if id.is_empty() || id.chars().count() > 100 {
                out.push(format!("custom_id {id:?} not within 1 to 100 characters"));
            }
            if c["label"].as_str().is_none_or(|l| l.chars().count() > 80) {
                out.push("a button without a label of at most 80 characters".into());
            }
        }
    }
    match body.get("nonce") {
        None => {
            if body.get("enforce_nonce") == Some(&json!(true)) {
                out.push("enforce_nonce without a nonce".into());
            }
        }
        Some(Value::String(n)) if n.chars().count() > 25 => {
            out.push(format!("nonce {n:?} longer than 25 characters"));
        }
        Some(Value::String(_) | Value::Number(_)) => {}
        Some(other) => out.push(format!("nonce is neither a string nor an integer: {other}")),
    }
    out
}

async fn me(State(shared): S, headers: HeaderMap) -> Response {
    if let Some(r) = auth(&shared, &headers, "GET /users/@me") {
        return r;
    }
    axum::Json(json!({ "id": BOT_ID, "username": "hearth", "bot": true, "discriminator": "0" }))
        .into_response()
}

/// Get Current Application: the bot's application, with its bot user.
async fn application(State(shared): S, headers: HeaderMap) -> Response {
    if let Some(r) = auth(&shared, &headers, "GET /applications/@me") {
        return r;
    }
    axum::Json(json!({
        "id": APP_ID, "name": "hearth", "icon": null, "description": "",
        "bot_public": false, "bot_require_code_grant": false, "verify_key": "0".repeat(64),
        "flags": 0,
        "bot": { "id": BOT_ID, "username": "hearth", "bot": true, "discriminator": "0" },
    }))
    .into_response()
}

async fn gateway_bot(State(shared): S, headers: HeaderMap) -> Response {
    if let Some(r) = auth(&shared, &headers, "GET /gateway/bot") {
        return r;
    }
    axum::Json(json!({
        "url": format!("ws://{}", shared.gateway_addr), "shards": 1,
        "session_start_limit": { "total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1 },
    }))
    .into_response()
}

/// Discord's 429: the body and the `X-RateLimit-*` headers of a route
/// bucket that is empty for `secs`.
fn rate_limited(secs: f64) -> Response {
    let mut r = (
        StatusCode::TOO_MANY_REQUESTS,
        axum::Json(json!({ "message": "You are being rate limited.", "retry_after": secs, "global": false })),
    )
        .into_response();
    let h = r.headers_mut();
    for (k, v) in [
        ("x-ratelimit-limit", "5".to_owned()),
        ("x-ratelimit-remaining", "0".to_owned()),
        ("x-ratelimit-reset-after", secs.to_string()),
        ("x-ratelimit-bucket", "fake-bucket".to_owned()),
        ("x-ratelimit-scope", "user".to_owned()),
        ("retry-after", secs.ceil().to_string()),
    ] {
        if let Ok(v) = v.parse() {
            h.insert(k, v);
        }
    }
    r
}

async fn create_message(
    State(shared): S,
    Path(channel): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let what = "POST /channels/{id}/messages";
    shared.with(|s| s.message_posts += 1);
    if let Some(r) = auth(&shared, &headers, what) {
        return r;
    }
    // Still limited: Discord answers 429 again, for what is left.
    let now = std::time::Instant::now();
    let early = shared.with(|s| {
        s.limited_until
            .get(&channel)
            .filter(|until| **until > now)
            .map(|until| *until - now)
    });
    if let Some(left) = early {
        shared.violation(format!(
            "{what}: a post to channel {channel} {left:?} before the retry_after of an earlier 429 ended"
        ));
        return rate_limited(left.as_secs_f64());
    }
    if let Some(secs) = shared.with(|s| s.rate_limits.pop_front()) {
        let until = now + std::time::Duration::try_from_secs_f64(secs).unwrap_or_default();
        shared.with(|s| s.limited_until.insert(channel.clone(), until));
        return rate_limited(secs);
    }
    if !snowflake(&channel) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    if shared.with(|s| s.forbidden.contains(&channel)) {
        return error(StatusCode::FORBIDDEN, 50001, "Missing Access");
    }
    let Some(body) = json_body(&shared, &body, what) else {
        return error(
            StatusCode::BAD_REQUEST,
            50109,
            "The request body contains invalid JSON.",
        );
    };
    let problems = check_message(&body, true);
    if !problems.is_empty() {
        return invalid_form(&shared, what, &problems);
    }
    let nonce = match &body["nonce"] {
        Value::String(n) => Some(n.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let enforce = body["enforce_nonce"] == json!(true);
    let msg = shared.with(|s| {
        if enforce
            && let Some(existing) = s
                .messages
                .iter()
                .find(|m| m.channel_id == channel && m.nonce.is_some() && m.nonce == nonce)
        {
            return existing.clone();
        }
        let m = SentMessage {
            id: s.new_id(),
            channel_id: channel.clone(),
            content: body["content"].as_str().unwrap_or("").to_owned(),
            nonce: nonce.clone(),
            components: body.get("components").cloned(),
        };
        s.messages.push(m.clone());
        m
    });
    if shared.with(|s| {
        let lose = s.lose_answers > 0;
        s.lose_answers = s.lose_answers.saturating_sub(1);
        lose
    }) {
        return error(StatusCode::BAD_GATEWAY, 0, "502: Bad Gateway");
    }
    axum::Json(json!({
        "id": msg.id, "channel_id": msg.channel_id, "content": msg.content, "nonce": msg.nonce,
        "author": { "id": BOT_ID, "username": "hearth", "bot": true }, "type": 0,
    }))
    .into_response()
}

async fn edit_message(
    State(shared): S,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let what = "PATCH /channels/{id}/messages/{id}";
    if let Some(r) = auth(&shared, &headers, what) {
        return r;
    }
    let Some(body) = json_body(&shared, &body, what) else {
        return error(
            StatusCode::BAD_REQUEST,
            50109,
            "The request body contains invalid JSON.",
        );
    };
    let problems = check_message(&body, false);
    if !problems.is_empty() {
        return invalid_form(&shared, what, &problems);
    }
    let found = shared.with(|s| {
        let Some(m) = s
            .messages
            .iter_mut()
            .find(|m| m.id == message && m.channel_id == channel)
        else {
            return false;
        };
        if let Some(c) = body["content"].as_str() {
            m.content = c.to_owned();
            s.edits.push((message.clone(), c.to_owned()));
        }
        true
    });
    if found {
        axum::Json(json!({ "id": message, "channel_id": channel })).into_response()
    } else {
        error(StatusCode::NOT_FOUND, 10008, "Unknown Message")
    }
}

async fn delete_message(
    State(shared): S,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = auth(&shared, &headers, "DELETE /channels/{id}/messages/{id}") {
        return r;
    }
    let found = shared.with(|s| {
        let before = s.messages.len();
        s.messages
            .retain(|m| !(m.id == message && m.channel_id == channel));
        s.deletes.push(message.clone());
        s.messages.len() < before
    });
    if found {
        StatusCode::NO_CONTENT.into_response()
    } else {
        error(StatusCode::NOT_FOUND, 10008, "Unknown Message")
    }
}

async fn typing(State(shared): S, Path(channel): Path<String>, headers: HeaderMap) -> Response {
    if let Some(r) = auth(&shared, &headers, "POST /channels/{id}/typing") {
        return r;
    }
    if !snowflake(&channel) {
        return error(StatusCode::NOT_FOUND, 10003, "Unknown Channel");
    }
    shared.with(|s| s.typing += 1);
    StatusCode::NO_CONTENT.into_response()
}

/// `GET /guilds/{guild.id}/members/{user.id}`: the member, or 404 Unknown
/// Member (code 10007).
async fn member(
    State(shared): S,
    Path((guild, user)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(r) = auth(&shared, &headers, "GET /guilds/{id}/members/{id}") {
        return r;
    }
    if !snowflake(&guild) || !snowflake(&user) {
        shared.violation(format!(
            "GET /guilds/{{id}}/members/{{id}}: ids that are not snowflakes: {guild:?} {user:?}"
        ));
        return error(StatusCode::NOT_FOUND, 10004, "Unknown Guild");
    }
    let found = shared.with(|s| {
        s.member_lookups += 1;
        s.members.contains(&(guild.clone(), user.clone()))
    });
    if !found {
        return error(StatusCode::NOT_FOUND, 10007, "Unknown Member");
    }
    axum::Json(json!({
        "user": { "id": user, "username": format!("user{user}"), "bot": true },
        "roles": [], "joined_at": "2026-11-01T00:00:00.000000+00:00", "deaf": false, "mute": false,
        "flags": 0,
    }))
    .into_response()
}

async fn commands(
    State(shared): S,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let what = "PUT /applications/{id}/commands";
    if let Some(r) = auth(&shared, &headers, what) {
        return r;
    }
    if app != APP_ID {
        shared.violation(format!("{what}: application id {app:?} is not the bot's"));
        return error(StatusCode::FORBIDDEN, 50001, "Missing Access");
    }
    let Some(body) = json_body(&shared, &body, what) else {
        return error(
            StatusCode::BAD_REQUEST,
            50109,
            "The request body contains invalid JSON.",
        );
    };
    let mut problems = Vec::new();
    let list = body.as_array().cloned().unwrap_or_default();
    if !body.is_array() || list.len() > 100 {
        problems.push("not an array of at most 100 commands".to_owned());
    }
    for c in &list {
        let name = c["name"].as_str().unwrap_or("");
        let name_ok = (1..=32).contains(&name.chars().count())
            && name
                .chars()
                .all(|ch| ch.is_lowercase() || ch.is_ascii_digit() || "-_".contains(ch));
        if !name_ok {
            problems.push(format!("command name {name:?} is not valid"));
        }
        if !c["description"]
            .as_str()
            .is_some_and(|d| (1..=100).contains(&d.chars().count()))
        {
            problems.push(format!(
                "command {name:?} needs a description of 1 to 100 characters"
            ));
        }
    }
    if !problems.is_empty() {
        return invalid_form(&shared, what, &problems);
    }
    shared.with(|s| s.commands = Some(body.clone()));
    axum::Json(body).into_response()
}

/// What breaks Discord's rules for a modal (callback type 9): a custom id
/// of 1-100 characters, a title of 1-45, one to five action rows each
/// holding one text input (type 4) with a custom id, a label of 1-45
/// characters, style 1 (short) or 2 (paragraph), and lengths within 0-4000.
fn check_modal(data: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let len = |v: &Value| v.as_str().map_or(0, |s| s.chars().count());
    if !(1..=100).contains(&len(&data["custom_id"])) {
        problems.push("modal custom_id must be 1-100 characters".to_owned());
    }
    if !(1..=45).contains(&len(&data["title"])) {
        problems.push("modal title must be 1-45 characters".to_owned());
    }
    let rows = data["components"].as_array().cloned().unwrap_or_default();
    if !(1..=5).contains(&rows.len()) {
        problems.push("a modal has 1-5 action rows".to_owned());
    }
    for row in &rows {
        let inputs = row["components"].as_array().cloned().unwrap_or_default();
        if row["type"] != 1 || inputs.len() != 1 {
            problems.push("each modal row is an action row with one text input".to_owned());
            continue;
        }
        let input = &inputs[0];
        if input["type"] != 4 {
            problems.push("a modal row holds a text input (type 4)".to_owned());
        }
        if !(1..=100).contains(&len(&input["custom_id"])) {
            problems.push("a text input's custom_id must be 1-100 characters".to_owned());
        }
        if !(1..=45).contains(&len(&input["label"])) {
            problems.push("a text input's label must be 1-45 characters".to_owned());
        }
        if !matches!(input["style"].as_u64(), Some(1 | 2)) {
            problems.push("a text input's style is 1 or 2".to_owned());
        }
        for (field, lo) in [("min_length", 0), ("max_length", 1)] {
            if let Some(n) = input.get(field).and_then(Value::as_u64)
                && !(lo..=4000).contains(&n)
            {
                problems.push(format!("a text input's {field} must be {lo}-4000"));
            }
        }
    }
    problems
}

async fn callback(
    State(shared): S,
    Path((id, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    // Interaction endpoints authenticate by the token in the path.
    let what = "POST /interactions/{id}/{token}/callback";
    let Some(body) = json_body(&shared, &body, what) else {
        return error(
            StatusCode::BAD_REQUEST,
            50109,
            "The request body contains invalid JSON.",
        );
    };
    let kind = body["type"].as_u64().unwrap_or(0);
    let mut problems = Vec::new();
    if ![1, 4, 5, 6, 7, 9].contains(&kind) {
        problems.push(format!("callback type {kind} is not valid"));
    }
    if matches!(kind, 4 | 7) {
        problems.extend(check_message(&body["data"], false));
    }
    if kind == 9 {
        problems.extend(check_modal(&body["data"]));
    }
    if !problems.is_empty() {
        return invalid_form(&shared, what, &problems);
    }
    shared.with(|s| match s.interactions.get_mut(&id) {
        Some((t, _)) if *t != token => {
            s.violations
                .push(format!("{what}: wrong token for interaction {id}"));
            error(StatusCode::UNAUTHORIZED, 50027, "Invalid Webhook Token")
        }
        Some((_, answered)) if *answered => {
            s.violations
                .push(format!("{what}: interaction {id} answered twice"));
            error(
                StatusCode::BAD_REQUEST,
                40060,
                "Interaction has already been acknowledged.",
            )
        }
        Some((_, answered)) => {
            *answered = true;
            s.callbacks.push((id.clone(), body.clone()));
            StatusCode::NO_CONTENT.into_response()
        }
        None => {
            s.violations
                .push(format!("{what}: unknown interaction {id}"));
            error(StatusCode::NOT_FOUND, 10062, "Unknown interaction")
        }
    })
}

async fn edit_original(
    State(shared): S,
    Path((app, token)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let what = "PATCH /webhooks/{app}/{token}/messages/@original";
    let Some(body) = json_body(&shared, &body, what) else {
        return error(
            StatusCode::BAD_REQUEST,
            50109,
            "The request body contains invalid JSON.",
        );
    };
    let problems = check_message(&body, false);
    if !problems.is_empty() {
        return invalid_form(&shared, what, &problems);
    }
    let ok = shared.with(|s| {
        let answered = s
            .interactions
            .values()
            .any(|(t, answered)| *t == token && *answered);
        if app != APP_ID || !answered {
            s.violations
                .push(format!("{what}: no answered interaction with this token"));
            return false;
        }
        s.original_edits.push((token.clone(), body.clone()));
        true
    });
    if ok {
        axum::Json(json!({ "id": "1", "content": body["content"] })).into_response()
    } else {
        error(StatusCode::NOT_FOUND, 10015, "Unknown Webhook")
    }
}

async fn unknown(State(shared): S, method: Method, uri: Uri) -> Response {
    shared.violation(format!(
        "a request to an unknown route: {method} {}",
        uri.path()
    ));
    error(StatusCode::NOT_FOUND, 0, "404: Not Found")
}
