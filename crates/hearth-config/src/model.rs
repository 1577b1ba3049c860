//! The configuration's shape, with defaults.

use serde::{Deserialize, Serialize};

use crate::{
    AgentConfig, LlmConfig, LogConfig, PermissionsConfig, ServerConfig, StoreConfig, ToolsConfig,
};

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
    /// `[memory]`
    pub memory: crate::memory::MemoryConfig,
    /// `[apps]`
    pub apps: crate::apps::AppsConfig,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate_secret_name;

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
