//! Building the catalog from config: each provider's adapter by its
//! `ProviderType`, its key (from the environment or a sealed secret), the
//! providers detected from well-known key variables when none is
//! configured, the default model and the price table.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_config::{Config, ProviderConfig, ProviderType};
use hearth_core::ModelRef;
use hearth_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use hearth_llm::gemini::{DEFAULT_BASE_URL as GEMINI_BASE_URL, GeminiConfig, GeminiProvider};
use hearth_llm::openai::{OpenAiConfig, OpenAiProvider};
use hearth_llm::prices::{Price, PriceTable};
use hearth_llm::{
    CAPABILITY_KEYS, EchoProvider, LlmError, OpenAiCompatConfig, OpenAiCompatProvider, Provider,
};
use hearth_store::secrets::SecretString;

use super::{Catalog, CatalogEntry, is_local_url};
use crate::error::RuntimeError;

/// A provider set up from a well-known key variable when none is configured.
struct Detected {
    name: &'static str,
    kind: ProviderType,
    key_env: &'static str,
    /// The provider's moving alias; set `llm.default_model` to pin one.
    default_model: &'static str,
}

const DETECTED: [Detected; 3] = [
    Detected {
        name: "anthropic",
        kind: ProviderType::Anthropic,
        key_env: "ANTHROPIC_API_KEY",
        default_model: "claude-sonnet-4-5",
    },
    Detected {
        name: "openai",
        kind: ProviderType::Openai,
        key_env: "OPENAI_API_KEY",
        default_model: "gpt-4.1-mini",
    },
    Detected {
        name: "gemini",
        kind: ProviderType::Gemini,
        key_env: "GEMINI_API_KEY",
        default_model: "gemini-flash-latest",
    },
];

/// The provider used when none is configured and no key is found.
const ECHO: &str = "echo";

/// The providers whose key variable is set and not blank, in `DETECTED` order.
fn detect_providers(env: &BTreeMap<String, String>) -> Vec<(&'static Detected, ProviderConfig)> {
    DETECTED
        .iter()
        .filter(|d| env.get(d.key_env).is_some_and(|k| !k.trim().is_empty()))
        .map(|d| {
            let pc = ProviderConfig {
                kind: d.kind,
                base_url: None,
                api_key_env: Some(d.key_env.to_owned()),
                api_key_secret: None,
                headers: BTreeMap::new(),
                models: Vec::new(),
                capabilities: BTreeMap::new(),
                model_capabilities: BTreeMap::new(),
                context_window: None,
                request_timeout_secs: 120,
                idle_timeout_secs: 90,
                free: false,
            };
            (d, pc)
        })
        .collect()
}

/// The default model of an auto-detected provider.
fn detected_default_model(name: &str, pc: &ProviderConfig) -> Option<&'static str> {
    DETECTED
        .iter()
        .find(|d| d.name == name && pc.api_key_env.as_deref() == Some(d.key_env))
        .map(|d| d.default_model)
}

/// The API key of provider `name`: from the environment variable named by
/// `api_key_env`, or from the opened sealed secret named by `api_key_secret`.
/// A variable that is set but blank is refused here, at start, rather than
/// sent as an empty key that every call then fails on. Errors name the
/// provider and the variable or secret, never a value.
fn api_key(
    name: &str,
    pc: &ProviderConfig,
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, SecretString>,
) -> Result<Option<String>, RuntimeError> {
    match (&pc.api_key_env, &pc.api_key_secret) {
        (Some(_), Some(_)) => Err(RuntimeError::InvalidInput(format!(
            "provider {name}: set either api_key_env or api_key_secret, not both"
        ))),
        (Some(var), None) => match env.get(var) {
            None => Err(RuntimeError::InvalidInput(format!(
                "provider {name}: environment variable {var} (api_key_env) is not set; \
                 export it with the provider's API key, or remove api_key_env"
            ))),
            Some(key) if key.trim().is_empty() => Err(RuntimeError::InvalidInput(format!(
                "provider {name}: environment variable {var} (api_key_env) is empty; \
                 set it to the provider's API key, or remove api_key_env if the \
                 provider needs no key"
            ))),
            Some(key) => Ok(Some(key.clone())),
        },
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
fn key_source(pc: &ProviderConfig) -> Option<String> {
    match (&pc.api_key_env, &pc.api_key_secret) {
        (Some(var), _) => Some(var.clone()),
        (None, Some(secret)) => Some(format!("secret {secret}")),
        (None, None) => None,
    }
}

/// The adapter for provider `name` of type `pc.kind`.
fn build_provider(
    name: &str,
    pc: &ProviderConfig,
    api_key: Option<String>,
    client: &reqwest::Client,
) -> Result<Arc<dyn Provider>, RuntimeError> {
    let invalid = |e: LlmError| RuntimeError::InvalidInput(e.to_string());
    let headers: Vec<(String, String)> = pc.headers.clone().into_iter().collect();
    let request_timeout = Duration::from_secs(pc.request_timeout_secs);
    let idle_timeout = Duration::from_secs(pc.idle_timeout_secs);
    let base_url = pc.base_url.clone().unwrap_or_default();
    let api_key_env = key_source(pc);
    Ok(match pc.kind {
        ProviderType::Echo => Arc::new(EchoProvider::new()),
        ProviderType::OpenaiCompat => {
            if pc.base_url.is_none() {
                return Err(RuntimeError::InvalidInput(format!(
                    "provider {name}: `base_url` is required for type openai_compat \
                     (e.g. http://127.0.0.1:11434/v1)"
                )));
            }
            let mut cfg = OpenAiCompatConfig::new(name, base_url);
            (cfg.api_key, cfg.api_key_env, cfg.headers) = (api_key, api_key_env, headers);
            (cfg.request_timeout, cfg.idle_timeout) = (request_timeout, idle_timeout);
            Arc::new(OpenAiCompatProvider::new(cfg, client.clone()).map_err(invalid)?)
        }
        ProviderType::Anthropic => {
            let mut cfg = AnthropicConfig::new(name, base_url);
            (cfg.api_key, cfg.api_key_env, cfg.headers) = (api_key, api_key_env, headers);
            (cfg.request_timeout, cfg.idle_timeout) = (request_timeout, idle_timeout);
            Arc::new(AnthropicProvider::new(cfg, client.clone()).map_err(invalid)?)
        }
        ProviderType::Openai => {
            let mut cfg = OpenAiConfig::new(name, base_url);
            (cfg.api_key, cfg.api_key_env, cfg.headers) = (api_key, api_key_env, headers);
            (cfg.request_timeout, cfg.idle_timeout) = (request_timeout, idle_timeout);
            Arc::new(OpenAiProvider::new(cfg, client.clone()).map_err(invalid)?)
        }
        ProviderType::Gemini => {
            let base = pc.base_url.as_deref().unwrap_or(GEMINI_BASE_URL);
            let mut cfg = GeminiConfig::new(name, base);
            (cfg.api_key, cfg.api_key_env, cfg.headers) = (api_key, api_key_env, headers);
            (cfg.request_timeout, cfg.idle_timeout) = (request_timeout, idle_timeout);
            Arc::new(GeminiProvider::new(cfg, client.clone()).map_err(invalid)?)
        }
    })
}

/// Header names that carry a provider key: a community's key replaces the
/// operator's, wherever the operator's was put.
const KEY_HEADERS: [&str; 3] = ["authorization", "x-api-key", "x-goog-api-key"];

impl Catalog {
    /// Provider `name` as configured, but calling with `key` (a community's
    /// own) instead of the operator's. `None` for a provider that is not
    /// configured (echo, a typo).
    pub fn with_key(
        &self,
        name: &str,
        key: &str,
    ) -> Option<Result<Arc<dyn Provider>, RuntimeError>> {
        let mut pc = self.configs.get(name)?.clone();
        pc.headers
            .retain(|h, _| !KEY_HEADERS.contains(&h.to_ascii_lowercase().as_str()));
        pc.api_key_env = None;
        pc.api_key_secret = Some("community key".into());
        Some(build_provider(
            name,
            &pc,
            Some(key.to_owned()),
            &self.client,
        ))
    }

    /// True when `name` is a configured provider that takes a key (not
    /// echo): one a community may give its own key for.
    pub fn takes_key(&self, name: &str) -> bool {
        self.configs
            .get(name)
            .is_some_and(|pc| pc.kind != ProviderType::Echo)
    }
}

/// Refuses capability names the matrix does not know.
fn check_capability_keys(name: &str, pc: &ProviderConfig) -> Result<(), RuntimeError> {
    let keys = pc
        .capabilities
        .keys()
        .chain(pc.model_capabilities.values().flat_map(|m| m.flags.keys()));
    for k in keys {
        if !CAPABILITY_KEYS.contains(&k.as_str()) {
            return Err(RuntimeError::InvalidInput(format!(
                "provider {name}: unknown capability {k:?}; known: {}",
                CAPABILITY_KEYS.join(", ")
            )));
        }
    }
    Ok(())
}

/// The default model: `llm.default_model`, else the first provider's first
/// model (or its detected default), else echo. Also says how it was chosen
/// when no provider is configured.
fn default_model(
    config: &Config,
    configured: &BTreeMap<String, ProviderConfig>,
    origin: &mut String,
) -> Result<ModelRef, RuntimeError> {
    if let Some(s) = &config.llm.default_model {
        return ModelRef::parse(s)
            .map_err(|e| RuntimeError::UnknownModel(format!("llm.default_model: {e}")));
    }
    let Some((name, pc)) = configured.iter().next() else {
        *origin =
            "no provider configured and no API key found: using the offline echo provider".into();
        return Ok(ModelRef {
            provider: ECHO.into(),
            model: ECHO.into(),
        });
    };
    let model = match pc.models.first() {
        Some(m) => m.clone(),
        None => match detected_default_model(name, pc) {
            Some(m) => m.to_owned(),
            None => {
                return Err(RuntimeError::UnknownModel(format!(
                    "provider {name} lists no models: set llm.default_model = \"{name}/<model>\""
                )));
            }
        },
    };
    Ok(ModelRef {
        provider: name.clone(),
        model,
    })
}

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
        let mut origin = String::from("configured in hearth.toml");
        let mut configured = config.llm.providers.clone();
        if configured.is_empty() {
            let detected = detect_providers(env);
            if !detected.is_empty() {
                let vars: Vec<_> = detected.iter().map(|(d, _)| d.key_env).collect();
                origin = format!("found {} in the environment", vars.join(", "));
            }
            for (d, pc) in detected {
                configured.insert(d.name.to_owned(), pc);
            }
        }
        let mut providers = BTreeMap::new();
        for (name, pc) in &configured {
            check_capability_keys(name, pc)?;
            let key = api_key(name, pc, env, secrets)?;
            let provider = build_provider(name, pc, key, &client)?;
            let entry = CatalogEntry {
                provider,
                kind: pc.kind,
                models: pc.models.clone(),
                capabilities: pc.capabilities.clone(),
                model_capabilities: pc.model_capabilities.clone(),
                context_window: pc.context_window,
                local: pc.kind == ProviderType::Echo
                    || pc.base_url.as_deref().is_some_and(is_local_url),
            };
            providers.insert(name.clone(), entry);
        }
        // The echo provider is always there, so a thread can switch to it offline.
        providers
            .entry(ECHO.into())
            .or_insert_with(|| CatalogEntry {
                provider: Arc::new(EchoProvider::new()),
                kind: ProviderType::Echo,
                models: vec![ECHO.into()],
                capabilities: BTreeMap::new(),
                model_capabilities: BTreeMap::new(),
                context_window: None,
                local: true,
            });
        let default = default_model(config, &configured, &mut origin)?;
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
            configs: configured,
            client,
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
}

#[cfg(test)]
mod tests {
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
        assert_eq!(c.providers()["echo"].kind, ProviderType::Echo);
    }

    #[test]
    fn detects_provider_keys() {
        let c = catalog("", &[("OPENAI_API_KEY", "sk-test")]).unwrap();
        assert_eq!(c.default_model().to_string(), "openai/gpt-4.1-mini");
        assert!(c.origin.contains("OPENAI_API_KEY"));
        assert_eq!(
            c.providers()["openai"].kind,
            ProviderType::Openai,
            "the native Responses adapter"
        );
        let c = catalog("", &[("GEMINI_API_KEY", "g"), ("ANTHROPIC_API_KEY", "a")]).unwrap();
        assert_eq!(c.default_model().to_string(), "anthropic/claude-sonnet-4-5");
        assert!(c.resolve("gemini/gemini-2.5-pro").is_ok());
        assert_eq!(c.providers()["gemini"].kind, ProviderType::Gemini);
        // A blank variable is not a key: nothing is detected from it.
        let c = catalog("", &[("OPENAI_API_KEY", " ")]).unwrap();
        assert_eq!(c.default_model().to_string(), "echo/echo");
        // A configured provider turns detection off.
        let c = catalog(
            "[llm.providers.x]\ntype = \"echo\"\nmodels = [\"e\"]\n",
            &[("ANTHROPIC_API_KEY", "a")],
        )
        .unwrap();
        assert!(!c.providers().contains_key("anthropic"));
    }

    #[test]
    fn missing_key_variable_is_an_error() {
        let e = catalog(
            "[llm.providers.x]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"NOPE_KEY\"\nmodels = [\"m\"]\n",
            &[],
        );
        let e = e.err().unwrap().to_string();
        assert!(e.contains("NOPE_KEY") && e.contains("not set"), "{e}");
    }

    #[test]
    fn empty_key_variable_is_refused_at_start() {
        for kind in ["openai", "anthropic", "gemini", "openai_compat"] {
            let toml = format!(
                "[llm.providers.main]\ntype = \"{kind}\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
                 api_key_env = \"OPENAI_API_KEY\"\nmodels = [\"m\"]\n"
            );
            for blank in ["", "  "] {
                let e = catalog(&toml, &[("OPENAI_API_KEY", blank)])
                    .err()
                    .unwrap_or_else(|| panic!("{kind}: a blank key was accepted"))
                    .to_string();
                assert!(
                    e.contains("provider main")
                        && e.contains("OPENAI_API_KEY")
                        && e.contains("empty"),
                    "{kind}: {e}"
                );
            }
        }
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

    #[test]
    fn key_sources_are_named_never_the_key() {
        let toml = "[llm.providers.x]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\napi_key_env = \"X_KEY\"\nmodels = [\"m\"]\n";
        let config = hearth_config::load_str(toml, "t", Vec::new()).unwrap();
        let pc = &config.llm.providers["x"];
        assert_eq!(key_source(pc).as_deref(), Some("X_KEY"));
        let mut pc = pc.clone();
        pc.api_key_env = None;
        pc.api_key_secret = Some("x.key".into());
        assert_eq!(key_source(&pc).as_deref(), Some("secret x.key"));
    }
}
