//! Scripted replies of the fake server and their rendering as SSE frames.

use std::time::Duration;

use serde::Serialize;

/// Token counts the fake reports in its usage chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FakeUsage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: u64,
    /// `usage.completion_tokens`.
    pub completion_tokens: u64,
    /// `usage.prompt_tokens_details.cached_tokens`.
    pub cached_tokens: u64,
    /// `usage.completion_tokens_details.reasoning_tokens`.
    pub reasoning_tokens: u64,
}

impl FakeUsage {
    /// What every reply reports unless told otherwise: 12 prompt tokens
    /// (3 cached), 7 completion tokens (2 of them reasoning).
    pub const DEFAULT: Self = Self {
        prompt_tokens: 12,
        completion_tokens: 7,
        cached_tokens: 3,
        reasoning_tokens: 2,
    };
}

impl Default for FakeUsage {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One tool call the fake model makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallSpec {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments as JSON text; streamed split into pieces.
    pub arguments: String,
}

impl ToolCallSpec {
    /// A call of `name` with id `id` and JSON `arguments`.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) enum ReplyKind {
    Text(String),
    ToolCalls(Vec<ToolCallSpec>),
    HttpError {
        status: u16,
        body: serde_json::Value,
    },
    RawSse(String),
    Hang,
}

/// A scripted answer for one request.
#[derive(Debug, Clone)]
pub struct Reply {
    pub(crate) kind: ReplyKind,
    pub(crate) delay: Duration,
    pub(crate) chunk_delay: Duration,
    pub(crate) usage: Option<FakeUsage>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) reasoning: Option<String>,
    pub(crate) finish_reason: Option<String>,
    pub(crate) content_type: Option<String>,
    /// Pieces a text answer is streamed in.
    pub(crate) pieces: usize,
    /// Frames sent before the stream stalls for good, if it does.
    pub(crate) stall_after: Option<usize>,
    /// Frames sent before the stream waits for the gate to open, if it does.
    pub(crate) pause: Option<(usize, Gate)>,
}

/// A gate a scripted stream waits at (see [`Reply::pausing_after`]): a test
/// opens it when it has seen what happens while the answer is half sent,
/// instead of guessing how long that takes.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    inner: std::sync::Arc<GateInner>,
}

#[derive(Debug, Default)]
struct GateInner {
    open: std::sync::atomic::AtomicBool,
    opened: tokio::sync::Notify,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate: every stream waiting at it goes on, and later ones
    /// do not wait.
    pub fn open(&self) {
        self.inner
            .open
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.inner.opened.notify_waiters();
    }

    /// Returns once the gate is open.
    pub(crate) async fn wait(&self) {
        loop {
            let opened = self.inner.opened.notified();
            let mut opened = std::pin::pin!(opened);
            // Registered before the check, so an open between them is seen.
            opened.as_mut().enable();
            if self.inner.open.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            opened.await;
        }
    }
}

impl Reply {
    fn new(kind: ReplyKind) -> Self {
        Self {
            kind,
            delay: Duration::ZERO,
            chunk_delay: Duration::ZERO,
            usage: Some(FakeUsage::DEFAULT),
            headers: Vec::new(),
            reasoning: None,
            finish_reason: None,
            content_type: None,
            pieces: 3,
            stall_after: None,
            pause: None,
        }
    }

    /// Streams a text answer in `n` pieces (default 3): a burst of deltas.
    pub fn in_pieces(mut self, n: usize) -> Self {
        self.pieces = n.max(1);
        self
    }

    /// A text answer streamed in several chunks, then `finish_reason: stop`,
    /// a usage chunk and `[DONE]`.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(ReplyKind::Text(text.into()))
    }

    /// Parallel tool calls: each call's id and name first, then its arguments
    /// in pieces interleaved across calls, then `finish_reason: tool_calls`.
    pub fn tool_calls(calls: Vec<ToolCallSpec>) -> Self {
        Self::new(ReplyKind::ToolCalls(calls))
    }

    /// An HTTP error status with a JSON body.
    pub fn http_error(status: u16, body: serde_json::Value) -> Self {
        Self::new(ReplyKind::HttpError { status, body })
    }

    /// Exactly these bytes as a `text/event-stream` body (for malformed
    /// chunks and cut streams).
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

    /// Waits this long between two streamed chunks.
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = delay;
        self
    }

    /// Sends the first `frames` chunks of the stream (the role chunk counts),
    /// then nothing more, never ending: the client has to cut it off.
    pub fn stalling_after(mut self, frames: usize) -> Self {
        self.stall_after = Some(frames);
        self
    }

    /// Sends the first `frames` chunks of the stream (the role chunk counts),
    /// then waits until `gate` is opened before sending the rest.
    pub fn pausing_after(mut self, frames: usize, gate: Gate) -> Self {
        self.pause = Some((frames, gate));
        self
    }

    /// Sends no usage chunk, as servers that ignore `stream_options` do.
    pub fn without_usage(mut self) -> Self {
        self.usage = None;
        self
    }

    /// Reports these counts instead of `FakeUsage::DEFAULT`.
    pub fn with_usage(mut self, usage: FakeUsage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Adds a response header (e.g. `retry-after`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Streams this reasoning as `reasoning_content` before the answer.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Overrides the `finish_reason` of text and tool-call replies.
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// Overrides the response content type (to test non-SSE answers).
    pub fn with_content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }

    /// The SSE frames of a streamed reply, one per chunk; `None` for error,
    /// raw and hanging replies.
    pub(crate) fn frames(&self, model: &str) -> Option<Vec<Vec<u8>>> {
        let mut frames = Vec::new();
        let mut frame = |delta: DeltaOut<'_>, finish: Option<&str>| {
            let mut buf = Vec::new();
            push_chunk(&mut buf, model, Some(delta), finish, None);
            frames.push(buf);
        };
        if let Some(r) = &self.reasoning {
            for piece in split(r, 2) {
                frame(
                    DeltaOut {
                        reasoning_content: Some(piece),
                        ..DeltaOut::default()
                    },
                    None,
                );
            }
        }
        let finish = match &self.kind {
            ReplyKind::Text(text) => {
                frame(
                    DeltaOut {
                        role: Some("assistant"),
                        content: Some(""),
                        ..DeltaOut::default()
                    },
                    None,
                );
                for piece in split(text, self.pieces) {
                    frame(
                        DeltaOut {
                            content: Some(piece),
                            ..DeltaOut::default()
                        },
                        None,
                    );
                }
                "stop"
            }
            ReplyKind::ToolCalls(calls) => {
                for (i, call) in calls.iter().enumerate() {
                    let head = [ToolCallOut {
                        index: i as u32,
                        id: Some(&call.id),
                        kind: Some("function"),
                        function: FunctionOut {
                            name: Some(&call.name),
                            arguments: "",
                        },
                    }];
                    frame(
                        DeltaOut {
                            role: (i == 0).then_some("assistant"),
                            tool_calls: Some(&head),
                            ..DeltaOut::default()
                        },
                        None,
                    );
                }
                let pieces: Vec<Vec<&str>> = calls.iter().map(|c| split(&c.arguments, 3)).collect();
                let rounds = pieces.iter().map(Vec::len).max().unwrap_or(0);
                for round in 0..rounds {
                    for (i, p) in pieces.iter().enumerate() {
                        if let Some(piece) = p.get(round) {
                            let part = [ToolCallOut {
                                index: i as u32,
                                id: None,
                                kind: None,
                                function: FunctionOut {
                                    name: None,
                                    arguments: piece,
                                },
                            }];
                            frame(
                                DeltaOut {
                                    tool_calls: Some(&part),
                                    ..DeltaOut::default()
                                },
                                None,
                            );
                        }
                    }
                }
                "tool_calls"
            }
            ReplyKind::HttpError { .. } | ReplyKind::RawSse(_) | ReplyKind::Hang => return None,
        };
        let finish = self.finish_reason.as_deref().unwrap_or(finish);
        frame(DeltaOut::default(), Some(finish));
        let mut tail = Vec::new();
        if let Some(u) = &self.usage {
            push_chunk(&mut tail, model, None, None, Some(u));
        }
        tail.extend_from_slice(b"data: [DONE]\n\n");
        frames.push(tail);
        Some(frames)
    }
}

/// The default answer: `echo: <text>` in two chunks, a finish chunk, usage
/// and `[DONE]`, all in one buffer.
pub(crate) fn echo_body(model: &str, text: &str) -> Vec<u8> {
    let (a, b) = text.split_at(floor_char_boundary(text, text.len() / 2));
    let mut first = String::with_capacity(6 + a.len());
    first.push_str("echo: ");
    first.push_str(a);
    let mut buf = Vec::with_capacity(4 * 180 + 2 * text.len());
    let content = |c| DeltaOut {
        content: Some(c),
        ..DeltaOut::default()
    };
    push_chunk(&mut buf, model, Some(content(&first)), None, None);
    push_chunk(&mut buf, model, Some(content(b)), None, None);
    push_chunk(
        &mut buf,
        model,
        Some(DeltaOut::default()),
        Some("stop"),
        None,
    );
    push_chunk(&mut buf, model, None, None, Some(&FakeUsage::DEFAULT));
    buf.extend_from_slice(b"data: [DONE]\n\n");
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
        let want = rest.len().div_ceil(left);
        let mut cut = want.min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        out.push(piece);
        rest = tail;
    }
    out
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[derive(Serialize)]
struct ChunkOut<'a> {
    id: &'static str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: &'a [ChoiceOut<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageOut>,
}

#[derive(Serialize)]
struct ChoiceOut<'a> {
    index: u32,
    delta: DeltaOut<'a>,
    finish_reason: Option<&'a str>,
}

#[derive(Serialize, Default)]
struct DeltaOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<&'a [ToolCallOut<'a>]>,
}

#[derive(Serialize)]
struct ToolCallOut<'a> {
    index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: FunctionOut<'a>,
}

#[derive(Serialize)]
struct FunctionOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

#[derive(Serialize)]
struct UsageOut {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
    prompt_tokens_details: CachedOut,
    completion_tokens_details: ReasoningOut,
}

#[derive(Serialize)]
struct CachedOut {
    cached_tokens: u64,
}

#[derive(Serialize)]
struct ReasoningOut {
    reasoning_tokens: u64,
}

/// Appends one `data: {chunk}\n\n` frame; a chunk without delta has
/// `choices: []` (the usage chunk).
fn push_chunk(
    buf: &mut Vec<u8>,
    model: &str,
    delta: Option<DeltaOut<'_>>,
    finish: Option<&str>,
    usage: Option<&FakeUsage>,
) {
    let choice;
    let choices: &[ChoiceOut<'_>] = match delta {
        Some(delta) => {
            choice = ChoiceOut {
                index: 0,
                delta,
                finish_reason: finish,
            };
            std::slice::from_ref(&choice)
        }
        None => &[],
    };
    let chunk = ChunkOut {
        id: "chatcmpl-fake",
        object: "chat.completion.chunk",
        created: 0,
        model,
        choices,
        usage: usage.map(|u| UsageOut {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            total_tokens: u.prompt_tokens + u.completion_tokens,
            prompt_tokens_details: CachedOut {
                cached_tokens: u.cached_tokens,
            },
            completion_tokens_details: ReasoningOut {
                reasoning_tokens: u.reasoning_tokens,
            },
        }),
    };
    buf.extend_from_slice(b"data: ");
    // Writing plain structs into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *buf, &chunk);
    buf.extend_from_slice(b"\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_keeps_text_and_char_boundaries() {
        for s in ["", "a", "ab", "héllo wörld 🌍", "{\"path\":\"/tmp/x\"}"] {
            let pieces = split(s, 3);
            assert_eq!(pieces.concat(), s);
            assert!(pieces.len() <= 3);
            assert!(pieces.iter().all(|p| !p.is_empty()));
        }
        assert_eq!(split("abcdef", 3), vec!["ab", "cd", "ef"]);
    }

    #[test]
    fn echo_body_is_valid_sse_json() {
        let body = String::from_utf8(echo_body("m", "hé \"quoted\"")).unwrap();
        let datas: Vec<&str> = body
            .split("\n\n")
            .filter_map(|f| f.strip_prefix("data: "))
            .collect();
        assert_eq!(datas.len(), 5);
        assert_eq!(datas[4], "[DONE]");
        let mut text = String::new();
        for d in &datas[..4] {
            let v: serde_json::Value = serde_json::from_str(d).unwrap();
            if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
                text.push_str(c);
            }
        }
        assert_eq!(text, "echo: hé \"quoted\"");
    }
}
