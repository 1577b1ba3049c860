//! The model catalog: configured providers, their models, and the default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_config::{Config, ProviderType};
use hearth_core::ModelRef;
use hearth_llm::{EchoProvider, OpenAiCompatConfig, OpenAiCompatProvider, Provider};

use crate::error::RuntimeError;

/// One configured provider.
pub struct CatalogEntry {
    /// The adapter.
    pub provider: Arc<dyn Provider>,
    /// Its wire protocol name (`openai_compat`, `echo`).
    pub kind: &'static str,
    /// Models offered; empty accepts any name.
    pub models: Vec<String>,
    /// Capability overrides from config.
    pub capabilities: BTreeMap<String, bool>,
}

/// Providers by name, and the default model.
pub struct Catalog {
    providers: BTreeMap<String, CatalogEntry>,
    default: ModelRef,
    fallback: Vec<String>,
    /// How the default was chosen, for the start-up line.
    pub origin: String,
}

/// The provider used when none is configured and no key is found.
const ECHO: &str = "echo";

impl Catalog {
    /// Builds the catalog from config. `env` is the process environment (read
    /// only for the provider keys named by `api_key_env` and for auto-detection).
    pub fn from_config(
        config: &Config,
        env: &BTreeMap<String, String>,
        client: reqwest::Client,
    ) -> Result<Self, RuntimeError> {
        let mut providers = BTreeMap::new();
        let mut origin = String::from("configured in hearth.toml");
        let mut configured = config.llm.providers.clone();
        if configured.is_empty()
            && let Some(key) = env.get("OPENAI_API_KEY").filter(|k| !k.is_empty())
        {
            let _ = key;
            configured.insert(
                "openai".into(),
                hearth_config::ProviderConfig {
                    kind: ProviderType::OpenaiCompat,
                    base_url: Some("https://api.openai.com/v1".into()),
                    api_key_env: Some("OPENAI_API_KEY".into()),
                    headers: BTreeMap::new(),
                    models: Vec::new(),
                    capabilities: BTreeMap::new(),
                    request_timeout_secs: 120,
                    idle_timeout_secs: 90,
                },
            );
            origin = "found OPENAI_API_KEY in the environment".into();
        }
        for (name, pc) in &configured {
            let entry = match pc.kind {
                ProviderType::Echo => CatalogEntry {
                    provider: Arc::new(EchoProvider::new()),
                    kind: "echo",
                    models: pc.models.clone(),
                    capabilities: pc.capabilities.clone(),
                },
                ProviderType::OpenaiCompat => {
                    let base_url = pc.base_url.clone().ok_or_else(|| {
                        RuntimeError::InvalidInput(format!(
                            "provider {name}: `base_url` is required for type openai_compat \
                             (e.g. http://127.0.0.1:11434/v1)"
                        ))
                    })?;
                    let api_key = match &pc.api_key_env {
                        Some(var) => Some(env.get(var).cloned().ok_or_else(|| {
                            RuntimeError::InvalidInput(format!(
                                "provider {name}: environment variable {var} (api_key_env) is not set"
                            ))
                        })?),
                        None => None,
                    };
                    let cfg = OpenAiCompatConfig {
                        name: name.clone(),
                        base_url,
                        api_key,
                        headers: pc.headers.clone().into_iter().collect(),
                        request_timeout: Duration::from_secs(pc.request_timeout_secs),
                        idle_timeout: Duration::from_secs(pc.idle_timeout_secs),
                    };
                    let p = OpenAiCompatProvider::new(cfg, client.clone())
                        .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
                    CatalogEntry {
                        provider: Arc::new(p),
                        kind: "openai_compat",
                        models: pc.models.clone(),
                        capabilities: pc.capabilities.clone(),
                    }
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
                    None if name == "openai"
                        && pc.api_key_env.as_deref() == Some("OPENAI_API_KEY") =>
                    {
                        ModelRef {
                            provider: name.clone(),
                            model: "gpt-4.1-mini".into(),
                        }
                    }
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
        let catalog = Self {
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
    use super::*;

    fn catalog(toml: &str, env: &[(&str, &str)]) -> Result<Catalog, RuntimeError> {
        let config = hearth_config::load_str(toml, "t", Vec::new()).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Catalog::from_config(&config, &env, reqwest::Client::new())
    }

    #[test]
    fn falls_back_to_echo() {
        let c = catalog("", &[]).unwrap();
        assert_eq!(c.default_model().to_string(), "echo/echo");
        assert!(c.origin.contains("echo"));
    }

    #[test]
    fn detects_openai_key() {
        let c = catalog("", &[("OPENAI_API_KEY", "sk-test")]).unwrap();
        assert_eq!(c.default_model().provider, "openai");
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
}
