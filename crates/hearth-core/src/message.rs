//! Conversation messages and the request sent to a provider.

use serde::{Deserialize, Serialize};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
    /// Results of tool calls, answering the assistant's calls.
    Tool,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text { text: String },
    /// The model's reasoning, with the provider's signature to send back unchanged.
    Thinking {
        /// The reasoning text (may be empty when only a signature is given).
        text: String,
        /// An opaque signature the provider wants back in history.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The configured provider that produced it: a signature goes back only
        /// to that provider, never to another one after a model switch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider: Option<String>,
    },
    /// A tool call proposed by the model.
    ToolCall {
        /// The provider's call id; tool results answer it.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments as JSON text, exactly as the model produced them.
        arguments: String,
    },
    /// The outcome of a tool call: a JSON object as text.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// The tool's JSON output (`{"error": ...}` on failure).
        output: String,
    },
}

/// A message in a thread's history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub content: Vec<Content>,
}

impl Message {
    /// A message holding one text part.
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: vec![Content::Text { text: text.into() }],
        }
    }

    /// The concatenated text parts of this message.
    pub fn joined_text(&self) -> String {
        let mut out = String::new();
        for c in &self.content {
            if let Content::Text { text } = c {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// `^[a-zA-Z0-9_-]{1,64}$`.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// How much reasoning the model should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ThinkingLevel {
    /// No reasoning requested.
    #[default]
    Off,
    /// A little.
    Low,
    /// Some.
    Medium,
    /// A lot.
    High,
}

impl ThinkingLevel {
    /// The wire name: `off`, `low`, `medium`, `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "off" => Some(Self::Off),
            "low" => Some(Self::Low),
            "medium" => Some(Self::Medium),
            "high" => Some(Self::High),
            _ => None,
        }
    }
}

/// One model call: what a `Provider` receives.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The model name as the provider knows it (no provider prefix).
    pub model: String,
    /// The system prompt.
    pub system: String,
    /// The conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// Tools the model may call; empty for none. Shared: a run offers the
    /// same list on every call, and most runs the same list as the last.
    pub tools: std::sync::Arc<[ToolSpec]>,
    /// Requested reasoning effort.
    pub thinking: ThinkingLevel,
    /// Most tokens the answer may have (`[agent] max_output_tokens`);
    /// `None` leaves the provider's own default.
    pub max_output_tokens: Option<u32>,
}
