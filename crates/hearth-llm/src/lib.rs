//! hearth-llm: talking to model providers.
//!
//! Owns the `Provider` trait (one required method, `stream`), the one HTTP
//! provider ([`HttpProvider`]) and the wire formats it speaks (`anthropic`,
//! `openai` Responses, `gemini`, `openai_compat`), the `echo` provider, SSE
//! decoding, the `Accumulator` that turns a stream of `StreamEvent`s into an
//! assistant message, the error taxonomy and its one classification, the
//! capability matrix, and retry with backoff. Wire types stay private to
//! each vendor module; a new vendor is a new wire format, not a new provider.

pub mod accumulator;
pub mod anthropic;
pub mod capabilities;
mod classify;
pub mod context_window;
mod decoder;
pub mod echo;
pub mod embeddings;
pub mod error;
pub mod gemini;
mod http;
mod items;
pub mod openai;
pub mod openai_compat;
pub mod prices;
pub mod retry;
pub mod sse;
mod transport;

use std::pin::Pin;

use futures_util::Stream;
use hearth_core::{ChatRequest, StreamEvent};

pub use accumulator::{Accumulator, AssistantTurn};
pub use capabilities::{CAPABILITY_KEYS, Capabilities, ToolSupport};
pub use context_window::known_context_window;
pub use decoder::EventDecoder;
pub use echo::EchoProvider;
pub use error::{ErrorKind, LlmError};
pub use http::{HttpConfig, HttpProvider, WireFormat};
pub use openai_compat::{OpenAiCompatConfig, OpenAiCompatProvider, OpenAiCompatWire};
pub use retry::RetryPolicy;

/// A stream of events from one model call. It ends after `StreamEvent::Finish`
/// or with an error item; an error item is always the last.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<StreamEvent, LlmError>> + Send>>;

/// A model provider. Adapters implement `stream`; callers that want the whole
/// answer collect it with an `Accumulator`.
#[async_trait::async_trait]
pub trait Provider: Send + Sync + 'static {
    /// Starts one streamed model call. Errors before the first byte (auth,
    /// unknown model, rate limits, connection failures) come back here; errors
    /// after it arrive as the stream's last item.
    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError>;

    /// What this adapter's models can do before config overrides: its row
    /// of the capability matrix. The default is text only.
    fn capabilities(&self) -> Capabilities {
        Capabilities::TEXT_ONLY
    }

    /// Whether [`Provider::embed`] can work (the vendor has an embeddings
    /// API hearth speaks).
    fn embeds(&self) -> bool {
        false
    }

    /// Embeds `inputs` with `model`: one vector per input, in order. The
    /// default refuses: most adapters have no embeddings API.
    async fn embed(
        &self,
        _model: &str,
        _inputs: &[String],
    ) -> Result<embeddings::Embeddings, LlmError> {
        Err(embeddings::unsupported("this provider"))
    }
}
