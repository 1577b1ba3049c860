//! Scripted replies of the fake Responses API server and their rendering as
//! the exact SSE framing OpenAI uses: `event: <type>\ndata: <json>\n\n`, every
//! payload carrying its `type` and an increasing `sequence_number`, the
//! stream ending with `response.completed`, `.incomplete` or `.failed`.

use std::time::Duration;

use serde_json::{Value, json};

/// Token counts the fake reports in the final `response.usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponsesUsage {
    /// `input_tokens`.
    pub input_tokens: u64,
    /// `output_tokens`.
    pub output_tokens: u64,
    /// `input_tokens_details.cached_tokens`.
    pub cached_tokens: u64,
    /// `output_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: u64,
}

impl ResponsesUsage {
    /// What every reply reports unless told otherwise: 21 input tokens,
    /// 9 output tokens, none cached, none spent on reasoning.
    pub const DEFAULT: Self = Self {
        input_tokens: 21,
        output_tokens: 9,
        cached_tokens: 0,
        reasoning_tokens: 0,
    };

    fn to_json(self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "input_tokens_details": {"cached_tokens": self.cached_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
            "total_tokens": self.input_tokens + self.output_tokens,
        })
    }
}

impl Default for ResponsesUsage {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One `function_call` output item the fake model produces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FunctionCall {
    call_id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Clone)]
pub(crate) enum ReplyKind {
    /// Optional text, then function calls; ends with `response.completed`.
    Output {
        text: Option<String>,
        calls: Vec<FunctionCall>,
    },
    /// Partial text, then `response.incomplete` with this reason.
    Incomplete {
        reason: String,
    },
    /// `response.failed` with this error.
    Failed {
        code: String,
        message: String,
    },
    /// Partial text, then an `error` event.
    ErrorEvent {
        code: String,
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
pub struct ResponsesReply {
    pub(crate) kind: ReplyKind,
    pub(crate) delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) headers: Vec<(String, String)>,
    reasoning: Option<(String, String)>,
    usage: ResponsesUsage,
}

impl ResponsesReply {
    fn new(kind: ReplyKind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            headers: Vec::new(),
            reasoning: None,
            usage: ResponsesUsage::DEFAULT,
        }
    }

    /// A text answer: one `message` item whose `output_text` part streams in
    /// several `response.output_text.delta`s.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ReplyKind::Output {
            text: Some(text.into()),
            calls: Vec::new(),
        })
    }

    /// Function calls as `(call_id, name, arguments JSON)`: one `function_call`
    /// item each, in order, each with its arguments streamed as
    /// `response.function_call_arguments.delta` pieces cut at awkward places.
    pub fn function_calls<I, A, B, C>(calls: I) -> Self
    where
        I: IntoIterator<Item = (A, B, C)>,
        A: Into<String>,
        B: Into<String>,
        C: Into<String>,
    {
        let calls = calls
            .into_iter()
            .map(|(call_id, name, arguments)| FunctionCall {
                call_id: call_id.into(),
                name: name.into(),
                arguments: arguments.into(),
            })
            .collect();
        Self::new(ReplyKind::Output { text: None, calls })
    }

    /// A message item before the calls of a `function_calls` reply (replaces
    /// the text of a `text` reply).
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        if let ReplyKind::Output { text: t, .. } = &mut self.kind {
            *t = Some(text.into());
        }
        self
    }

    /// A `reasoning` item first: its summary streamed as
    /// `response.reasoning_summary_text.delta`s, its `encrypted_content` in
    /// `response.output_item.done` (as with `include:
    /// ["reasoning.encrypted_content"]`).
    pub fn with_reasoning(
        mut self,
        summary: impl Into<String>,
        encrypted_content: impl Into<String>,
    ) -> Self {
        self.reasoning = Some((summary.into(), encrypted_content.into()));
        self
    }

    /// Reports these counts instead of `ResponsesUsage::DEFAULT`.
    pub fn with_usage(mut self, input: u64, output: u64, cached: u64, reasoning: u64) -> Self {
        self.usage = ResponsesUsage {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: cached,
            reasoning_tokens: reasoning,
        };
        self
    }

    /// Some text, then `response.incomplete` with
    /// `incomplete_details.reason` (e.g. `max_output_tokens`, `content_filter`).
    pub fn incomplete(reason: impl Into<String>) -> Self {
        Self::new(ReplyKind::Incomplete {
            reason: reason.into(),
        })
    }

    /// `response.created`, `response.in_progress`, then `response.failed`
    /// whose `response.error` has this code and message.
    pub fn failed(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ReplyKind::Failed {
            code: code.into(),
            message: message.into(),
        })
    }

    /// Some text, then an `error` event with this code and message, and the end.
    pub fn error_event(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(ReplyKind::ErrorEvent {
            code: code.into(),
            message: message.into(),
        })
    }

    /// An HTTP error status with exactly this JSON body.
    pub fn http_error(status: u16, body: Value) -> Self {
        Self::new(ReplyKind::HttpError { status, body })
    }

    /// An HTTP error with OpenAI's body:
    /// `{"error":{"message":..,"type":..,"param":null,"code":..}}`.
    pub fn api_error(status: u16, error_type: &str, code: Option<&str>, message: &str) -> Self {
        Self::http_error(status, error_body(error_type, code, message))
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

    /// The SSE frames of a streamed reply, one per event; `None` for HTTP
    /// error, raw and hanging replies.
    pub(crate) fn frames(&self, model: &str) -> Option<Vec<Vec<u8>>> {
        let mut w = Writer::new(model);
        w.start();
        if let Some((summary, encrypted)) = &self.reasoning {
            w.reasoning_item(summary, encrypted);
        }
        match &self.kind {
            ReplyKind::Output { text, calls } => {
                if let Some(text) = text {
                    w.message_item(text, "completed");
                }
                for call in calls {
                    w.call_item(call);
                }
                w.end("completed", Some(self.usage), None, None);
            }
            ReplyKind::Incomplete { reason } => {
                w.message_item("Partial answer", "incomplete");
                w.end("incomplete", Some(self.usage), Some(reason), None);
            }
            ReplyKind::Failed { code, message } => {
                w.end("failed", None, None, Some((code, message)));
            }
            ReplyKind::ErrorEvent { code, message } => {
                w.message_item("Partial answer", "incomplete");
                w.event(
                    "error",
                    json!({"code": code, "message": message, "param": null}),
                );
            }
            ReplyKind::HttpError { .. } | ReplyKind::RawSse(_) | ReplyKind::Hang => return None,
        }
        Some(w.frames)
    }
}

/// The default answer: `echo: <text>` in a few deltas, with default usage,
/// as one buffer.
pub(crate) fn echo_body(model: &str, text: &str) -> Vec<u8> {
    let mut w = Writer::new(model);
    w.start();
    let mut echo = String::with_capacity(6 + text.len());
    echo.push_str("echo: ");
    echo.push_str(text);
    w.message_item(&echo, "completed");
    w.end("completed", Some(ResponsesUsage::DEFAULT), None, None);
    w.frames.concat()
}

/// OpenAI's error body.
pub(crate) fn error_body(error_type: &str, code: Option<&str>, message: &str) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
}

/// Builds the event frames of one answer, numbering them and collecting the
/// finished output items for the final response object.
struct Writer {
    frames: Vec<Vec<u8>>,
    seq: u64,
    model: String,
    output: Vec<Value>,
}

impl Writer {
    fn new(model: &str) -> Self {
        Self {
            frames: Vec::new(),
            seq: 0,
            model: model.to_owned(),
            output: Vec::new(),
        }
    }

    /// One frame: `event: <type>` and the payload with `type` and
    /// `sequence_number` added.
    fn event(&mut self, kind: &str, mut data: Value) {
        if let Some(obj) = data.as_object_mut() {
            obj.insert("type".into(), Value::from(kind));
            obj.insert("sequence_number".into(), Value::from(self.seq));
        }
        self.seq += 1;
        let mut buf = Vec::with_capacity(96 + kind.len());
        buf.extend_from_slice(b"event: ");
        buf.extend_from_slice(kind.as_bytes());
        buf.extend_from_slice(b"\ndata: ");
        // Writing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut buf, &data);
        buf.extend_from_slice(b"\n\n");
        self.frames.push(buf);
    }

    fn response(&self, status: &str) -> Value {
        json!({
            "id": "resp_fake0001",
            "object": "response",
            "created_at": 1_700_000_000,
            "status": status,
            "background": false,
            "error": null,
            "incomplete_details": null,
            "instructions": null,
            "max_output_tokens": null,
            "model": self.model,
            "output": [],
            "parallel_tool_calls": true,
            "previous_response_id": null,
            "reasoning": {"effort": null, "summary": null},
            "store": false,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": null,
            "metadata": {},
        })
    }

    /// `response.created`, then `response.in_progress`.
    fn start(&mut self) {
        for kind in ["response.created", "response.in_progress"] {
            let response = self.response("in_progress");
            self.event(kind, json!({"response": response}));
        }
    }

    fn index(&self) -> usize {
        self.output.len()
    }

    fn reasoning_item(&mut self, summary: &str, encrypted: &str) {
        let index = self.index();
        let id = format!("rs_fake{index:04}");
        self.event(
            "response.output_item.added",
            json!({"output_index": index,
                   "item": {"id": id, "type": "reasoning", "summary": []}}),
        );
        let part = json!({"type": "summary_text", "text": ""});
        self.event(
            "response.reasoning_summary_part.added",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
        );
        for piece in split(summary, 3) {
            self.event(
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": index, "summary_index": 0,
                       "delta": piece, "obfuscation": "fk"}),
            );
        }
        self.event(
            "response.reasoning_summary_text.done",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "text": summary}),
        );
        let part = json!({"type": "summary_text", "text": summary});
        self.event(
            "response.reasoning_summary_part.done",
            json!({"item_id": id, "output_index": index, "summary_index": 0, "part": part}),
        );
        let item = json!({"id": id, "type": "reasoning", "encrypted_content": encrypted,
                          "summary": [part]});
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.output.push(item);
    }

    fn message_item(&mut self, text: &str, status: &str) {
        let index = self.index();
        let id = format!("msg_fake{index:04}");
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": {
                "id": id, "type": "message", "status": "in_progress",
                "content": [], "role": "assistant"}}),
        );
        let part = |text: &str| json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text});
        self.event(
            "response.content_part.added",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part("")}),
        );
        for piece in split(text, 3) {
            self.event(
                "response.output_text.delta",
                json!({"item_id": id, "output_index": index, "content_index": 0,
                       "delta": piece, "logprobs": [], "obfuscation": "fk"}),
            );
        }
        self.event(
            "response.output_text.done",
            json!({"item_id": id, "output_index": index, "content_index": 0,
                   "text": text, "logprobs": []}),
        );
        self.event(
            "response.content_part.done",
            json!({"item_id": id, "output_index": index, "content_index": 0, "part": part(text)}),
        );
        let item = json!({"id": id, "type": "message", "status": status,
                          "content": [part(text)], "role": "assistant"});
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.output.push(item);
    }

    fn call_item(&mut self, call: &FunctionCall) {
        let index = self.index();
        let id = format!("fc_fake{index:04}");
        self.event(
            "response.output_item.added",
            json!({"output_index": index, "item": {
                "id": id, "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call.call_id, "name": call.name}}),
        );
        for piece in awkward_split(&call.arguments) {
            self.event(
                "response.function_call_arguments.delta",
                json!({"item_id": id, "output_index": index, "delta": piece,
                       "obfuscation": "fk"}),
            );
        }
        self.event(
            "response.function_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": call.arguments}),
        );
        let item = json!({"id": id, "type": "function_call", "status": "completed",
                          "arguments": call.arguments, "call_id": call.call_id,
                          "name": call.name});
        self.event(
            "response.output_item.done",
            json!({"output_index": index, "item": item.clone()}),
        );
        self.output.push(item);
    }

    /// The terminal lifecycle event with the whole response object.
    fn end(
        &mut self,
        status: &str,
        usage: Option<ResponsesUsage>,
        incomplete: Option<&str>,
        error: Option<(&str, &str)>,
    ) {
        let mut response = self.response(status);
        response["output"] = Value::Array(std::mem::take(&mut self.output));
        if let Some(u) = usage {
            response["usage"] = u.to_json();
        }
        if let Some(reason) = incomplete {
            response["incomplete_details"] = json!({"reason": reason});
        }
        if let Some((code, message)) = error {
            response["error"] = json!({"code": code, "message": message});
        }
        self.event(&format!("response.{status}"), json!({"response": response}));
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

    fn parse(frames: &[u8]) -> Vec<(String, Value)> {
        let body = std::str::from_utf8(frames).unwrap();
        body.split_terminator("\n\n")
            .map(|f| {
                let mut lines = f.lines();
                let name = lines.next().unwrap().strip_prefix("event: ").unwrap();
                let data = lines.next().unwrap().strip_prefix("data: ").unwrap();
                assert!(lines.next().is_none());
                (name.to_owned(), serde_json::from_str(data).unwrap())
            })
            .collect()
    }

    #[test]
    fn splits_keep_text_and_char_boundaries() {
        for s in ["", "a", "héllo wörld 🌍", "{\"path\":\"/tmp/ü\\\"x\"}"] {
            assert_eq!(split(s, 3).concat(), s);
            let pieces = awkward_split(s);
            assert_eq!(pieces.concat(), s);
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
    }

    #[test]
    fn echo_body_frames_like_openai() {
        let events = parse(&echo_body("m", "hé \"q\""));
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ]
        );
        let mut text = String::new();
        for (i, (name, v)) in events.iter().enumerate() {
            assert_eq!(v["type"], name.as_str());
            assert_eq!(v["sequence_number"], i);
            if name == "response.output_text.delta" {
                text.push_str(v["delta"].as_str().unwrap());
            }
        }
        assert_eq!(text, "echo: hé \"q\"");
        let done = &events.last().unwrap().1["response"];
        assert_eq!(done["status"], "completed");
        assert_eq!(done["usage"]["total_tokens"], 30);
        assert_eq!(done["output"][0]["content"][0]["text"], "echo: hé \"q\"");
    }

    #[test]
    fn calls_and_reasoning_are_items_in_order() {
        let reply = ResponsesReply::function_calls(vec![("call_a", "t", "{\"x\":1}")])
            .with_reasoning("why", "ENC");
        let frames = reply.frames("m").unwrap().concat();
        let events = parse(&frames);
        let done = &events.last().unwrap().1["response"];
        let types: Vec<&str> = done["output"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, vec!["reasoning", "function_call"]);
        assert_eq!(done["output"][0]["encrypted_content"], "ENC");
        let args: String = events
            .iter()
            .filter(|(n, _)| n == "response.function_call_arguments.delta")
            .map(|(_, v)| v["delta"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(args, "{\"x\":1}");
    }
}
