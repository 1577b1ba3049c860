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
    /// `[permissions]`
    pub permissions: PermissionsConfig,
    /// `[tools]`
    pub tools: ToolsConfig,
    /// `[channels]`
    pub channels: crate::channels::ChannelsConfig,
    /// `[mcp]`
    pub mcp: crate::mcp::McpConfig,
    /// `[skills]`
    pub skills: crate::skills::SkillsConfig,
    /// `[router]`
    pub router: crate::router::RouterConfig,
    /// `[budget]`
    pub budget: crate::budget::BudgetConfig,
    /// `[alerts]`
    pub alerts: crate::alerts::AlertsConfig,
}

/// `[tools]`: what the model may call, and what it must ask first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Write-class tools wait for the user's confirmation before they run.
    pub confirm_writes: bool,
    /// Write-class tools that run without confirmation, by exact name.
    pub no_confirm: Vec<String>,
    /// `[tools.profiles.<channel>]`: the tools a channel (`api`, `telegram`,
    /// ...) offers; a channel without a profile offers every tool.
    pub profiles: BTreeMap<String, ToolProfileConfig>,
    /// `[tools.web_search]`: the search backend; without it there is no
    /// `web_search` tool.
    pub web_search: Option<WebSearchConfig>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            confirm_writes: true,
            no_confirm: Vec::new(),
            profiles: BTreeMap::new(),
            web_search: None,
        }
    }
}

/// `[tools.profiles.<channel>]`: globs (`*`, `?`) over tool names; a tool is
/// offered when some `include` glob matches it and no `exclude` glob does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolProfileConfig {
    /// Tools offered; every tool by default.
    #[serde(deserialize_with = "tool_globs")]
    pub include: Vec<String>,
    /// Tools withheld even when included.
    #[serde(deserialize_with = "tool_globs")]
    pub exclude: Vec<String>,
}

impl Default for ToolProfileConfig {
    fn default() -> Self {
        Self {
            include: vec!["*".into()],
            exclude: Vec::new(),
        }
    }
}

/// A list of tool-name globs, each checked by [`validate_tool_glob`], so a
/// typo fails at start rather than silently matching nothing.
fn tool_globs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let globs = Vec::<String>::deserialize(d)?;
    for g in &globs {
        validate_tool_glob(g).map_err(serde::de::Error::custom)?;
    }
    Ok(globs)
}

/// Checks a tool-name glob: tool-name characters (`A-Z a-z 0-9 _ -`) plus
/// the wildcards `*` (any run) and `?` (one character).
pub fn validate_tool_glob(glob: &str) -> Result<(), String> {
    if glob.is_empty() {
        return Err("empty glob; use `*` for every tool".into());
    }
    if let Some(c) = glob
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*' | '?')))
    {
        return Err(format!(
            "glob {glob:?} contains {c:?}; use tool-name characters (A-Z a-z 0-9 _ -) \
             and the wildcards * and ?"
        ));
    }
    Ok(())
}

/// The service behind `web_search`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchBackend {
    /// A SearXNG instance's JSON API (often self-hosted).
    Searxng,
    /// The Brave Search API (needs a subscription key).
    Brave,
}

/// Most results one `web_search` call may return.
pub const WEB_SEARCH_MAX_RESULTS: u32 = 10;

/// `[tools.web_search]`: where `web_search` sends queries.
///
/// SearXNG needs `base_url`; Brave needs a key, from an environment variable
/// (`api_key_env`) or a sealed secret (`api_key_secret`), not both.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawWebSearchConfig")]
pub struct WebSearchConfig {
    /// `searxng` or `brave`.
    pub backend: SearchBackend,
    /// The backend's address; Brave's own when absent.
    pub base_url: Option<String>,
    /// Name of the environment variable holding the Brave key.
    pub api_key_env: Option<String>,
    /// Name of the sealed secret holding the Brave key.
    pub api_key_secret: Option<String>,
    /// Most results one call returns (1 to 10), whatever count the model asks.
    pub max_results: u32,
    /// Time one search may take, in seconds.
    pub timeout_secs: u64,
}

/// `WebSearchConfig` as written, before the checks that span fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebSearchConfig {
    backend: SearchBackend,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    api_key_secret: Option<String>,
    #[serde(default = "default_web_search_max_results")]
    max_results: u32,
    #[serde(default = "default_web_search_timeout")]
    timeout_secs: u64,
}

fn default_web_search_max_results() -> u32 {
    WEB_SEARCH_MAX_RESULTS
}

fn default_web_search_timeout() -> u64 {
    15
}

impl TryFrom<RawWebSearchConfig> for WebSearchConfig {
    type Error = String;

    fn try_from(raw: RawWebSearchConfig) -> Result<Self, String> {
        let has_key = raw.api_key_env.is_some() || raw.api_key_secret.is_some();
        match raw.backend {
            SearchBackend::Searxng if raw.base_url.is_none() => {
                return Err(
                    "backend = \"searxng\" needs `base_url`, the address of the SearXNG \
                     instance (e.g. \"http://127.0.0.1:8888\")"
                        .into(),
                );
            }
            SearchBackend::Searxng if has_key => {
                return Err(
                    "`api_key_env` and `api_key_secret` apply only to backend = \"brave\"".into(),
                );
            }
            SearchBackend::Brave if !has_key => {
                return Err(
                    "backend = \"brave\" needs a key: `api_key_env` (the variable holding it) \
                     or `api_key_secret` (a sealed secret)"
                        .into(),
                );
            }
            SearchBackend::Searxng | SearchBackend::Brave => {}
        }
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
        if let Some(url) = &raw.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(format!(
                "`base_url` {url:?} is not an http:// or https:// URL"
            ));
        }
        if !(1..=WEB_SEARCH_MAX_RESULTS).contains(&raw.max_results) {
            return Err(format!(
                "`max_results` is {}; use 1 to {WEB_SEARCH_MAX_RESULTS}",
                raw.max_results
            ));
        }
        if raw.timeout_secs == 0 {
            return Err("`timeout_secs` must be at least 1".into());
        }
        Ok(Self {
            backend: raw.backend,
            base_url: raw.base_url,
            api_key_env: raw.api_key_env,
            api_key_secret: raw.api_key_secret,
            max_results: raw.max_results,
            timeout_secs: raw.timeout_secs,
        })
    }
}

#[cfg(test)]
mod tools_tests {
    use super::*;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    fn error(toml: &str) -> String {
        load(toml).unwrap_err().to_string()
    }

    #[test]
    fn profiles_default_to_every_tool_and_keep_their_globs() {
        let c = load(
            "[tools.profiles.api]\nexclude = [\"web_*\", \"memory_?ave\"]\n\
             [tools.profiles.telegram]\ninclude = [\"current_time\"]\n",
        )
        .unwrap();
        let api = &c.tools.profiles["api"];
        assert_eq!(api.include, vec!["*"]);
        assert_eq!(api.exclude, vec!["web_*", "memory_?ave"]);
        assert_eq!(c.tools.profiles["telegram"].include, vec!["current_time"]);
        assert!(c.tools.profiles["telegram"].exclude.is_empty());
        assert!(
            c.tools.confirm_writes,
            "the other [tools] keys keep their defaults"
        );
    }

    #[test]
    fn a_bad_glob_is_an_error_naming_the_key() {
        for (glob, says) in [("web.*", "'.'"), ("", "empty"), ("[ab]", "'['")] {
            let err = error(&format!("[tools.profiles.api]\nexclude = [{glob:?}]\n"));
            assert!(err.contains("tools.profiles.api.exclude"), "{err}");
            assert!(err.contains(says), "{err}");
        }
        let err = error("[tools.profiles.api]\nincude = [\"*\"]\n");
        assert!(err.contains("incude"), "{err}");
    }

    #[test]
    fn web_search_backends() {
        let c = load(
            "[tools.web_search]\nbackend = \"searxng\"\nbase_url = \"http://127.0.0.1:8888\"\n",
        )
        .unwrap();
        let w = c.tools.web_search.unwrap();
        assert_eq!(w.backend, SearchBackend::Searxng);
        assert_eq!(w.max_results, WEB_SEARCH_MAX_RESULTS);
        let c = load("[tools.web_search]\nbackend = \"brave\"\napi_key_secret = \"brave\"\nmax_results = 3\n")
            .unwrap();
        let w = c.tools.web_search.unwrap();
        assert_eq!(
            (
                w.backend,
                w.base_url,
                w.api_key_secret.as_deref(),
                w.max_results
            ),
            (SearchBackend::Brave, None, Some("brave"), 3)
        );
        assert_eq!(Config::default().tools.web_search, None);
    }

    #[test]
    fn web_search_errors_name_the_section_and_the_fix() {
        for (toml, says) in [
            ("backend = \"searxng\"", "needs `base_url`"),
            ("backend = \"brave\"", "needs a key"),
            (
                "backend = \"brave\"\napi_key_env = \"K\"\napi_key_secret = \"k\"",
                "not both",
            ),
            (
                "backend = \"searxng\"\nbase_url = \"http://x\"\napi_key_env = \"K\"",
                "only to backend = \"brave\"",
            ),
            ("backend = \"searxng\"\nbase_url = \"x.org\"", "http://"),
            (
                "backend = \"brave\"\napi_key_env = \"K\"\nmax_results = 11",
                "1 to 10",
            ),
            ("backend = \"bing\"", "bing"),
            ("backend = \"brave\"\napi_key = \"k\"", "api_key"),
        ] {
            let err = error(&format!("[tools.web_search]\n{toml}\n"));
            assert!(err.contains("tools.web_search"), "{err}");
            assert!(err.contains(says), "{says}: {err}");
        }
    }
}

/// A permission preset by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PresetName {
    /// Nothing beyond tools anyone may use.
    None,
    /// Memory and web tools.
    Member,
    /// Member, plus jobs and skills.
    Trusted,
    /// Everything.
    Admin,
}

/// `[permissions]`: who may do what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// What every user may do.
    pub default_preset: PresetName,
    /// User keys that hold every capability.
    pub admins: Vec<String>,
}

impl Default for PermissionsConfig {
    fn default() -> Self {
        Self {
            default_preset: PresetName::Member,
            admins: Vec::new(),
        }
    }
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
    /// Milliseconds a client gets to send a whole request head; slower
    /// connections are closed, so slow clients cannot hold connections open.
    pub header_read_timeout_ms: u64,
    /// Connections served at once; more clients wait until one closes.
    pub max_connections: usize,
    /// Runs queued or running at once; past it new messages get 503
    /// `overloaded` with Retry-After instead of growing the queue.
    pub max_queued_runs: usize,
    /// Host names (or `host:port`) every route accepts in Host besides the
    /// loopback names and the bind address (DNS-rebinding protection), and
    /// accepts as a browser Origin: the names a reverse proxy or LAN
    /// clients use.
    pub allowed_hosts: Vec<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1:7777".into(),
            max_body_bytes: 1024 * 1024,
            shutdown_grace_secs: 10,
            header_read_timeout_ms: 10_000,
            max_connections: 1024,
            max_queued_runs: 10_000,
            allowed_hosts: Vec::new(),
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
    /// How many past messages of the thread are sent to the model; only
    /// with `compaction = false` (compaction replaces this cap).
    pub history_messages: u32,
    /// Summarize the oldest turns when a run's context would pass
    /// `context_fraction` of the model's window.
    pub compaction: bool,
    /// Share of the context window a run's context may fill before the
    /// oldest turns are summarized (0 < fraction <= 1).
    pub context_fraction: f64,
    /// Context window assumed for a model whose window is not known.
    pub default_context_tokens: u32,
    /// Most tokens one model answer may have: sent to the provider as its
    /// max tokens, and reserved from budget pools before each call.
    pub max_output_tokens: u32,
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
            compaction: true,
            context_fraction: 0.75,
            default_context_tokens: 32_000,
            max_output_tokens: 4096,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    #[test]
    fn provider_key_from_a_secret() {
        let c = load(
            "[llm.providers.cloud]\ntype = \"openai\"\napi_key_secret = \"openai.key\"\nmodels = [\"m\"]\n",
        )
        .unwrap();
        let p = &c.llm.providers["cloud"];
        assert_eq!(p.api_key_secret.as_deref(), Some("openai.key"));
        assert_eq!(p.api_key_env, None);
        assert_eq!(p.request_timeout_secs, 120);
        assert_eq!(p.idle_timeout_secs, 90);
    }

    #[test]
    fn both_key_sources_is_an_error_naming_the_provider() {
        let err = load(
            "[llm.providers.cloud]\ntype = \"openai\"\napi_key_env = \"K\"\napi_key_secret = \"k\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("llm.providers.cloud"), "{err}");
        assert!(
            err.contains("api_key_env") && err.contains("api_key_secret"),
            "{err}"
        );
    }

    #[test]
    fn bad_secret_name_is_an_error() {
        let err = load("[llm.providers.cloud]\ntype = \"openai\"\napi_key_secret = \"a b\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("llm.providers.cloud"), "{err}");
        assert!(err.contains("api_key_secret"), "{err}");
    }

    #[test]
    fn provider_fields_are_still_strict_and_named() {
        let err = load("[llm.providers.cloud]\ntype = \"openai\"\napi_key = \"sk\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("llm.providers.cloud"), "{err}");
        assert!(err.contains("api_key"), "{err}");
        let err = load("[llm.providers.cloud]\ntype = \"openai\"\nrequest_timeout_secs = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("llm.providers.cloud.request_timeout_secs"),
            "{err}"
        );
    }

    #[test]
    fn secret_names() {
        for ok in ["a", "openai.key", "A_b-9", &"x".repeat(64)] {
            assert!(validate_secret_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a b", "a/b", "ключ", "a=b", &"x".repeat(65)] {
            assert!(validate_secret_name(bad).is_err(), "{bad:?}");
        }
    }
}
