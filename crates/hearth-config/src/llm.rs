//! `[llm]`: providers, their models and prices, fallbacks and retry.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

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
///
/// The API key comes from at most one place: an environment variable
/// (`api_key_env`) or a sealed secret in hearth's store (`api_key_secret`);
/// setting both is a config error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawProviderConfig")]
pub struct ProviderConfig {
    /// Wire protocol.
    #[serde(rename = "type")]
    pub kind: ProviderType,
    /// Base URL, e.g. `http://127.0.0.1:11434/v1`; required for
    /// `openai_compat`, the provider's own default for `anthropic` and `gemini`.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// Name of the sealed secret holding the API key (stored with
    /// `hearth secrets set <name>`, opened with `HEARTH_SECRET_KEY`).
    pub api_key_secret: Option<String>,
    /// Extra request headers (e.g. OpenRouter's `HTTP-Referer`).
    pub headers: BTreeMap<String, String>,
    /// Models offered; empty accepts any model name.
    pub models: Vec<String>,
    /// Capability overrides for every model of the provider (`tools`,
    /// `parallel_tool_calls`, `streaming`, `usage_metrics`, `json_mode`, `thinking`).
    pub capabilities: BTreeMap<String, bool>,
    /// Capability overrides for single models, e.g.
    /// `model_capabilities."llama3.2" = { tools = false, context_window = 6000 }`.
    pub model_capabilities: BTreeMap<String, ModelOverrides>,
    /// Context window in tokens of every model of the provider, when the
    /// built-in catalog does not know it (or knows it wrong).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// Seconds to wait for response headers.
    pub request_timeout_secs: u64,
    /// Longest silence allowed inside a stream, in seconds.
    pub idle_timeout_secs: u64,
    /// Its models cost nothing (local models): they never draw from
    /// `cost_usd` budget pools.
    pub free: bool,
}

/// `ProviderConfig` as written in the file, before the checks that span
/// fields (the key source).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProviderConfig {
    #[serde(rename = "type")]
    kind: ProviderType,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    api_key_secret: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    models: Vec<String>,
    #[serde(default)]
    capabilities: BTreeMap<String, bool>,
    #[serde(default)]
    model_capabilities: BTreeMap<String, ModelOverrides>,
    #[serde(default)]
    context_window: Option<u32>,
    #[serde(default = "default_request_timeout")]
    request_timeout_secs: u64,
    #[serde(default = "default_idle_timeout")]
    idle_timeout_secs: u64,
    #[serde(default)]
    free: bool,
}

impl TryFrom<RawProviderConfig> for ProviderConfig {
    type Error = String;

    fn try_from(raw: RawProviderConfig) -> Result<Self, String> {
        if raw.api_key_env.is_some() && raw.api_key_secret.is_some() {
            return Err(
                "set either `api_key_env` or `api_key_secret`, not both: the key must come from one place"
                    .into(),
            );
        }
        if let Some(name) = &raw.api_key_env {
            crate::check::env_var_name(name)?;
        }
        if let Some(name) = &raw.api_key_secret {
            validate_secret_name(name).map_err(|e| format!("`api_key_secret`: {e}"))?;
        }
        Ok(Self {
            kind: raw.kind,
            base_url: raw.base_url,
            api_key_env: raw.api_key_env,
            api_key_secret: raw.api_key_secret,
            headers: raw.headers,
            models: raw.models,
            capabilities: raw.capabilities,
            model_capabilities: raw.model_capabilities,
            context_window: raw.context_window,
            request_timeout_secs: raw.request_timeout_secs,
            idle_timeout_secs: raw.idle_timeout_secs,
            free: raw.free,
        })
    }
}

/// `model_capabilities."<model>"`: capability flags and the context window
/// of one model.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelOverrides {
    /// Context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// Capability flags (`tools`, `thinking`, ...), checked against the
    /// known names when the config loads.
    #[serde(flatten)]
    pub flags: BTreeMap<String, bool>,
}

/// Longest secret name.
pub const SECRET_NAME_MAX: usize = 64;

/// Checks a sealed secret's name: 1 to 64 characters of `A-Z a-z 0-9 _ . -`.
/// The error says what is wrong (it quotes the name, never a value).
pub fn validate_secret_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("secret name is empty; use 1 to 64 characters of A-Z a-z 0-9 _ . -".into());
    }
    if name.chars().count() > SECRET_NAME_MAX {
        return Err(format!(
            "secret name is {} characters long; the most is {SECRET_NAME_MAX}",
            name.chars().count()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(format!(
            "secret name {name:?} contains {c:?}; use only A-Z a-z 0-9 _ . -"
        ));
    }
    Ok(())
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
    /// Incognito threads may use only local models (providers on this
    /// machine or a private network, and `echo`).
    pub incognito_local_only: bool,
    /// A community (guild, workspace, group) whose own key for a provider
    /// was removed falls back to the operator's key; by default (false) its
    /// runs on that provider fail, saying the key was removed. Communities
    /// that never set a key always use the operator's.
    pub community_fallback: bool,
}

/// `[llm.prices."<model>"]`: USD per million tokens. `input` and `output`
/// are required unless `free = true` (then they are 0).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPriceConfig")]
pub struct PriceConfig {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Cached prompt tokens; the input price when absent.
    pub cached: Option<f64>,
    /// Prompt tokens written to a cache; the input price when absent.
    pub cache_write: Option<f64>,
    /// Reasoning tokens are reported apart from output and billed as output.
    pub reasoning_apart: bool,
    /// The model costs nothing: it never draws from `cost_usd` budget pools.
    pub free: bool,
}

/// `PriceConfig` as written, before the check that prices are given unless free.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPriceConfig {
    #[serde(default)]
    input: Option<f64>,
    #[serde(default)]
    output: Option<f64>,
    #[serde(default)]
    cached: Option<f64>,
    #[serde(default)]
    cache_write: Option<f64>,
    #[serde(default)]
    reasoning_apart: bool,
    #[serde(default)]
    free: bool,
}

impl TryFrom<RawPriceConfig> for PriceConfig {
    type Error = String;

    fn try_from(raw: RawPriceConfig) -> Result<Self, String> {
        let (input, output) = match (raw.input, raw.output, raw.free) {
            (Some(i), Some(o), _) => (i, o),
            (None, None, true) => (0.0, 0.0),
            _ => {
                return Err(
                    "give both `input` and `output` (USD per million tokens), or `free = true` \
                     for a model that costs nothing"
                        .into(),
                );
            }
        };
        Ok(Self {
            input,
            output,
            cached: raw.cached,
            cache_write: raw.cache_write,
            reasoning_apart: raw.reasoning_apart,
            free: raw.free,
        })
    }
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
