//! The stream decoder every adapter uses: [`EventDecoder`] frames the body
//! as SSE, hands each event's payload to the wire format's [`EventFormat`],
//! queues the `StreamEvent`s it makes, and ends the answer once, completely
//! or with one error. Only the mapping from a vendor's events to ours lives
//! in the vendor module.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use hearth_core::StreamEvent;

use crate::classify::ErrorFacts;
use crate::sse::SseDecoder;
use crate::{ErrorKind, LlmError};

/// One wire format's view of a streamed answer: its per-answer state and
/// what each event means. Implemented by the vendor modules of this crate.
pub trait EventFormat: Default + fmt::Debug + Send + 'static {
    /// At the end of the body, a last event without its closing blank line
    /// still counts (for formats with no end sentinel, where the end of the
    /// body is how an answer ends).
    const FLUSH_AT_EOF: bool = false;

    /// Handles one SSE event: `event` is its name, `data` its trimmed,
    /// non-empty payload. Queues events on `out` and marks the answer over
    /// with [`Queue::finish`]; an error ends the answer.
    fn event(&mut self, out: &mut Queue, event: Option<&str>, data: &str) -> Result<(), LlmError>;

    /// The body ended and the answer is not over: queue the events that
    /// complete it, or say why it was cut.
    fn end_of_body(&mut self, out: &mut Queue) -> Result<(), LlmError>;
}

/// Where an [`EventFormat`] puts what it decoded.
#[derive(Debug)]
pub struct Queue {
    provider: Arc<str>,
    /// Events decoded but not yet handed out.
    pending: VecDeque<StreamEvent>,
    /// Why the answer is over (`done`, `eof`, `error`, ...), once it is;
    /// logged when the stream ends.
    outcome: Option<&'static str>,
}

impl Queue {
    /// Queues `event` for the caller.
    pub(crate) fn push(&mut self, event: StreamEvent) {
        self.pending.push_back(event);
    }

    /// Marks the answer over for reason `outcome`; only queued events follow.
    pub(crate) fn finish(&mut self, outcome: &'static str) {
        self.outcome = Some(outcome);
    }

    /// An error of `kind` naming this provider.
    pub(crate) fn error(&self, kind: ErrorKind, message: impl Into<String>) -> LlmError {
        LlmError::new(&*self.provider, kind, message)
    }

    /// The answer did not follow the wire format.
    pub(crate) fn malformed(&self, message: impl Into<String>) -> LlmError {
        self.error(ErrorKind::MalformedResponse, message)
    }

    /// A payload (`what`: "stream event", "stream chunk") that is not the
    /// JSON expected. serde_json's own message can quote the payload, i.e.
    /// model output, so only its class and position are kept.
    pub(crate) fn bad_json(&self, what: &str, e: &serde_json::Error) -> LlmError {
        self.malformed(format!(
            "{what} is not valid JSON ({:?} error at line {} column {})",
            e.classify(),
            e.line(),
            e.column()
        ))
    }

    /// An error the provider sent inside the stream, classified like an
    /// error response; `what` starts the message.
    pub(crate) fn provider_error(&self, what: &str, facts: &ErrorFacts<'_>) -> LlmError {
        let mut message = String::from(what);
        facts.describe(&mut message);
        let mut err = self.error(facts.kind(), message);
        err.retry_after = facts.retry_after();
        err
    }
}

/// The stream parser of an adapter, without I/O: `push` body bytes as they
/// arrive, take events with `next_event` until it returns `Ok(None)`, and
/// call `end_of_body` when the body ends. The providers run on it; it is
/// public so benchmarks and tests can feed it bytes directly.
#[derive(Debug)]
pub struct EventDecoder<F> {
    sse: SseDecoder,
    queue: Queue,
    /// The body has ended.
    eof: bool,
    format: F,
}

impl<F: EventFormat> EventDecoder<F> {
    /// A decoder whose errors name `provider`.
    pub fn new(provider: impl Into<Arc<str>>) -> Self {
        Self {
            sse: SseDecoder::new(),
            queue: Queue {
                provider: provider.into(),
                pending: VecDeque::new(),
                outcome: None,
            },
            eof: false,
            format: F::default(),
        }
    }

    /// Appends received body bytes; they may split events anywhere.
    pub fn push(&mut self, bytes: &[u8]) {
        self.sse.push(bytes);
    }

    /// Marks the end of the body: an answer the wire format cannot complete
    /// from what came was cut, and ends with an error.
    pub fn end_of_body(&mut self) {
        if self.eof {
            return;
        }
        self.eof = true;
        if F::FLUSH_AT_EOF && self.sse.has_pending() {
            self.sse.push(b"\n\n");
        }
    }

    /// True once the answer is over, completely or by an error, and all its
    /// events have been taken.
    pub fn is_done(&self) -> bool {
        self.queue.outcome.is_some() && self.queue.pending.is_empty()
    }

    /// The next event; `Ok(None)` when more bytes are needed or the answer is
    /// over. An error ends the answer: nothing follows it.
    pub fn next_event(&mut self) -> Result<Option<StreamEvent>, LlmError> {
        loop {
            if let Some(ev) = self.queue.pending.pop_front() {
                return Ok(Some(ev));
            }
            if self.queue.outcome.is_some() {
                return Ok(None);
            }
            match self.sse.next_event() {
                Ok(Some(ev)) => {
                    let data = ev.data.trim();
                    let handled = if data.is_empty() {
                        Ok(())
                    } else {
                        self.format
                            .event(&mut self.queue, ev.event.as_deref(), data)
                    };
                    self.sse.recycle(ev);
                    if let Err(e) = handled {
                        self.queue.pending.clear();
                        self.queue.finish("error");
                        return Err(e);
                    }
                }
                Ok(None) if self.eof => {
                    let ended = self.format.end_of_body(&mut self.queue);
                    if self.queue.outcome.is_none() {
                        self.queue.finish("eof");
                    }
                    if let Err(e) = ended {
                        self.queue.pending.clear();
                        return Err(e);
                    }
                }
                Ok(None) => return Ok(None),
                Err(e) => {
                    self.queue.finish("error");
                    return Err(self.queue.malformed(format!("bad event stream: {e}")));
                }
            }
        }
    }

    /// The provider name errors and logs carry.
    pub(crate) fn provider(&self) -> &Arc<str> {
        &self.queue.provider
    }

    /// Why the answer is over, once it is.
    pub(crate) fn outcome(&self) -> Option<&'static str> {
        self.queue.outcome
    }
}
