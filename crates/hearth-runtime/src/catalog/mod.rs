//! The model catalog: configured providers, their models, and the default.
//!
//! Split by concern: `build` turns config into providers (keys, detection
//! from the environment, the default model), `locality` says which
//! providers keep requests on this machine; resolving a model reference
//! and a model's capabilities (hearth-llm's matrix plus config overrides)
//! live here.

mod build;
mod locality;

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_config::ProviderType;
use hearth_core::ModelRef;
use hearth_llm::Provider;
use hearth_llm::prices::PriceTable;

use crate::error::RuntimeError;

pub use hearth_llm::{Capabilities, ToolSupport};
pub use locality::is_local_url;

/// One configured provider.
pub struct CatalogEntry {
    /// The adapter.
    pub provider: Arc<dyn Provider>,
    /// Its wire protocol.
    pub kind: ProviderType,
    /// Models offered; empty accepts any name.
    pub models: Vec<String>,
    /// Capability overrides from config, for every model.
    pub capabilities: BTreeMap<String, bool>,
    /// Capability overrides from config, per model.
    pub model_capabilities: BTreeMap<String, hearth_config::ModelOverrides>,
    /// Context window of every model of the provider, from config.
    pub context_window: Option<u32>,
    /// True when requests stay on this machine or a private network.
    pub local: bool,
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
    /// Each provider's settings, to build it again with a community's key.
    configs: BTreeMap<String, hearth_config::ProviderConfig>,
    /// The HTTP client providers are built on.
    client: reqwest::Client,
}

impl Catalog {
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

    /// The capabilities of a model: the adapter's row of the matrix, then
    /// the provider's overrides, then the model's. The context window is the
    /// model's override, the provider's, then the built-in catalog's; `None`
    /// when none knows it (the engine then assumes `default_context_tokens`).
    pub fn capabilities(&self, model: &ModelRef) -> Capabilities {
        let Some(entry) = self.providers.get(&model.provider) else {
            return Capabilities::TEXT_ONLY;
        };
        let per_model = entry.model_capabilities.get(&model.model);
        let mut caps = entry
            .provider
            .capabilities()
            .with_overrides(&entry.capabilities)
            .with_overrides(per_model.into_iter().flat_map(|m| &m.flags));
        caps.context_window = per_model
            .and_then(|m| m.context_window)
            .or(entry.context_window)
            .or_else(|| hearth_llm::known_context_window(&model.model));
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
    use super::*;

    fn catalog(toml: &str) -> Catalog {
        let config = hearth_config::load_str(toml, "t", Vec::new()).unwrap();
        Catalog::from_config(
            &config,
            &BTreeMap::new(),
            &BTreeMap::new(),
            reqwest::Client::new(),
        )
        .unwrap()
    }

    fn model(s: &str) -> ModelRef {
        ModelRef::parse(s).unwrap()
    }

    #[test]
    fn validates_models() {
        let c = catalog(
            "[llm]\ndefault_model = \"local/m1\"\n[llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"m1\"]\n",
        );
        assert!(c.resolve("local/m1").is_ok());
        for bad in ["local/m2", "nope/m1", "garbage"] {
            assert!(
                matches!(c.resolve(bad), Err(RuntimeError::UnknownModel(_))),
                "{bad}"
            );
        }
        assert!(c.resolve("echo/echo").is_ok());
        assert!(c.is_local(&model("local/m1")));
        assert!(c.is_local(&model("echo/echo")));
    }

    #[test]
    fn capabilities_are_the_matrix_row_then_provider_then_model_overrides() {
        let c = catalog(
            "[llm]\ndefault_model = \"local/a\"\n\
             [llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             models = [\"a\", \"b\"]\ncapabilities = { thinking = false }\n\
             model_capabilities.b = { tools = true }\n",
        );
        let a = c.capabilities(&model("local/a"));
        assert_eq!(a.tools, ToolSupport::ModelDependent);
        assert!(!a.thinking, "the provider's override");
        let b = c.capabilities(&model("local/b"));
        assert_eq!(b.tools, ToolSupport::Yes, "the model's override");
        assert!(!b.thinking);
        assert_eq!(c.capabilities(&model("echo/echo")), Capabilities::TEXT_ONLY);
        assert_eq!(a.context_window, None, "not known, not configured");
        assert_eq!(
            c.capabilities(&model("nope/x")),
            Capabilities::TEXT_ONLY,
            "an unknown provider can do nothing special"
        );
    }

    #[test]
    fn context_windows_are_model_then_provider_then_catalog() {
        let c = catalog(
            "[llm]\ndefault_model = \"local/a\"\n\
             [llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             context_window = 8000\nmodel_capabilities.b = { context_window = 6000 }\n\
             [llm.providers.or]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n",
        );
        assert_eq!(c.capabilities(&model("local/a")).context_window, Some(8000));
        assert_eq!(c.capabilities(&model("local/b")).context_window, Some(6000));
        assert_eq!(
            c.capabilities(&model("or/anthropic/claude-sonnet-4-5"))
                .context_window,
            Some(200_000)
        );
        assert_eq!(c.capabilities(&model("or/mystery")).context_window, None);
    }

    #[test]
    fn config_and_matrix_know_the_same_capability_keys() {
        assert_eq!(hearth_config::CAPABILITY_KEYS, hearth_llm::CAPABILITY_KEYS);
    }
}
