//! The configuration's shape, with defaults.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole `hearth.toml`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[server]`
    pub server: ServerConfig,
    /// `[store]`
    pub store: StoreConfig,
    /// `[llm]`
    pub llm: LlmConfig,
    /// `[agent]`
    pub agent: AgentConfig,
    /// `[log]`
    pub log: LogConfig,
}

/// `[server]`: the HTTP listener.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Listen address; loopback by default.
    pub bind: String,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Seconds in-flight runs get to finish on SIGTERM before being parked for recovery.
    pub shutdown_grace_secs: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:7777".into(),
            max_body_bytes: 1024 * 1024,
            shutdown_grace_secs: 10,
        }
    }
}

/// How hard the store works to keep a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Survives a killed process; a power cut may lose the last moments.
    #[default]
    Normal,
    /// Synced to disk before a message is acknowledged or an answer delivered.
    Strict,
}

/// `[store]`
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `normal` or `strict`.
    pub durability: Durability,
}

/// The wire protocol of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderType {
    /// Any OpenAI-compatible Chat Completions server.
    OpenaiCompat,
    /// Anthropic's Messages API.
    Anthropic,
    /// OpenAI's Responses API.
    Openai,
    /// Google's Gemini API (generateContent).
    Gemini,
    /// The deterministic offline echo provider.
    Echo,
}

/// `[llm.providers.<name>]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    /// Wire protocol.
    #[serde(rename = "type")]
    pub kind: ProviderType,
    /// Base URL, e.g. `http://127.0.0.1:11434/v1`; required for
    /// `openai_compat`, the provider's own default for `anthropic` and `gemini`.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Extra request headers (e.g. OpenRouter's `HTTP-Referer`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Models offered; empty accepts any model name.
    #[serde(default)]
    pub models: Vec<String>,
    /// Capability overrides for every model of the provider (`tools`,
    /// `parallel_tool_calls`, `streaming`, `usage_metrics`, `json_mode`, `thinking`).
    #[serde(default)]
    pub capabilities: BTreeMap<String, bool>,
    /// Capability overrides for single models, e.g.
    /// `model_capabilities."llama3.2" = { tools = false }`.
    #[serde(default)]
    pub model_capabilities: BTreeMap<String, BTreeMap<String, bool>>,
    /// Seconds to wait for response headers.
    #[serde(default = "default_request_timeout")]
    pub request_timeout_secs: u64,
    /// Longest silence allowed inside a stream, in seconds.
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_secs: u64,
}

fn default_request_timeout() -> u64 {
    120
}

fn default_idle_timeout() -> u64 {
    90
}

/// `[llm]`
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LlmConfig {
    /// `<provider>/<model>` used when a thread has no override.
    pub default_model: Option<String>,
    /// Named providers.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Models to fail over to, in order, when a thread's model keeps failing.
    pub fallback: Vec<String>,
    /// Retries of a failing model call before failing over.
    pub retry: RetryConfig,
    /// Price overrides and additions, by `<model>` or `<provider>/<model>`.
    pub prices: BTreeMap<String, PriceConfig>,
    /// A warning is logged (once per UTC day) when the day's estimated spend
    /// reaches this many US dollars.
    pub daily_spend_alert_usd: Option<f64>,
}

/// `[llm.prices."<model>"]`: USD per million tokens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Cached prompt tokens; the input price when absent.
    #[serde(default)]
    pub cached: Option<f64>,
    /// Prompt tokens written to a cache; the input price when absent.
    #[serde(default)]
    pub cache_write: Option<f64>,
    /// Reasoning tokens are reported apart from output and billed as output.
    #[serde(default)]
    pub reasoning_apart: bool,
}

/// `[llm.retry]`: capped exponential backoff with jitter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per model, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the second attempt, in milliseconds.
    pub initial_backoff_ms: u64,
    /// Largest delay between attempts (also caps `retry-after`), in milliseconds.
    pub max_backoff_ms: u64,
    /// Most time spent waiting between attempts of one call, in seconds.
    pub max_total_wait_secs: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            initial_backoff_ms: 500,
            max_backoff_ms: 8000,
            max_total_wait_secs: 30,
        }
    }
}

/// `[agent]`: limits of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Model calls plus tool calls.
    pub max_steps: u32,
    /// Tool calls.
    pub max_tool_calls: u32,
    /// Model calls.
    pub max_llm_calls: u32,
    /// Wall time of a run, in seconds.
    pub max_wall_secs: u64,
    /// Time one tool call may take, in seconds.
    pub tool_timeout_secs: u64,
    /// How many past messages of the thread are sent to the model.
    pub history_messages: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            max_steps: 24,
            max_tool_calls: 16,
            max_llm_calls: 12,
            max_wall_secs: 300,
            tool_timeout_secs: 30,
            history_messages: 50,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Human,
    /// One JSON object per line.
    Json,
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter, e.g. `info` or `hearth_runtime=debug,info`.
    pub level: String,
    /// `human` or `json`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: "info".into(),
            format: LogFormat::Human,
        }
    }
}
