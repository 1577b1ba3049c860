//! `[tools]`: which tools runs may use, confirmation exemptions, channel
//! profiles and the web search backend.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::validate_secret_name;

/// `[tools]`: what the model may call, and what it must ask first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Write-class tools wait for the user's confirmation before they run.
    pub confirm_writes: bool,
    /// Write-class tools that run without confirmation, by exact name.
    pub no_confirm: Vec<String>,
    /// `[tools.profiles.<channel>]`: the tools a channel (`api`, `telegram`,
    /// ...) offers; a channel without a profile offers every tool, except
    /// `sms`, whose default profile is [`ToolProfileConfig::sms`] (a
    /// `[tools.profiles.sms]` replaces it).
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

/// What the `sms` profile withholds by default: browsing (its pages do
/// not fit a text message), long-form reading and heavy tools (whole
/// directory trees, many files at once, browser automation).
pub const SMS_EXCLUDE: &[&str] = &[
    "web_fetch",
    "web_search",
    "browser_*",
    "*__browser_*",
    "*__navigate*",
    "*__screenshot*",
    "skill_file",
    "*__read_multiple_files",
    "*__directory_tree",
];

impl ToolProfileConfig {
    /// The `sms` channel's default profile: every tool but [`SMS_EXCLUDE`].
    pub fn sms() -> Self {
        Self {
            include: vec!["*".into()],
            exclude: SMS_EXCLUDE.iter().map(|g| (*g).to_owned()).collect(),
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
    use crate::Config;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    fn error(toml: &str) -> String {
        load(toml).unwrap_err().to_string()
    }

    #[test]
    fn the_sms_profiles_default_exclusions_are_valid_globs() {
        for g in SMS_EXCLUDE {
            assert!(validate_tool_glob(g).is_ok(), "{g}");
        }
        assert!(
            ToolProfileConfig::sms()
                .exclude
                .contains(&"web_fetch".to_owned())
        );
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
