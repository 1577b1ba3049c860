//! The capability matrix: what each adapter's models can do by default
//! ([`crate::Provider::capabilities`]), and the per-provider or per-model
//! overrides config may set on top ([`Capabilities::set`]).

/// Whether a model takes tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSupport {
    /// Always.
    Yes,
    /// Never: prompt-only mode.
    No,
    /// Depends on the model behind a compatible server: tried, and dropped
    /// for that model when the server rejects them
    /// ([`crate::ErrorKind::ToolsUnsupported`]).
    ModelDependent,
}

/// What a model can do, as the engine and `/v1/models` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Tool calling.
    pub tools: ToolSupport,
    /// Several tool calls in one answer.
    pub parallel_tool_calls: bool,
    /// Streamed answers.
    pub streaming: bool,
    /// Reports token usage.
    pub usage_metrics: bool,
    /// JSON output mode.
    pub json_mode: bool,
    /// Reasoning control.
    pub thinking: bool,
    /// Context window in tokens, when known (the catalog fills it per model:
    /// config override, then [`crate::known_context_window`]).
    pub context_window: Option<u32>,
}

/// The capability names config may set, in the order they are documented.
pub const CAPABILITY_KEYS: [&str; 6] = [
    "tools",
    "parallel_tool_calls",
    "streaming",
    "usage_metrics",
    "json_mode",
    "thinking",
];

impl Capabilities {
    /// A native API (Anthropic, OpenAI Responses, Gemini): tools, parallel
    /// calls, usage and reasoning control.
    pub const NATIVE: Self = Self {
        tools: ToolSupport::Yes,
        parallel_tool_calls: true,
        streaming: true,
        usage_metrics: true,
        json_mode: false,
        thinking: true,
        context_window: None,
    };

    /// An OpenAI-compatible server: like a native API, except that tools
    /// depend on the model behind it.
    pub const COMPATIBLE: Self = Self {
        tools: ToolSupport::ModelDependent,
        ..Self::NATIVE
    };

    /// A provider that only streams text (echo, and any adapter that says
    /// nothing else).
    pub const TEXT_ONLY: Self = Self {
        tools: ToolSupport::No,
        parallel_tool_calls: false,
        streaming: true,
        usage_metrics: false,
        json_mode: false,
        thinking: false,
        context_window: None,
    };

    /// Sets capability `key` (one of [`CAPABILITY_KEYS`]) to `value`; false
    /// when `key` is not a capability. `tools = true` means always, not
    /// model-dependent: the operator vouches for the model.
    pub fn set(&mut self, key: &str, value: bool) -> bool {
        match key {
            "tools" => {
                self.tools = if value {
                    ToolSupport::Yes
                } else {
                    ToolSupport::No
                };
            }
            "parallel_tool_calls" => self.parallel_tool_calls = value,
            "streaming" => self.streaming = value,
            "usage_metrics" => self.usage_metrics = value,
            "json_mode" => self.json_mode = value,
            "thinking" => self.thinking = value,
            _ => return false,
        }
        true
    }

    /// These capabilities with `overrides` applied in order; unknown keys
    /// (refused when config is loaded) are skipped.
    pub fn with_overrides<'a>(
        mut self,
        overrides: impl IntoIterator<Item = (&'a String, &'a bool)>,
    ) -> Self {
        for (k, v) in overrides {
            self.set(k, *v);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::*;
    use crate::anthropic::{AnthropicConfig, AnthropicProvider};
    use crate::gemini::{GeminiConfig, GeminiProvider};
    use crate::openai::{OpenAiConfig, OpenAiProvider};
    use crate::{EchoProvider, OpenAiCompatConfig, OpenAiCompatProvider, Provider};

    #[test]
    fn the_matrix_by_adapter() {
        let client = reqwest::Client::new();
        let url = "http://127.0.0.1:1/v1";
        let mut compat = OpenAiCompatConfig::new("c", url);
        compat.request_timeout = Duration::from_secs(1);
        let rows: [(&str, Box<dyn Provider>, Capabilities); 5] = [
            (
                "anthropic",
                Box::new(
                    AnthropicProvider::new(AnthropicConfig::new("a", url), client.clone()).unwrap(),
                ),
                Capabilities::NATIVE,
            ),
            (
                "openai",
                Box::new(OpenAiProvider::new(OpenAiConfig::new("o", url), client.clone()).unwrap()),
                Capabilities::NATIVE,
            ),
            (
                "gemini",
                Box::new(GeminiProvider::new(GeminiConfig::new("g", url), client.clone()).unwrap()),
                Capabilities::NATIVE,
            ),
            (
                "openai_compat",
                Box::new(OpenAiCompatProvider::new(compat, client).unwrap()),
                Capabilities::COMPATIBLE,
            ),
            (
                "echo",
                Box::new(EchoProvider::new()),
                Capabilities::TEXT_ONLY,
            ),
        ];
        for (name, provider, want) in rows {
            assert_eq!(provider.capabilities(), want, "{name}");
        }
    }

    #[test]
    fn overrides_apply_in_order_and_every_key_is_settable() {
        let mut provider = BTreeMap::new();
        provider.insert("tools".to_owned(), true);
        provider.insert("thinking".to_owned(), false);
        let mut model = BTreeMap::new();
        model.insert("tools".to_owned(), false);
        let caps = Capabilities::COMPATIBLE
            .with_overrides(&provider)
            .with_overrides(&model);
        assert_eq!(caps.tools, ToolSupport::No, "the model's override wins");
        assert!(!caps.thinking);
        assert!(caps.usage_metrics, "untouched");
        let mut c = Capabilities::TEXT_ONLY;
        for k in CAPABILITY_KEYS {
            assert!(c.set(k, true), "{k}");
        }
        assert_eq!(c.tools, ToolSupport::Yes);
        assert!(c.parallel_tool_calls && c.usage_metrics && c.json_mode && c.thinking);
        assert!(!c.set("vision", true));
    }
}
