//! Scripted replies of the fake Anthropic server and their rendering as the
//! exact SSE framing the Messages API uses (`event: <type>\ndata: <json>\n\n`).

use std::time::Duration;

use serde_json::{Value, json};

/// Token counts the fake reports: `message_start.message.usage` carries the
/// input side, `message_delta.usage.output_tokens` the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnthropicUsage {
    /// `input_tokens`.
    pub input_tokens: u64,
    /// `output_tokens` (the final count, in `message_delta`).
    pub output_tokens: u64,
    /// `cache_read_input_tokens`.
    pub cache_read_input_tokens: u64,
    /// `cache_creation_input_tokens`.
    pub cache_creation_input_tokens: u64,
}

impl AnthropicUsage {
    /// What every reply reports unless told otherwise: 25 input tokens,
    /// 12 output tokens, nothing read from or written to the cache.
    pub const DEFAULT: Self = Self {
        input_tokens: 25,
        output_tokens: 12,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 0,
    };
}

impl Default for AnthropicUsage {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One `tool_use` block the fake model produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolUse {
    id: String,
    name: String,
    input: String,
}

#[derive(Debug, Clone)]
pub(crate) enum ReplyKind {
    /// Optional text, then tool_use blocks.
    Blocks {
        text: Option<String>,
        tools: Vec<ToolUse>,
    },
    /// Some text, then an `event: error`.
    StreamError {
        kind: String,
        message: String,
    },
    HttpError {
        status: u16,
        body: Value,
    },
    RawSse(String),
    Hang,
}

/// A scripted answer for one request.
#[derive(Debug, Clone)]
pub struct AnthropicReply {
    pub(crate) kind: ReplyKind,
    pub(crate) delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) headers: Vec<(String, String)>,
    thinking: Option<(String, String)>,
    usage: AnthropicUsage,
    stop_reason: Option<String>,
}

impl AnthropicReply {
    fn new(kind: ReplyKind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            headers: Vec::new(),
            thinking: None,
            usage: AnthropicUsage::DEFAULT,
            stop_reason: None,
        }
    }

    /// A text answer: one text block streamed in several `text_delta`s,
    /// `stop_reason: end_turn`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ReplyKind::Blocks {
            text: Some(text.into()),
            tools: Vec::new(),
        })
    }

    /// Tool calls as `(id, name, input JSON)`: one `tool_use` block each, in
    /// order, each input streamed as `input_json_delta` pieces cut at awkward
    /// places; `stop_reason: tool_use`.
    pub fn tool_uses<I, A, B, C>(calls: I) -> Self
    where
        I: IntoIterator<Item = (A, B, C)>,
        A: Into<String>,
        B: Into<String>,
        C: Into<String>,
    {
        let tools = calls
            .into_iter()
            .map(|(id, name, input)| ToolUse {
                id: id.into(),
                name: name.into(),
                input: input.into(),
            })
            .collect();
        Self::new(ReplyKind::Blocks { text: None, tools })
    }

    /// A text block before the tool calls of a `tool_uses` reply (replaces
    /// the text of a `text` reply).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let ReplyKind::Blocks { text: t, .. } = &mut self.kind {
            *t = Some(text.into());
        }
        self
    }

    /// A thinking block before the other blocks: `thinking_delta` pieces,
    /// then one `signature_delta`.
    pub fn with_thinking(
        mut self,
        thinking: impl Into<String>,
        signature: impl Into<String>,
    ) -> Self {
        self.thinking = Some((thinking.into(), signature.into()));
        self
    }

    /// Reports these counts instead of `AnthropicUsage::DEFAULT`.
    pub fn with_usage(
        mut self,
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
    ) -> Self {
        self.usage = AnthropicUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: cache_read,
            cache_creation_input_tokens: cache_write,
        };
        self
    }

    /// Overrides the `stop_reason` (e.g. `max_tokens`, `refusal`).
    pub fn with_stop_reason(mut self, reason: impl Into<String>) -> Self {
        self.stop_reason = Some(reason.into());
        self
    }

    /// An HTTP error status with exactly this JSON body.
    pub fn http_error(status: u16, body: Value) -> Self {
        Self::new(ReplyKind::HttpError { status, body })
    }

    /// An HTTP error with Anthropic's body:
    /// `{"type":"error","error":{"type":..,"message":..},"request_id":..}`.
    pub fn api_error(status: u16, error_type: &str, message: &str) -> Self {
        Self::http_error(status, error_body(error_type, message))
    }

    /// A stream that starts a text answer, then sends `event: error` with
    /// this `error.type` and message, and ends.
    pub fn stream_error(error_type: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ReplyKind::StreamError {
            kind: error_type.into(),
            message: message.into(),
        })
    }

    /// Exactly these bytes as a `text/event-stream` body (for malformed
    /// events and cut streams).
    pub fn raw_sse(body: impl Into<String>) -> Self {
        Self::new(ReplyKind::RawSse(body.into()))
    }

    /// Response headers, then nothing until the client gives up.
    pub fn hang() -> Self {
        Self::new(ReplyKind::Hang)
    }

    /// Waits this long before sending anything, headers included.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Waits this long between two streamed events.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Adds a response header (e.g. `retry-after`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The SSE frames of a streamed reply, one per event; `None` for error,
    /// raw and hanging replies.
    pub(crate) fn frames(&self, model: &str) -> Option<Vec<Vec<u8>>> {
        let mut w = Writer::default();
        w.start(model, &self.usage);
        let mut index = 0u32;
        if let Some((thinking, signature)) = &self.thinking {
            w.thinking_block(index, thinking, signature);
            index += 1;
        }
        match &self.kind {
            ReplyKind::Blocks { text, tools } => {
                if let Some(text) = text {
                    w.text_block(index, text);
                    index += 1;
                }
                for t in tools {
                    w.tool_block(index, t);
                    index += 1;
                }
                let default = if tools.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                };
                let reason = self.stop_reason.as_deref().unwrap_or(default);
                w.finish(reason, self.usage.output_tokens);
            }
            ReplyKind::StreamError { kind, message } => {
                w.event(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}),
                );
                for piece in ["Partial ", "answer"] {
                    w.event(
                        "content_block_delta",
                        &json!({"type": "content_block_delta", "index": index,
                                "delta": {"type": "text_delta", "text": piece}}),
                    );
                }
                w.event("error", &error_event(kind, message));
            }
            ReplyKind::HttpError { .. } | ReplyKind::RawSse(_) | ReplyKind::Hang => return None,
        }
        Some(w.frames)
    }
}

/// The default answer: `echo: <text>` in two deltas, with default usage,
/// as one buffer.
pub(crate) fn echo_body(model: &str, text: &str) -> Vec<u8> {
    let mut w = Writer::default();
    w.start(model, &AnthropicUsage::DEFAULT);
    let mut echo = String::with_capacity(6 + text.len());
    echo.push_str("echo: ");
    echo.push_str(text);
    w.text_block(0, &echo);
    w.finish("end_turn", AnthropicUsage::DEFAULT.output_tokens);
    w.frames.concat()
}

/// Anthropic's error body.
pub(crate) fn error_body(error_type: &str, message: &str) -> Value {
    json!({
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": "req_fake",
    })
}

fn error_event(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}})
}

/// Builds the event frames of one answer.
#[derive(Default)]
struct Writer {
    frames: Vec<Vec<u8>>,
}

impl Writer {
    fn event(&mut self, name: &str, data: &Value) {
        let mut buf = Vec::with_capacity(64 + name.len());
        buf.extend_from_slice(b"event: ");
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b"\ndata: ");
        // Writing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut buf, data);
        buf.extend_from_slice(b"\n\n");
        self.frames.push(buf);
    }

    /// `message_start`, then a `ping`.
    fn start(&mut self, model: &str, usage: &AnthropicUsage) {
        self.event(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": "msg_fake0001",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {
                    "input_tokens": usage.input_tokens,
                    "cache_creation_input_tokens": usage.cache_creation_input_tokens,
                    "cache_read_input_tokens": usage.cache_read_input_tokens,
                    "output_tokens": 1,
                },
            }}),
        );
        self.event("ping", &json!({"type": "ping"}));
    }

    fn delta(&mut self, index: u32, delta: Value) {
        self.event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }

    fn stop(&mut self, index: u32) {
        self.event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        );
    }

    fn thinking_block(&mut self, index: u32, thinking: &str, signature: &str) {
        self.event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        );
        for piece in split(thinking, 3) {
            self.delta(index, json!({"type": "thinking_delta", "thinking": piece}));
        }
        self.delta(
            index,
            json!({"type": "signature_delta", "signature": signature}),
        );
        self.stop(index);
    }

    fn text_block(&mut self, index: u32, text: &str) {
        self.event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "text", "text": ""}}),
        );
        for piece in split(text, 2) {
            self.delta(index, json!({"type": "text_delta", "text": piece}));
        }
        self.stop(index);
    }

    fn tool_block(&mut self, index: u32, tool: &ToolUse) {
        self.event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": tool.id,
                                      "name": tool.name, "input": {}}}),
        );
        // The API opens every input with an empty fragment.
        self.delta(
            index,
            json!({"type": "input_json_delta", "partial_json": ""}),
        );
        for piece in awkward_split(&tool.input) {
            self.delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            );
        }
        self.stop(index);
    }

    /// `message_delta` with the stop reason and final output count, then
    /// `message_stop`.
    fn finish(&mut self, stop_reason: &str, output_tokens: u64) {
        self.event(
            "message_delta",
            &json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                    "usage": {"output_tokens": output_tokens}}),
        );
        self.event("message_stop", &json!({"type": "message_stop"}));
    }
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

/// Pieces of 1, 4, 2, 7 and 3 bytes in turn (widened to char boundaries), so
/// fragments end inside keys, strings and escapes.
fn awkward_split(s: &str) -> Vec<&str> {
    const SIZES: [usize; 5] = [1, 4, 2, 7, 3];
    let mut out = Vec::new();
    let mut rest = s;
    let mut i = 0;
    while !rest.is_empty() {
        let mut cut = SIZES[i % SIZES.len()].min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_keep_text_and_char_boundaries() {
        for s in ["", "a", "héllo wörld 🌍", "{\"path\":\"/tmp/ü\\\"x\"}"] {
            assert_eq!(split(s, 3).concat(), s);
            let pieces = awkward_split(s);
            assert_eq!(pieces.concat(), s);
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(awkward_split("abcdefghij"), vec!["a", "bcde", "fg", "hij"]);
    }

    #[test]
    fn echo_body_frames_like_anthropic() {
        let body = String::from_utf8(echo_body("m", "hé \"q\"")).unwrap();
        let frames: Vec<&str> = body.split_terminator("\n\n").collect();
        let names: Vec<&str> = frames
            .iter()
            .map(|f| f.lines().next().unwrap().strip_prefix("event: ").unwrap())
            .collect();
        assert_eq!(
            names,
            vec![
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let mut text = String::new();
        for f in &frames {
            let data = f.lines().nth(1).unwrap().strip_prefix("data: ").unwrap();
            let v: Value = serde_json::from_str(data).unwrap();
            if let Some(t) = v["delta"]["text"].as_str() {
                text.push_str(t);
            }
        }
        assert_eq!(text, "echo: hé \"q\"");
    }
}
