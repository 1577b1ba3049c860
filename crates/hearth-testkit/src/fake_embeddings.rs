//! `POST /v1/embeddings` of [`crate::FakeOpenAi`]: OpenAI's embeddings API,
//! with vectors the test chooses and every request checked.
//!
//! Kept in a log of its own so a test counting chat requests is not
//! confused by the embedding calls a memory save makes.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;

use crate::server::is_json;

/// Chooses the vector for one input text.
pub type Embedder = Arc<dyn Fn(&str) -> Vec<f32> + Send + Sync>;

/// Requests, broken rules and the embedder of the embeddings route.
pub(crate) struct EmbedState {
    log: Mutex<EmbedLog>,
}

struct EmbedLog {
    requests: Vec<serde_json::Value>,
    violations: Vec<String>,
    checked: usize,
    embedder: Embedder,
}

/// Dimension of the default vectors.
pub const DEFAULT_DIMENSION: usize = 16;

/// The default vector: words hashed into [`DEFAULT_DIMENSION`] buckets, so
/// texts sharing words are close and the same text always gets the same vector.
pub fn hashed_words(text: &str) -> Vec<f32> {
    let mut v = vec![0.0_f32; DEFAULT_DIMENSION];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        // FNV-1a: stable across runs and platforms, unlike `DefaultHasher`.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in word.to_lowercase().bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let slot = usize::try_from(h % DEFAULT_DIMENSION as u64).unwrap_or(0);
        v[slot] += 1.0;
    }
    v
}

impl EmbedState {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            log: Mutex::new(EmbedLog {
                requests: Vec::new(),
                violations: Vec::new(),
                checked: 0,
                embedder: Arc::new(hashed_words),
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EmbedLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn set_embedder(&self, f: Embedder) {
        self.lock().embedder = f;
    }

    pub(crate) fn requests(&self) -> Vec<serde_json::Value> {
        self.lock().requests.clone()
    }

    /// Broken rules so far; reading marks them checked.
    pub(crate) fn violations(&self) -> Vec<String> {
        let mut log = self.lock();
        log.checked = log.violations.len();
        log.violations.clone()
    }

    /// Broken rules nobody read.
    pub(crate) fn unchecked(&self) -> Vec<String> {
        let log = self.lock();
        log.violations[log.checked..].to_vec()
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Input {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
struct EmbedRequest {
    #[serde(default)]
    model: String,
    input: Input,
    #[serde(default)]
    encoding_format: Option<String>,
}

fn has_bearer(headers: &HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| !k.trim().is_empty())
}

fn error(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {
        "message": message, "type": "invalid_request_error", "param": null, "code": null,
    }});
    (status, axum::Json(body)).into_response()
}

/// Checks a request; the inputs when it keeps the rules, else what it broke.
fn check(headers: &HeaderMap, body: &[u8]) -> Result<(String, Vec<String>), Vec<String>> {
    let mut broken = Vec::new();
    if !has_bearer(headers) {
        broken.push("embeddings: Authorization: Bearer <key> is missing".to_owned());
    }
    if !is_json(headers) {
        broken.push("embeddings: Content-Type is not application/json".to_owned());
    }
    let req = match serde_json::from_slice::<EmbedRequest>(body) {
        Ok(r) => r,
        Err(e) => {
            broken.push(format!(
                "embeddings: body is not an embeddings request: {e}"
            ));
            return Err(broken);
        }
    };
    if req.model.is_empty() {
        broken.push("embeddings: model is missing".to_owned());
    }
    if let Some(f) = req.encoding_format.as_deref().filter(|f| *f != "float") {
        broken.push(format!(
            "embeddings: encoding_format {f:?} is not float, which the fake serves"
        ));
    }
    let inputs = match req.input {
        Input::One(s) => vec![s],
        Input::Many(v) => v,
    };
    if inputs.is_empty() || inputs.iter().any(String::is_empty) {
        broken.push("embeddings: input is empty or holds an empty string".to_owned());
    }
    if broken.is_empty() {
        Ok((req.model, inputs))
    } else {
        Err(broken)
    }
}

/// `POST /v1/embeddings`: one vector per input, in input order.
pub(crate) async fn embeddings(
    State(state): State<Arc<EmbedState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let checked = check(&headers, &body);
    let embedder = {
        let mut log = state.lock();
        let value = serde_json::from_slice(&body)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(&body).into()));
        log.requests.push(value);
        if let Err(broken) = &checked {
            log.violations.extend(broken.iter().cloned());
        }
        log.embedder.clone()
    };
    let (model, inputs) = match checked {
        Ok(ok) => ok,
        Err(_) if !has_bearer(&headers) => {
            return error(
                StatusCode::UNAUTHORIZED,
                "You didn't provide an API key. You need to provide your API key in an \
                 Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            );
        }
        Err(broken) => return error(StatusCode::BAD_REQUEST, &broken.join("; ")),
    };
    let mut tokens = 0_usize;
    let data: Vec<serde_json::Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| {
            tokens += text.split_whitespace().count().max(1);
            serde_json::json!({"object": "embedding", "index": index, "embedding": embedder(text)})
        })
        .collect();
    axum::Json(serde_json::json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

/// Checks a Gemini `batchEmbedContents` request for `model` (from the
/// path); its texts when it keeps the rules, else what it broke.
fn check_gemini(
    model: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Vec<String>, Vec<String>> {
    let mut broken = Vec::new();
    match headers.get("x-goog-api-key").map(|v| v.as_bytes()) {
        None | Some(b"") => broken.push("batchEmbedContents: no x-goog-api-key header".to_owned()),
        Some(_) => {}
    }
    if query.split('&').any(|p| p.starts_with("key=")) {
        broken.push("batchEmbedContents: the API key is in the URL".to_owned());
    }
    if !is_json(headers) {
        broken.push("batchEmbedContents: Content-Type is not application/json".to_owned());
    }
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            broken.push(format!("batchEmbedContents: body is not JSON: {e}"));
            return Err(broken);
        }
    };
    let requests = value["requests"].as_array().cloned().unwrap_or_default();
    if requests.is_empty() {
        broken.push("batchEmbedContents: requests is missing or empty".to_owned());
    }
    let want = format!("models/{model}");
    let mut texts = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        if r["model"] != want.as_str() {
            broken.push(format!(
                "batchEmbedContents: requests[{i}].model is {}, not {want:?} of the path",
                r["model"]
            ));
        }
        let parts = r["content"]["parts"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let text: String = parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("");
        if text.is_empty() {
            broken.push(format!(
                "batchEmbedContents: requests[{i}].content has no text part"
            ));
        }
        texts.push(text);
    }
    if broken.is_empty() {
        Ok(texts)
    } else {
        Err(broken)
    }
}

/// `POST /v1beta/models/{model}:batchEmbedContents`: one `values` vector per
/// request, in order, in Google's shape (no usage: Gemini reports none).
pub(crate) fn gemini_batch_embed(
    state: &EmbedState,
    model: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let checked = check_gemini(model, query, headers, body);
    let embedder = {
        let mut log = state.lock();
        let value = serde_json::from_slice(body)
            .unwrap_or_else(|_| serde_json::Value::String(String::from_utf8_lossy(body).into()));
        log.requests.push(value);
        if let Err(broken) = &checked {
            log.violations.extend(broken.iter().cloned());
        }
        log.embedder.clone()
    };
    let google_error = |status: StatusCode, name: &str, message: &str| {
        let body = serde_json::json!({"error": {
            "code": status.as_u16(), "message": message, "status": name,
        }});
        (status, axum::Json(body)).into_response()
    };
    match checked {
        Ok(texts) => {
            let embeddings: Vec<serde_json::Value> = texts
                .iter()
                .map(|t| serde_json::json!({"values": embedder(t)}))
                .collect();
            axum::Json(serde_json::json!({"embeddings": embeddings})).into_response()
        }
        Err(_) if headers.get("x-goog-api-key").is_none() => google_error(
            StatusCode::FORBIDDEN,
            "PERMISSION_DENIED",
            "Method doesn't allow unregistered callers. Please use API Key.",
        ),
        Err(broken) => google_error(
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
            &broken.join("; "),
        ),
    }
}
