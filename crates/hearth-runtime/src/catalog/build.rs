//! The model catalog: configured providers, their models, and the default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_config::{Config, ProviderType};
use hearth_core::ModelRef;
use hearth_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use hearth_llm::gemini::{DEFAULT_BASE_URL as GEMINI_BASE_URL, GeminiConfig, GeminiProvider};
use hearth_llm::openai::{OpenAiConfig, OpenAiProvider};
use hearth_llm::prices::{Price, PriceTable};
use hearth_llm::{EchoProvider, OpenAiCompatConfig, OpenAiCompatProvider, Provider};
use hearth_store::secrets::SecretString;

use crate::error::RuntimeError;

/// One configured provider.
pub struct CatalogEntry {
    /// The adapter.
    pub provider: Arc<dyn Provider>,
    /// Its wire protocol name (`openai_compat`, `echo`).
    pub kind: &'static str,
    /// Models offered; empty accepts any name.
    pub models: Vec<String>,
    /// Capability overrides from config, for every model.
    pub capabilities: BTreeMap<String, bool>,
    /// Capability overrides from config, per model.
    pub model_capabilities: BTreeMap<String, BTreeMap<String, bool>>,
    /// True when requests stay on this machine or a private network.
    pub local: bool,
}

/// Whether a model takes tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSupport {
    /// Always.
    Yes,
    /// Never: prompt-only mode.
    No,
    /// Depends on the model behind a compatible server: tried, and dropped
    /// for that model when the server rejects them.
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
}

/// Providers by name, and the default model.
pub struct Catalog {
    /// Prices for cost estimates.
    pub prices: PriceTable,
    providers: BTreeMap<String, CatalogEntry>,
    default: ModelRef,
    fallback: Vec<String>,
    /// How the default was chosen, for the start-up line.
    pub origin: String,
}

/// Providers set up from well-known key variables when none is configured:
/// (name, type, key variable, base URL, default model). The default models are
/// the providers' moving aliases; set `llm.default_model` to pin one.
const DETECTED: [(&str, ProviderType, &str, Option<&str>, &str); 3] = [
    (
        "anthropic",
        ProviderType::Anthropic,
        "ANTHROPIC_API_KEY",
        None,
        "claude-sonnet-4-5",
    ),
    (
        "openai",
        ProviderType::Openai,
        "OPENAI_API_KEY",
        None,
        "gpt-4.1-mini",
    ),
    (
        "gemini",
        ProviderType::Gemini,
        "GEMINI_API_KEY",
        None,
        "gemini-flash-latest",
    ),
];

/// The providers whose key variable is set, in `DETECTED` order.
fn detect_providers(
    env: &BTreeMap<String, String>,
) -> Vec<(&'static str, hearth_config::ProviderConfig, &'static str)> {
    DETECTED
        .iter()
        .filter(|d| env.get(d.2).is_some_and(|k| !k.is_empty()))
        .map(|&(name, kind, var, base_url, _)| {
            let pc = hearth_config::ProviderConfig {
                kind,
                base_url: base_url.map(str::to_owned),
                api_key_env: Some(var.to_owned()),
                api_key_secret: None,
                headers: BTreeMap::new(),
                models: Vec::new(),
                capabilities: BTreeMap::new(),
                model_capabilities: BTreeMap::new(),
                request_timeout_secs: 120,
                idle_timeout_secs: 90,
            };
            (name, pc, var)
        })
        .collect()
}

/// The default model of an auto-detected provider.
fn detected_default_model(name: &str, pc: &hearth_config::ProviderConfig) -> Option<&'static str> {
    DETECTED
        .iter()
        .find(|d| d.0 == name && pc.api_key_env.as_deref() == Some(d.2))
        .map(|d| d.4)
}

/// The API key of provider `name`: from the environment variable named by
/// `api_key_env`, or from the opened sealed secret named by `api_key_secret`.
/// Errors name the provider and the variable or secret, never a value.
fn api_key(
    name: &str,
    pc: &hearth_config::ProviderConfig,
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretString>,
) -> Result<Option<String>, RuntimeError> {
    match (&pc.api_key_env, &pc.api_key_secret) {
        (Some(_), Some(_)) => Err(RuntimeError::InvalidInput(format!(
            "provider {name}: set either api_key_env or api_key_secret, not both"
        ))),
        (Some(var), None) => env.get(var).cloned().map(Some).ok_or_else(|| {
            RuntimeError::InvalidInput(format!(
                "provider {name}: environment variable {var} (api_key_env) is not set"
            ))
        }),
        (None, Some(secret)) => secrets
            .get(secret)
            .map(|s| Some(s.expose().to_owned()))
            .ok_or_else(|| {
                RuntimeError::InvalidInput(format!(
                    "provider {name}: secret `{secret}` (api_key_secret) is not available; \
                     store it with `hearth secrets set {secret}`"
                ))
            }),
        (None, None) => Ok(None),
    }
}

/// Where provider `pc`'s key comes from, for its error messages: the
/// variable's name or `secret <name>`, never the key.
fn key_source(pc: &hearth_config::ProviderConfig) -> Option<String> {
    match (&pc.api_key_env, &pc.api_key_secret) {
        (Some(var), _) => Some(var.clone()),
        (None, Some(secret)) => Some(format!("secret {secret}")),
        (None, None) => None,
    }
}

fn entry(
    provider: Arc<dyn Provider>,
    kind: &'static str,
    pc: &hearth_config::ProviderConfig,
) -> CatalogEntry {
    CatalogEntry {
        provider,
        kind,
        models: pc.models.clone(),
        capabilities: pc.capabilities.clone(),
        model_capabilities: pc.model_capabilities.clone(),
        local: kind == "echo" || pc.base_url.as_deref().is_some_and(is_local_url),
    }
}

/// True when `url`'s host is this machine or a private network: loopback,
/// private and link-local addresses, `localhost`, `*.local`, and single-label
/// names (a container or LAN host such as `ollama`). Providers without a
/// `base_url` use their public API and are not local.
pub fn is_local_url(url: &str) -> bool {
    use std::net::IpAddr;
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unique_local()
                || ip.is_unicast_link_local()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private() || v4.is_link_local())
        }
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost"
                || d.ends_with(".localhost")
                || d.ends_with(".local")
                || d.ends_with(".internal")
                || !d.contains('.')
        }
    }
}

/// Built-in capabilities of each adapter.
fn adapter_defaults(kind: &str) -> Capabilities {
    let (tools, parallel, usage, thinking) = match kind {
        "anthropic" | "gemini" | "openai" => (ToolSupport::Yes, true, true, true),
        // Behind a compatible server, tool support depends on the model.
        "openai_compat" => (ToolSupport::ModelDependent, true, true, true),
        _ => (ToolSupport::No, false, false, false),
    };
    Capabilities {
        tools,
        parallel_tool_calls: parallel,
        streaming: true,
        usage_metrics: usage,
        json_mode: false,
        thinking,
    }
}

/// Capability keys config may set.
pub const CAPABILITY_KEYS: [&str; 6] = [
    "tools",
    "parallel_tool_calls",
    "streaming",
    "usage_metrics",
    "json_mode",
    "thinking",
];

/// The provider used when none is configured and no key is found.
const ECHO: &str = "echo";

impl Catalog {
    /// Builds the catalog from config. `env` is the process environment (read
    /// only for the provider keys named by `api_key_env` and for auto-detection);
    /// `secrets` holds the opened sealed secrets by name, at least those named
    /// by a provider's `api_key_secret` (the caller reads and opens them, so
    /// the catalog needs neither the store nor the master key).
    pub fn from_config(
        config: &Config,
        env: &BTreeMap<String, String>,
        secrets: &BTreeMap<String, SecretString>,
        client: reqwest::Client,
    ) -> Result<Self, RuntimeError> {
        let mut providers = BTreeMap::new();
        let mut origin = String::from("configured in hearth.toml");
        let mut configured = config.llm.providers.clone();
        if configured.is_empty() {
            let detected = detect_providers(env);
            if !detected.is_empty() {
                origin = format!(
                    "found {} in the environment",
                    detected.iter().map(|d| d.2).collect::<Vec<_>>().join(", ")
                );
            }
            for (name, pc, _) in detected {
                configured.insert(name.to_owned(), pc);
            }
        }
        for (name, pc) in &configured {
            let keys = pc
                .capabilities
                .keys()
                .chain(pc.model_capabilities.values().flat_map(|m| m.keys()));
            for k in keys {
                if !CAPABILITY_KEYS.contains(&k.as_str()) {
                    return Err(RuntimeError::InvalidInput(format!(
                        "provider {name}: unknown capability {k:?}; known: {}",
                        CAPABILITY_KEYS.join(", ")
                    )));
                }
            }
            let entry = match pc.kind {
                ProviderType::Echo => entry(Arc::new(EchoProvider::new()), "echo", pc),
                ProviderType::OpenaiCompat => {
                    let base_url = pc.base_url.clone().ok_or_else(|| {
                        RuntimeError::InvalidInput(format!(
                            "provider {name}: `base_url` is required for type openai_compat \
                             (e.g. http://127.0.0.1:11434/v1)"
                        ))
                    })?;
                    let cfg = OpenAiCompatConfig {
                        name: name.clone(),
                        base_url,
                        api_key: api_key(name, pc, env, secrets)?,
                        api_key_env: key_source(pc),
                        headers: pc.headers.clone().into_iter().collect(),
                        request_timeout: Duration::from_secs(pc.request_timeout_secs),
                        idle_timeout: Duration::from_secs(pc.idle_timeout_secs),
                    };
                    let p = OpenAiCompatProvider::new(cfg, client.clone())
                        .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
                    entry(Arc::new(p), "openai_compat", pc)
                }
                ProviderType::Anthropic => {
                    let mut cfg =
                        AnthropicConfig::new(name.clone(), pc.base_url.clone().unwrap_or_default());
                    cfg.api_key = api_key(name, pc, env, secrets)?;
                    cfg.api_key_env = key_source(pc);
                    cfg.headers = pc.headers.clone().into_iter().collect();
                    cfg.request_timeout = Duration::from_secs(pc.request_timeout_secs);
                    cfg.idle_timeout = Duration::from_secs(pc.idle_timeout_secs);
                    let p = AnthropicProvider::new(cfg, client.clone())
                        .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
                    entry(Arc::new(p), "anthropic", pc)
                }
                ProviderType::Openai => {
                    let mut cfg =
                        OpenAiConfig::new(name.clone(), pc.base_url.clone().unwrap_or_default());
                    cfg.api_key = api_key(name, pc, env, secrets)?;
                    cfg.api_key_env = key_source(pc);
                    cfg.headers = pc.headers.clone().into_iter().collect();
                    cfg.request_timeout = Duration::from_secs(pc.request_timeout_secs);
                    cfg.idle_timeout = Duration::from_secs(pc.idle_timeout_secs);
                    let p = OpenAiProvider::new(cfg, client.clone())
                        .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
                    entry(Arc::new(p), "openai", pc)
                }
                ProviderType::Gemini => {
                    let mut cfg = GeminiConfig::new(
                        name.clone(),
                        pc.base_url
                            .clone()
                            .unwrap_or_else(|| GEMINI_BASE_URL.to_owned()),
                    );
                    cfg.api_key = api_key(name, pc, env, secrets)?;
                    cfg.api_key_env = key_source(pc);
                    cfg.headers = pc.headers.clone().into_iter().collect();
                    cfg.request_timeout = Duration::from_secs(pc.request_timeout_secs);
                    cfg.idle_timeout = Duration::from_secs(pc.idle_timeout_secs);
                    let p = GeminiProvider::new(cfg, client.clone())
                        .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
                    entry(Arc::new(p), "gemini", pc)
                }
            };
            providers.insert(name.clone(), entry);
        }
        // The echo provider is always there, so a thread can switch to it offline.
        providers
            .entry(ECHO.into())
            .or_insert_with(|| CatalogEntry {
                provider: Arc::new(EchoProvider::new()),
                kind: "echo",
                models: vec![ECHO.into()],
                capabilities: BTreeMap::new(),
                model_capabilities: BTreeMap::new(),
                local: true,
            });
        let default = match &config.llm.default_model {
            Some(s) => ModelRef::parse(s)
                .map_err(|e| RuntimeError::UnknownModel(format!("llm.default_model: {e}")))?,
            None => match configured.iter().next() {
                Some((name, pc)) => match pc.models.first() {
                    Some(m) => ModelRef {
                        provider: name.clone(),
                        model: m.clone(),
                    },
                    None if let Some(m) = detected_default_model(name, pc) => ModelRef {
                        provider: name.clone(),
                        model: m.to_owned(),
                    },
                    None => {
                        return Err(RuntimeError::UnknownModel(format!(
                            "provider {name} lists no models: set llm.default_model = \"{name}/<model>\""
                        )));
                    }
                },
                None => {
                    origin = "no provider configured and no API key found: using the offline echo provider".into();
                    ModelRef {
                        provider: ECHO.into(),
                        model: ECHO.into(),
                    }
                }
            },
        };
        let prices = config
            .llm
            .prices
            .iter()
            .map(|(k, v)| {
                let price = Price {
                    input: v.input,
                    output: v.output,
                    cached: v.cached,
                    cache_write: v.cache_write,
                    reasoning_apart: v.reasoning_apart,
                };
                (k.clone(), price)
            })
            .collect();
        let catalog = Self {
            prices: PriceTable::new(prices),
            providers,
            default,
            fallback: config.llm.fallback.clone(),
            origin,
        };
        for f in &catalog.fallback {
            catalog
                .resolve(f)
                .map_err(|e| RuntimeError::UnknownModel(format!("llm.fallback: {e}")))?;
        }
        catalog
            .resolve(&catalog.default.to_string())
            .map_err(|e| RuntimeError::UnknownModel(format!("llm.default_model: {e}")))?;
        Ok(catalog)
    }

    /// The default model.
    pub fn default_model(&self) -> &ModelRef {
        &self.default
    }

    /// The fallback models for a run on `primary`, resolved, in order
    /// (`primary` itself left out).
    pub fn fallbacks_for(&self, primary: &ModelRef) -> Vec<(ModelRef, Arc<dyn Provider>)> {
        self.fallback
            .iter()
            .filter_map(|f| self.resolve(f).ok())
            .filter(|(m, _)| m != primary)
            .collect()
    }

    /// True when the model's provider is local (see [`is_local_url`]).
    pub fn is_local(&self, model: &ModelRef) -> bool {
        self.providers.get(&model.provider).is_some_and(|e| e.local)
    }

    /// The capabilities of a model: the adapter's defaults, then the
    /// provider's overrides, then the model's.
    pub fn capabilities(&self, model: &ModelRef) -> Capabilities {
        let Some(entry) = self.providers.get(&model.provider) else {
            return adapter_defaults("echo");
        };
        let mut caps = adapter_defaults(entry.kind);
        let per_model = entry.model_capabilities.get(&model.model);
        for overrides in std::iter::once(&entry.capabilities).chain(per_model) {
            for (k, v) in overrides {
                match k.as_str() {
                    "tools" => {
                        caps.tools = if *v {
                            ToolSupport::Yes
                        } else {
                            ToolSupport::No
                        }
                    }
                    "parallel_tool_calls" => caps.parallel_tool_calls = *v,
                    "streaming" => caps.streaming = *v,
                    "usage_metrics" => caps.usage_metrics = *v,
                    "json_mode" => caps.json_mode = *v,
                    "thinking" => caps.thinking = *v,
                    _ => {}
                }
            }
        }
        caps
    }

    /// Providers by name.
    pub fn providers(&self) -> &BTreeMap<String, CatalogEntry> {
        &self.providers
    }

    /// Checks a `<provider>/<model>` reference and returns its provider.
    pub fn resolve(&self, model: &str) -> Result<(ModelRef, Arc<dyn Provider>), RuntimeError> {
        let r = ModelRef::parse(model).map_err(|e| RuntimeError::UnknownModel(e.to_string()))?;
        let entry = self.providers.get(&r.provider).ok_or_else(|| {
            RuntimeError::UnknownModel(format!(
                "unknown provider {:?} in {model:?}; configured: {}",
                r.provider,
                self.providers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !entry.models.is_empty() && !entry.models.contains(&r.model) {
            return Err(RuntimeError::UnknownModel(format!(
                "provider {} has no model {:?}; it offers: {}",
                r.provider,
                r.model,
                entry.models.join(", ")
            )));
        }
        Ok((r, entry.provider.clone()))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn local_urls_are_this_machine_or_a_private_network() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080",
            "http://[::1]:1234/v1",
            "http://192.168.1.20:11434",
            "http://10.0.0.5/v1",
            "http://ollama:11434/v1",
            "http://gpu-box.local:8000",
            "http://[fd00::1]/v1",
        ] {
            assert!(is_local_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://openrouter.ai/api/v1",
            "http://8.8.8.8/v1",
            "http://[2001:db8::1]/v1",
            "not a url",
        ] {
            assert!(!is_local_url(url), "{url}");
        }
    }

    use super::*;

    fn catalog(toml: &str, env: &[(&str, &str)]) -> Result<Catalog, RuntimeError> {
        let config = hearth_config::load_str(toml, "t", Vec::new()).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Catalog::from_config(&config, &env, &BTreeMap::new(), reqwest::Client::new())
    }

    #[test]
    fn falls_back_to_echo() {
        let c = catalog("", &[]).unwrap();
        assert_eq!(c.default_model().to_string(), "echo/echo");
        assert!(c.origin.contains("echo"));
    }

    #[test]
    fn detects_provider_keys() {
        let c = catalog("", &[("OPENAI_API_KEY", "sk-test")]).unwrap();
        assert_eq!(c.default_model().to_string(), "openai/gpt-4.1-mini");
        assert!(c.origin.contains("OPENAI_API_KEY"));
        assert_eq!(
            c.providers()["openai"].kind,
            "openai",
            "the native Responses adapter"
        );
        let c = catalog("", &[("GEMINI_API_KEY", "g"), ("ANTHROPIC_API_KEY", "a")]).unwrap();
        assert_eq!(c.default_model().to_string(), "anthropic/claude-sonnet-4-5");
        assert!(c.resolve("gemini/gemini-2.5-pro").is_ok());
        assert_eq!(c.providers()["gemini"].kind, "gemini");
        // A configured provider turns detection off.
        let c = catalog(
            "[llm.providers.x]\ntype = \"echo\"\nmodels = [\"e\"]\n",
            &[("ANTHROPIC_API_KEY", "a")],
        )
        .unwrap();
        assert!(!c.providers().contains_key("anthropic"));
    }

    #[test]
    fn validates_models() {
        let c = catalog(
            "[llm]\ndefault_model = \"local/m1\"\n[llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m1\"]\n",
            &[],
        )
        .unwrap();
        assert!(c.resolve("local/m1").is_ok());
        assert!(matches!(
            c.resolve("local/m2"),
            Err(RuntimeError::UnknownModel(_))
        ));
        assert!(matches!(
            c.resolve("nope/m1"),
            Err(RuntimeError::UnknownModel(_))
        ));
        assert!(matches!(
            c.resolve("garbage"),
            Err(RuntimeError::UnknownModel(_))
        ));
        assert!(c.resolve("echo/echo").is_ok());
    }

    #[test]
    fn missing_key_variable_is_an_error() {
        let e = catalog(
            "[llm.providers.x]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"NOPE_KEY\"\nmodels = [\"m\"]\n",
            &[],
        );
        assert!(e.err().unwrap().to_string().contains("NOPE_KEY"));
    }

    #[test]
    fn key_from_a_sealed_secret() {
        let toml = "[llm.providers.x]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_secret = \"x.key\"\nmodels = [\"m\"]\n";
        let config = hearth_config::load_str(toml, "t", Vec::new()).unwrap();
        let mut secrets = BTreeMap::new();
        secrets.insert("x.key".to_owned(), SecretString::new("sk-x".to_owned()));
        let c = Catalog::from_config(&config, &BTreeMap::new(), &secrets, reqwest::Client::new())
            .unwrap();
        assert!(c.resolve("x/m").is_ok());
        let e = catalog(toml, &[]).err().unwrap().to_string();
        assert!(e.contains("provider x") && e.contains("x.key"), "{e}");
        assert!(e.contains("hearth secrets set x.key"), "{e}");
    }
}
