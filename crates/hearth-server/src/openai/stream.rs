//! Streaming answers: a run's events as `chat.completion.chunk` events.
//!
//! The content is the run's answer and nothing else, as in a plain
//! completion: the text of a model turn that ends in tool calls is not part
//! of the answer, and a turn's text cannot be known to be the last until
//! the run ends, so the answer goes out in one content delta at the end
//! (the role chunk opens the stream at once, and SSE keep-alives hold the
//! connection meanwhile). Tool and thinking events are hearth's own
//! business and are not sent. The stream ends with a chunk
//! carrying `finish_reason`, the usage chunk (`choices: []`) when the client
//! asked for `stream_options.include_usage`, and `data: [DONE]`. A run that
//! fails after the stream began ends with an `{"error": ...}` event, which
//! the official SDKs raise as an API error.

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use hearth_core::{RunError, RunEventKind};
use serde_json::{Value, json};

use super::error::OpenAiError;
use super::{Reply, confirmation_prompt, usage_of};
use crate::AppState;
use crate::routes::messages::Follow;

/// Where a stream's content comes from.
pub(super) enum Source {
    /// A new run, followed event by event from its start.
    Follow(Follow),
    /// An answer known already (a run resumed by `confirm <token>`, waited
    /// for): sent in one content delta.
    Known(Result<String, OpenAiError>),
}

struct Chunks {
    st: AppState,
    reply: Reply,
    include_usage: bool,
    source: Source,
    out: VecDeque<Event>,
    started: bool,
    ended: bool,
}

/// The SSE response for `reply`'s run.
pub(super) fn respond(st: AppState, reply: Reply, include_usage: bool, source: Source) -> Response {
    let run_id = reply.run_id.clone();
    let chunks = Chunks {
        st,
        reply,
        include_usage,
        source,
        out: VecDeque::new(),
        started: false,
        ended: false,
    };
    let stream = futures_util::stream::unfold(chunks, |mut c| async move {
        loop {
            if let Some(ev) = c.out.pop_front() {
                return Some((Ok::<_, Infallible>(ev), c));
            }
            if c.ended {
                return None;
            }
            c.advance().await;
        }
    });
    let mut resp = sse(stream).into_response();
    super::tag_run(&mut resp, &run_id);
    resp
}

fn sse(
    stream: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + Send + 'static> {
    Sse::new(stream).keep_alive(KeepAlive::default())
}

impl Chunks {
    /// Queues the next events.
    async fn advance(&mut self) {
        if !self.started {
            self.started = true;
            self.push_chunk(json!({ "role": "assistant", "content": "" }), None);
            return;
        }
        let ev = match &mut self.source {
            Source::Known(answer) => {
                match std::mem::replace(answer, Ok(String::new())) {
                    Ok(text) => {
                        self.push_content(&text);
                        self.end_ok().await;
                    }
                    Err(e) => self.end_err(&e),
                }
                return;
            }
            Source::Follow(f) => f.next().await,
        };
        let Some(ev) = ev else {
            // The log ended without a terminal event (it cannot be read any
            // more): say so rather than pretend the answer is whole.
            self.end_err(&OpenAiError::Internal(format!(
                "the events of run {} ended before its end",
                self.reply.run_id
            )));
            return;
        };
        match ev.kind {
            RunEventKind::ConfirmationRequired => {
                let text = confirmation_prompt(
                    ev.data["tool"].as_str().unwrap_or("a tool"),
                    ev.data["summary"].as_str().unwrap_or(""),
                    ev.data["token"].as_str(),
                );
                self.push_content(&text);
                self.end_ok().await;
            }
            RunEventKind::Succeeded => {
                // The stored answer, as a plain completion gives it.
                let text = ev.data["output"]["text"].as_str().unwrap_or_default();
                self.push_content(text);
                self.end_ok().await;
            }
            RunEventKind::Failed => {
                let e = serde_json::from_value::<RunError>(ev.data["error"].clone())
                    .unwrap_or_else(|_| RunError {
                        code: "run_failed".into(),
                        message: "the run failed".into(),
                    });
                self.end_err(&OpenAiError::from_run(e));
            }
            RunEventKind::Cancelled => self.end_err(&OpenAiError::RunFailed(RunError {
                code: "cancelled".into(),
                message: "the run was cancelled".into(),
            })),
            _ => {}
        }
    }

    fn chunk(&self, choices: Value) -> Value {
        let mut c = json!({
            "id": self.reply.id,
            "object": "chat.completion.chunk",
            "created": self.reply.created,
            "model": self.reply.model,
            "system_fingerprint": null,
            "choices": choices,
        });
        if self.include_usage {
            // OpenAI sends `usage: null` on every chunk but the last when asked.
            c["usage"] = Value::Null;
        }
        c
    }

    fn push_chunk(&mut self, delta: Value, finish: Option<&str>) {
        let c = self.chunk(json!([{
            "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish,
        }]));
        self.out.push_back(Event::default().data(c.to_string()));
    }

    fn push_content(&mut self, text: &str) {
        if !text.is_empty() {
            self.push_chunk(json!({ "content": text }), None);
        }
    }

    async fn end_ok(&mut self) {
        self.push_chunk(json!({}), Some("stop"));
        if self.include_usage {
            let usage = usage_of(&self.st.runtime, &self.reply.run_id).await;
            let mut c = self.chunk(json!([]));
            c["usage"] = json!(usage);
            self.out.push_back(Event::default().data(c.to_string()));
        }
        self.done();
    }

    fn end_err(&mut self, e: &OpenAiError) {
        self.out
            .push_back(Event::default().data(e.body().to_string()));
        self.done();
    }

    fn done(&mut self) {
        self.out.push_back(Event::default().data("[DONE]"));
        self.ended = true;
    }
}
