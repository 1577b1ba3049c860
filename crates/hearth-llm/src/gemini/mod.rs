//! The Gemini API as a wire format of [`HttpProvider`]. Requests go to
//! `POST {base_url}/models/{model}:streamGenerateContent?alt=sse` with the key
//! in the `x-goog-api-key` header; the answer is an SSE stream of
//! `GenerateContentResponse` objects, one per `data:` line.
//!
//! Gemini sends whole function calls (never argument fragments) and no call
//! ids, so calls get ids `call_<n>` in the order they arrive in one answer.
//! Thought signatures are reported as signature-only `ThinkingDelta`s and go
//! back, on the next turn, only to the provider that produced them.

mod wire;

use hearth_core::{ChatRequest, FinishReason, StreamEvent, Usage};
use reqwest::Url;
use reqwest::header::HeaderName;

use crate::classify::ErrorFacts;
use crate::decoder::{EventDecoder, EventFormat, Queue};
use crate::http::{self, HttpConfig, HttpProvider, KeyHeader, Route, WireFormat};
use crate::transport::cap;
use crate::{Capabilities, ErrorKind, LlmError};

/// The public Gemini API base URL.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Settings of one Gemini API endpoint. An empty `base_url` is refused:
/// config fills in [`DEFAULT_BASE_URL`] where none is set.
pub type GeminiConfig = HttpConfig<GeminiWire>;

/// A `Provider` speaking the Gemini API's `streamGenerateContent`.
pub type GeminiProvider = HttpProvider<GeminiWire>;

/// The decoder of Gemini's chunk stream.
pub type GeminiDecoder = EventDecoder<GeminiEvents>;

/// The Gemini API wire format; it has no settings of its own.
#[derive(Debug, Clone, Default)]
pub struct GeminiWire;

impl WireFormat for GeminiWire {
    type Events = GeminiEvents;
    const ROUTE: Route = Route::PerModel(model_path);
    const EMBEDDINGS: Option<crate::embeddings::EmbeddingsApi> =
        Some(crate::embeddings::EmbeddingsApi::Gemini);
    /// In a header, never in the URL.
    const KEY: KeyHeader = KeyHeader {
        name: HeaderName::from_static("x-goog-api-key"),
        prefix: "",
    };
    const CAPABILITIES: Capabilities = Capabilities::NATIVE;
    const DEFAULT_BASE_URL: Option<&'static str> = None;

    fn validate(&self, url: &Url) -> Result<(), String> {
        if url.query().is_some() || url.fragment().is_some() {
            // A `?key=` here would put the key in the URL, and the method is appended.
            return Err("base_url must not have a query or fragment".to_owned());
        }
        Ok(())
    }

    fn body(&self, request: &ChatRequest, provider: &str) -> Result<Vec<u8>, String> {
        http::encode(&wire::WireRequest::from_request(request, provider)?)
    }
}

/// The path of the streaming method for `model`. A leading `models/` is
/// accepted; names with characters outside `[A-Za-z0-9._-/]` or empty, `.`
/// or `..` segments are refused rather than turned into a surprising URL.
fn model_path(model: &str) -> Result<String, String> {
    let model = model.strip_prefix("models/").unwrap_or(model);
    let bad_char = model
        .bytes()
        .any(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/')));
    let bad_segment = model.split('/').any(|s| matches!(s, "" | "." | ".."));
    if bad_char || bad_segment {
        return Err(format!(
            "model name {:?} is not a valid Gemini model name",
            cap(model, 100)
        ));
    }
    Ok(format!("/models/{model}:streamGenerateContent?alt=sse"))
}

/// The path of a `batchEmbedContents` call for `model` (checked as a chat
/// call's is), and the model's resource name that each request names.
pub(crate) fn embed_path(model: &str) -> Result<(String, String), String> {
    model_path(model)?;
    let model = model.strip_prefix("models/").unwrap_or(model);
    Ok((
        format!("/models/{model}:batchEmbedContents"),
        format!("models/{model}"),
    ))
}

/// A call-id prefix unique across streams and restarts: time plus a counter.
fn call_prefix() -> String {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("call_{ms:x}{n:x}")
}

/// The per-answer state of a Gemini stream.
#[derive(Debug)]
pub struct GeminiEvents {
    /// The last `finishReason` seen, as sent; mapped at the end, when it is
    /// known whether the answer called tools.
    finish: Option<String>,
    /// Usage merged field by field over all chunks, sent once before `Finish`.
    usage: Option<Usage>,
    /// Function calls seen so far: the next call's index.
    calls: u32,
    /// Gemini sends no call ids; ours must stay unique across a thread's
    /// history, since other providers pair results to calls by id after a
    /// model switch.
    call_prefix: String,
}

impl Default for GeminiEvents {
    /// A fresh call-id prefix.
    fn default() -> Self {
        Self {
            finish: None,
            usage: None,
            calls: 0,
            call_prefix: call_prefix(),
        }
    }
}

impl EventFormat for GeminiEvents {
    /// Gemini has no end sentinel: a last event without its blank line still
    /// counts.
    const FLUSH_AT_EOF: bool = true;

    fn event(&mut self, out: &mut Queue, _event: Option<&str>, data: &str) -> Result<(), LlmError> {
        let chunk: wire::Chunk =
            serde_json::from_str(data).map_err(|e| out.bad_json("stream chunk", &e))?;
        if let Some(err) = chunk.error.as_ref().filter(|e| !e.is_null()) {
            let facts = ErrorFacts::from_json(err);
            return Err(out.provider_error("provider error mid-stream", &facts));
        }
        if let Some(reason) = chunk
            .prompt_feedback
            .and_then(|f| f.block_reason)
            .filter(|r| !r.is_empty())
        {
            return Err(out.error(
                ErrorKind::ContentFilter,
                format!("prompt blocked by the provider: {}", cap(&reason, 64)),
            ));
        }
        if let Some(candidate) = chunk.candidates.and_then(|c| c.into_iter().next()) {
            let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                self.handle_part(out, part);
            }
            if let Some(reason) = candidate.finish_reason.filter(|r| !r.is_empty()) {
                self.finish = Some(reason);
            }
        }
        if let Some(u) = chunk.usage_metadata {
            let usage = self.usage.get_or_insert_with(Usage::default);
            let merge = |old: &mut Option<u64>, new: Option<u64>| {
                if new.is_some() {
                    *old = new;
                }
            };
            merge(&mut usage.input_tokens, u.prompt_token_count);
            merge(&mut usage.output_tokens, u.candidates_token_count);
            merge(&mut usage.cached_tokens, u.cached_content_token_count);
            merge(&mut usage.reasoning_tokens, u.thoughts_token_count);
        }
        Ok(())
    }

    /// A `finishReason` followed by the end of the body is a complete
    /// answer; no `finishReason` means a cut.
    fn end_of_body(&mut self, out: &mut Queue) -> Result<(), LlmError> {
        match self.finish.take() {
            Some(reason) => {
                self.close(out, &reason);
                Ok(())
            }
            None => {
                out.finish("cut");
                Err(out.malformed("stream ended without a finishReason"))
            }
        }
    }
}

impl GeminiEvents {
    fn handle_part(&mut self, out: &mut Queue, part: wire::Part) {
        let signature = part.thought_signature.filter(|s| !s.is_empty());
        if part.thought == Some(true) {
            let text = part.text.unwrap_or_default();
            if !text.is_empty() || signature.is_some() {
                out.push(StreamEvent::ThinkingDelta { text, signature });
            }
            return;
        }
        if let Some(text) = part.text.filter(|t| !t.is_empty()) {
            out.push(StreamEvent::TextDelta(text));
        }
        if let Some(call) = part.function_call {
            let index = self.calls;
            self.calls = self.calls.saturating_add(1);
            let arguments = match call.args {
                Some(args @ serde_json::Value::Object(_)) => args.to_string(),
                _ => String::from("{}"),
            };
            out.push(StreamEvent::ToolCallDelta {
                index,
                id: Some(format!("{}_{index}", self.call_prefix)),
                name: call.name.filter(|n| !n.is_empty()),
                arguments,
            });
        }
        if let Some(sig) = signature {
            out.push(StreamEvent::ThinkingDelta {
                text: String::new(),
                signature: Some(sig),
            });
        }
    }

    /// The events closing a complete answer: usage, then `Finish`.
    fn close(&mut self, out: &mut Queue, reason: &str) {
        if let Some(u) = self.usage.take() {
            out.push(StreamEvent::Usage(u));
        }
        let reason = match reason {
            "STOP" if self.calls > 0 => FinishReason::ToolCalls,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII"
            | "IMAGE_SAFETY" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_ascii_lowercase()),
        };
        out.push(StreamEvent::Finish(reason));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(base: &str) -> Result<GeminiProvider, LlmError> {
        GeminiProvider::new(GeminiConfig::new("g", base), reqwest::Client::new())
    }

    #[test]
    fn refuses_an_empty_base_or_one_with_a_query() {
        assert!(provider("").is_err());
        assert!(provider("http://h/v1beta?key=abc").is_err());
        assert!(provider("http://h/v1beta#x").is_err());
        assert!(provider(DEFAULT_BASE_URL).is_ok());
    }

    #[test]
    fn builds_endpoints_and_rejects_odd_model_names() {
        let p = provider("http://127.0.0.1:1/v1beta").unwrap();
        let url = |model| p.target(model).map(|(url, _)| url.to_string());
        assert_eq!(
            url("gemini-2.5-flash").unwrap(),
            "http://127.0.0.1:1/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            url("models/gemini-2.5-pro").unwrap(),
            "http://127.0.0.1:1/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse"
        );
        assert!(url("tuned/my_model.v1").is_ok());
        for bad in [
            "",
            "a b",
            "x:generateContent",
            "x?key=1",
            "../../etc",
            "a//b",
            "a/",
            "ü",
            "x#y",
            "x%2e",
        ] {
            let err = url(bad).unwrap_err();
            assert_eq!(err.kind, ErrorKind::InvalidRequest, "{bad:?}");
        }
    }
}
