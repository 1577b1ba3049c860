//! `[memory]`: how saved memories are found.

use serde::{Deserialize, Serialize};

/// `[memory]`
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// `<provider>/<model>` that embeds memories, which turns on search by
    /// meaning; unset, memory is found by its words only. The provider must
    /// have an embeddings API hearth speaks (type `openai`, `openai_compat`
    /// or `gemini`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<String>,
}
