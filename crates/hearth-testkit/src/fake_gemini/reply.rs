//! Scripted Gemini replies and their rendering as Gemini's SSE frames
//! (`data: <GenerateContentResponse>\r\n\r\n`, no end sentinel).

use std::time::Duration;

use serde_json::{Map, Value, json};

/// Token counts the fake reports in `usageMetadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeminiUsage {
    /// `promptTokenCount`.
    pub prompt_tokens: u64,
    /// `candidatesTokenCount`.
    pub candidates_tokens: u64,
    /// `cachedContentTokenCount` (left out when zero, as Gemini does).
    pub cached_tokens: u64,
    /// `thoughtsTokenCount` (left out when zero, as Gemini does).
    pub thoughts_tokens: u64,
}

impl GeminiUsage {
    /// What every reply reports unless told otherwise: 12 prompt tokens
    /// (3 cached), 7 candidate tokens and 2 thought tokens.
    pub const DEFAULT: Self = Self {
        prompt_tokens: 12,
        candidates_tokens: 7,
        cached_tokens: 3,
        thoughts_tokens: 2,
    };

    /// The full `usageMetadata` object of a final chunk.
    fn final_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("promptTokenCount".into(), self.prompt_tokens.into());
        m.insert("candidatesTokenCount".into(), self.candidates_tokens.into());
        m.insert(
            "totalTokenCount".into(),
            (self.prompt_tokens + self.candidates_tokens + self.thoughts_tokens).into(),
        );
        if self.cached_tokens > 0 {
            m.insert("cachedContentTokenCount".into(), self.cached_tokens.into());
        }
        if self.thoughts_tokens > 0 {
            m.insert("thoughtsTokenCount".into(), self.thoughts_tokens.into());
        }
        m.insert(
            "promptTokensDetails".into(),
            json!([{"modality": "TEXT", "tokenCount": self.prompt_tokens}]),
        );
        Value::Object(m)
    }

    /// The partial `usageMetadata` Gemini puts on chunks before the last.
    fn partial_json(&self) -> Value {
        json!({"promptTokenCount": self.prompt_tokens, "totalTokenCount": self.prompt_tokens})
    }
}

impl Default for GeminiUsage {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Debug, Clone)]
pub(crate) enum GeminiReplyKind {
    Text(String),
    FunctionCalls(Vec<(String, Value)>),
    HttpError { status: u16, body: Value },
    RawSse(String),
    RawChunks(Vec<Vec<u8>>),
    Hang,
}

/// A scripted answer for one `streamGenerateContent` request.
#[derive(Debug, Clone)]
pub struct GeminiReply {
    pub(crate) kind: GeminiReplyKind,
    pub(crate) delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) headers: Vec<(String, String)>,
    thought: Option<String>,
    thought_signature: Option<String>,
    usage: Option<GeminiUsage>,
    finish_reason: Option<String>,
}

impl GeminiReply {
    fn new(kind: GeminiReplyKind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            headers: Vec::new(),
            thought: None,
            thought_signature: None,
            usage: Some(GeminiUsage::DEFAULT),
            finish_reason: None,
        }
    }

    /// A text answer in several chunks; the last carries `finishReason: STOP`
    /// and the full `usageMetadata`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(GeminiReplyKind::Text(text.into()))
    }

    /// Whole function calls `(name, args object)`, all as parts of one chunk
    /// (how Gemini sends parallel calls), with `finishReason: STOP`.
    pub fn function_calls<S: Into<String>>(calls: Vec<(S, Value)>) -> Self {
        Self::new(GeminiReplyKind::FunctionCalls(
            calls.into_iter().map(|(n, a)| (n.into(), a)).collect(),
        ))
    }

    /// An HTTP error status with a JSON body (Gemini's is
    /// `{"error": {"code", "message", "status"}}`).
    pub fn http_error(status: u16, body: Value) -> Self {
        Self::new(GeminiReplyKind::HttpError { status, body })
    }

    /// Exactly these bytes as a `text/event-stream` body.
    pub fn raw_sse(body: impl Into<String>) -> Self {
        Self::new(GeminiReplyKind::RawSse(body.into()))
    }

    /// Exactly these bytes as a `text/event-stream` body, one write per
    /// chunk (`with_chunk_delay` apart), to split frames at chosen bytes.
    pub fn raw_chunks(chunks: Vec<Vec<u8>>) -> Self {
        Self::new(GeminiReplyKind::RawChunks(chunks))
    }

    /// Response headers, then nothing until the client gives up.
    pub fn hang() -> Self {
        Self::new(GeminiReplyKind::Hang)
    }

    /// Streams this thought summary (`{"text", "thought": true}` parts) first.
    pub fn with_thought(mut self, thought: impl Into<String>) -> Self {
        self.thought = Some(thought.into());
        self
    }

    /// Puts this `thoughtSignature` on the first functionCall part, or for a
    /// text answer on its first (non-thought) part.
    pub fn with_thought_signature(mut self, signature: impl Into<String>) -> Self {
        self.thought_signature = Some(signature.into());
        self
    }

    /// Reports these counts instead of `GeminiUsage::DEFAULT`.
    pub fn with_usage(mut self, prompt: u64, candidates: u64, cached: u64, thoughts: u64) -> Self {
        self.usage = Some(GeminiUsage {
            prompt_tokens: prompt,
            candidates_tokens: candidates,
            cached_tokens: cached,
            thoughts_tokens: thoughts,
        });
        self
    }

    /// Sends no `usageMetadata` at all.
    pub fn without_usage(mut self) -> Self {
        self.usage = None;
        self
    }

    /// Replaces `STOP` as the final chunk's `finishReason` (e.g. `"SAFETY"`).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// Adds a response header (e.g. `retry-after`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits this long before sending anything, headers included.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits this long between two streamed chunks.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// The SSE frames of a streamed reply, one per chunk; `None` for error,
    /// raw and hanging replies.
    pub(crate) fn frames(&self, model: &str) -> Option<Vec<Vec<u8>>> {
        let mut chunks: Vec<(Vec<Value>, Option<&str>)> = Vec::new();
        if let Some(t) = &self.thought {
            for piece in split(t, 2) {
                chunks.push((vec![json!({"text": piece, "thought": true})], None));
            }
        }
        let sig = self.thought_signature.as_deref();
        let finish = Some(self.finish_reason.as_deref().unwrap_or("STOP"));
        match &self.kind {
            GeminiReplyKind::Text(text) => {
                let mut pieces = split(text, 3);
                if pieces.is_empty() {
                    pieces.push("");
                }
                let last = pieces.len() - 1;
                for (i, piece) in pieces.into_iter().enumerate() {
                    let mut part = json!({"text": piece});
                    if i == 0
                        && let Some(sig) = sig
                    {
                        part["thoughtSignature"] = sig.into();
                    }
                    chunks.push((vec![part], (i == last).then_some(finish).flatten()));
                }
            }
            GeminiReplyKind::FunctionCalls(calls) => {
                let parts = calls
                    .iter()
                    .enumerate()
                    .map(|(i, (name, args))| {
                        let mut part = json!({"functionCall": {"name": name, "args": args}});
                        if i == 0
                            && let Some(sig) = sig
                        {
                            part["thoughtSignature"] = sig.into();
                        }
                        part
                    })
                    .collect();
                chunks.push((parts, finish));
            }
            GeminiReplyKind::HttpError { .. }
            | GeminiReplyKind::RawSse(_)
            | GeminiReplyKind::RawChunks(_)
            | GeminiReplyKind::Hang => {
                return None;
            }
        }
        let n = chunks.len();
        let frames = chunks
            .into_iter()
            .enumerate()
            .map(|(i, (parts, finish))| {
                let usage = self.usage.map(|u| {
                    if i + 1 == n {
                        u.final_json()
                    } else {
                        u.partial_json()
                    }
                });
                frame(model, parts, finish, usage)
            })
            .collect();
        Some(frames)
    }
}

/// The default answer: `echo: <text>` in two chunks, the second with
/// `finishReason: STOP` and `GeminiUsage::DEFAULT`, in one buffer.
pub(crate) fn echo_body(model: &str, text: &str) -> Vec<u8> {
    let mut cut = text.len() / 2;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let (a, b) = text.split_at(cut);
    let u = GeminiUsage::DEFAULT;
    let mut buf = frame(
        model,
        vec![json!({"text": format!("echo: {a}")})],
        None,
        Some(u.partial_json()),
    );
    buf.extend(frame(
        model,
        vec![json!({"text": b})],
        Some("STOP"),
        Some(u.final_json()),
    ));
    buf
}

/// One `data: <json>\r\n\r\n` frame of a `GenerateContentResponse`.
fn frame(model: &str, parts: Vec<Value>, finish: Option<&str>, usage: Option<Value>) -> Vec<u8> {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(f) = finish {
        candidate["finishReason"] = f.into();
    }
    let mut chunk = json!({"candidates": [candidate]});
    if let Some(u) = usage {
        chunk["usageMetadata"] = u;
    }
    chunk["modelVersion"] = model.into();
    chunk["responseId"] = "fake-gemini-response".into();
    let mut buf = b"data: ".to_vec();
    // Writing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut buf, &chunk);
    buf.extend_from_slice(b"\r\n\r\n");
    buf
}

/// Up to `n` non-empty pieces of about equal length, cut at char boundaries.
fn split(s: &str, n: usize) -> Vec<&str> {
    let mut out = Vec::with_capacity(n);
    let mut rest = s;
    for left in (1..=n).rev() {
        if rest.is_empty() {
            break;
        }
        let mut cut = rest.len().div_ceil(left).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn datas(body: &[u8]) -> Vec<Value> {
        let body = std::str::from_utf8(body).unwrap();
        assert!(body.ends_with("\r\n\r\n"));
        body.split("\r\n\r\n")
            .filter(|f| !f.is_empty())
            .map(|f| serde_json::from_str(f.strip_prefix("data: ").unwrap()).unwrap())
            .collect()
    }

    #[test]
    fn echo_body_is_crlf_framed_json() {
        let chunks = datas(&echo_body("m", "hé \"quoted\""));
        assert_eq!(chunks.len(), 2);
        let text: String = chunks
            .iter()
            .map(|c| {
                c["candidates"][0]["content"]["parts"][0]["text"]
                    .as_str()
                    .unwrap()
            })
            .collect();
        assert_eq!(text, "echo: hé \"quoted\"");
        assert_eq!(chunks[1]["candidates"][0]["finishReason"], "STOP");
        assert_eq!(chunks[1]["usageMetadata"]["thoughtsTokenCount"], 2);
    }

    #[test]
    fn function_calls_share_one_chunk_and_signature_goes_first() {
        let reply = GeminiReply::function_calls(vec![("a", json!({"x": 1})), ("b", json!({}))])
            .with_thought("hmm")
            .with_thought_signature("sig");
        let frames = reply.frames("m").unwrap();
        let chunks: Vec<Value> = frames.iter().flat_map(|f| datas(f)).collect();
        let last = chunks.last().unwrap();
        let parts = last["candidates"][0]["content"]["parts"]
            .as_array()
            .unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0]["thoughtSignature"], "sig");
        assert!(parts[1].get("thoughtSignature").is_none());
        assert_eq!(
            chunks[0]["candidates"][0]["content"]["parts"][0]["thought"],
            true
        );
    }
}
