//! What a provider streams back, and token usage.

use serde::{Deserialize, Serialize};

/// Token counts of one model call; `None` where the provider did not report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included (adapters normalise to this).
    pub input_tokens: Option<u64>,
    /// Completion tokens.
    pub output_tokens: Option<u64>,
    /// Prompt tokens served from the provider's cache.
    pub cached_tokens: Option<u64>,
    /// Reasoning tokens, when reported separately.
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache (Anthropic reports these).
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
}

impl Usage {
    /// True when the provider reported nothing at all.
    pub fn is_untracked(&self) -> bool {
        self.input_tokens.is_none()
            && self.output_tokens.is_none()
            && self.cached_tokens.is_none()
            && self.reasoning_tokens.is_none()
            && self.cache_write_tokens.is_none()
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end of the answer.
    Stop,
    /// The model wants tool calls run.
    ToolCalls,
    /// The output token limit was hit.
    Length,
    /// The provider filtered the content.
    ContentFilter,
    /// Anything else, as the provider said it.
    Other(String),
}

/// One event of a streamed model answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEvent {
    /// A piece of answer text.
    TextDelta(String),
    /// A piece of reasoning, possibly with the block's signature.
    ThinkingDelta {
        /// Reasoning text (may be empty).
        text: String,
        /// Signature, sent once per reasoning block.
        signature: Option<String>,
    },
    /// A piece of a tool call. `index` tells parallel calls apart; `id` and `name`
    /// arrive at least once per index, `arguments` is a fragment of JSON text.
    ToolCallDelta {
        /// Which call of this answer.
        index: u32,
        /// The call id, when this fragment carries it.
        id: Option<String>,
        /// The tool name, when this fragment carries it.
        name: Option<String>,
        /// A fragment of the arguments' JSON text.
        arguments: String,
    },
    /// Usage of the call (may come more than once; the last wins field by field).
    Usage(Usage),
    /// The end of the answer.
    Finish(FinishReason),
}
