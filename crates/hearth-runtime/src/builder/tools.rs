//! The tool registry a runtime offers: the built-in tools, memory, the
//! skills' tools, and the tools whose configuration is present (web search).
//! The job tools and the MCP servers' tools join it in the builder.

use std::collections::BTreeMap;
use std::sync::Arc;

use hearth_config::{Config, SearchBackend, WebSearchConfig};
use hearth_store::{SecretStore, Store};
use hearth_tools::web::search;
use hearth_tools::{ToolProfile, ToolProfiles, ToolRegistry};

use super::BuildError;
use super::secrets::sealer_for;

/// Every tool this process offers besides jobs and MCP: the built-ins, plus
/// the tools whose configuration (or store) they need is present.
pub(super) async fn registry(
    config: &Config,
    env: &BTreeMap<String, String>,
    store: &Arc<dyn Store>,
    skills: &Arc<hearth_skills::Skills>,
    memory_index: &Arc<crate::memory::SemanticMemory>,
) -> Result<ToolRegistry, BuildError> {
    let mut registry = ToolRegistry::with_builtins();
    // skill_read and skill_file exist even with no skill yet: a reload may add some.
    for tool in hearth_skills::tools::tools(skills.clone()) {
        registry.register(tool);
    }
    // Memory lives in the store every process has, so its tools are always there.
    let memory: Arc<dyn hearth_store::MemoryStore> = store.clone();
    let index: Arc<dyn hearth_tools::memory::MemoryIndex> = memory_index.clone();
    for tool in hearth_tools::memory::tools_with_index(memory, index) {
        registry.register(tool);
    }
    if let Some(ws) = &config.tools.web_search {
        registry.register(Arc::new(web_search(ws, env, store.as_ref()).await?));
    }
    Ok(registry.with_profiles(profiles(config)))
}

/// `[tools.profiles.*]`, whose globs the config loader already checked,
/// and the `sms` profile's default when none is configured.
pub(crate) fn profiles(config: &Config) -> ToolProfiles {
    let mut profiles = ToolProfiles::new();
    let sms = hearth_config::ToolProfileConfig::sms();
    let configured = config.tools.profiles.iter();
    let default_sms = (!config.tools.profiles.contains_key("sms")).then(|| ("sms".to_owned(), sms));
    for (channel, p) in configured
        .map(|(c, p)| (c.clone(), p.clone()))
        .chain(default_sms)
    {
        profiles.insert(channel, ToolProfile::new(p.include, p.exclude));
    }
    profiles
}

/// The `web_search` tool for `[tools.web_search]`. A Brave key that cannot
/// be found or opened is a configuration error that names where it was
/// looked for, never its value.
async fn web_search(
    ws: &WebSearchConfig,
    env: &BTreeMap<String, String>,
    store: &dyn SecretStore,
) -> Result<search::WebSearch, BuildError> {
    let backend = match ws.backend {
        SearchBackend::Searxng => search::SearchBackend::Searxng {
            base_url: ws.base_url.clone().ok_or_else(|| {
                BuildError::Config(
                    "tools.web_search: backend = \"searxng\" needs base_url".to_owned(),
                )
            })?,
        },
        SearchBackend::Brave => search::SearchBackend::Brave {
            base_url: ws
                .base_url
                .clone()
                .unwrap_or_else(|| search::BRAVE_BASE_URL.to_owned()),
            api_key: brave_key(ws, env, store).await?,
        },
    };
    Ok(search::WebSearch::new(search::WebSearchConfig {
        max_results: ws.max_results as usize,
        timeout: std::time::Duration::from_secs(ws.timeout_secs),
        ..search::WebSearchConfig::new(backend)
    }))
}

/// The Brave key, from `api_key_env` or the sealed `api_key_secret`.
async fn brave_key(
    ws: &WebSearchConfig,
    env: &BTreeMap<String, String>,
    store: &dyn SecretStore,
) -> Result<String, BuildError> {
    let missing = |why: String| BuildError::Config(format!("tools.web_search: {why}"));
    match (&ws.api_key_env, &ws.api_key_secret) {
        (Some(var), None) => env
            .get(var)
            .filter(|k| !k.trim().is_empty())
            .map(|k| k.trim().to_owned())
            .ok_or_else(|| {
                missing(format!(
                    "api_key_env names {var}, which is not set (or empty); export the \
                     Brave Search API key in it"
                ))
            }),
        (None, Some(secret)) => {
            let sealer = sealer_for(env, store).await.map_err(|e| {
                missing(format!(
                    "api_key_secret `{secret}` needs the master key: {e}"
                ))
            })?;
            let sealed = store
                .get_secret(secret)
                .await
                .map_err(BuildError::Store)?
                .ok_or_else(|| {
                    missing(format!(
                        "api_key_secret `{secret}` is not in the store; set it with \
                         `hearth secrets set {secret}`"
                    ))
                })?;
            let key = sealer
                .open(secret, &sealed)
                .map_err(|e| missing(format!("api_key_secret `{secret}`: {e}")))?;
            Ok(key.expose().trim().to_owned())
        }
        _ => Err(missing(
            "backend = \"brave\" needs exactly one of api_key_env and api_key_secret".into(),
        )),
    }
}

#[cfg(test)]
mod sms_profile_tests {
    use super::*;

    #[test]
    fn sms_withholds_browsing_by_default_and_a_configured_profile_replaces_that() {
        let mut config = Config::default();
        let p = profiles(&config);
        assert!(!p.allows("sms", "web_fetch"));
        assert!(!p.allows("sms", "web_search"));
        assert!(p.allows("sms", "memory_save"));
        assert!(
            p.allows("telegram", "web_fetch"),
            "other channels keep every tool"
        );
        config
            .tools
            .profiles
            .insert("sms".into(), hearth_config::ToolProfileConfig::default());
        assert!(profiles(&config).allows("sms", "web_fetch"));
    }
}
