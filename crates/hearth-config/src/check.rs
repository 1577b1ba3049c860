//! Checks that span keys (a model reference names a configured provider, ...)
//! and the wording of type errors, so every config mistake is reported by the
//! loader against the file it is in, in words a person can act on.

use crate::{Config, ProviderType};

/// Capability keys a provider's `capabilities` and `model_capabilities` may set.
pub const CAPABILITY_KEYS: [&str; 6] = [
    "tools",
    "parallel_tool_calls",
    "streaming",
    "usage_metrics",
    "json_mode",
    "thinking",
];

/// The provider that always exists, whatever is configured.
const ECHO: &str = "echo";

/// A semantic mistake: the dotted key and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `llm.default_model`.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

fn problem(key: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        key: key.into(),
        message: message.into(),
    }
}

/// The first mistake that spans keys, if any.
pub fn semantic(config: &Config) -> Result<(), Problem> {
    // Zero would mean no client is ever served.
    if config.server.header_read_timeout_ms == 0 {
        return Err(problem(
            "server.header_read_timeout_ms",
            "must be at least 1 (milliseconds a client gets to send a request head; default 10000)",
        ));
    }
    if config.server.max_connections == 0 {
        return Err(problem(
            "server.max_connections",
            "must be at least 1 (connections served at once; default 1024)",
        ));
    }
    if config.server.max_queued_runs == 0 {
        return Err(problem(
            "server.max_queued_runs",
            "must be at least 1 (runs queued or running at once; default 10000)",
        ));
    }
    store(&config.store)?;
    let fraction = config.agent.context_fraction;
    if !(fraction > 0.0 && fraction <= 1.0) {
        return Err(problem(
            "agent.context_fraction",
            format!(
                "{fraction} is not a share of the context window; use a number above 0 and at \
                 most 1 (default 0.75)"
            ),
        ));
    }
    agent_limits(&config.agent)?;
    if config.agent.default_context_tokens < 1024 {
        return Err(problem(
            "agent.default_context_tokens",
            "must be at least 1024 (tokens assumed for a model whose context window is not \
             known; default 32000)",
        ));
    }
    for host in &config.server.allowed_hosts {
        if host.is_empty() || host.contains(['/', '@', ' ']) {
            return Err(problem(
                "server.allowed_hosts",
                format!("{host:?} is not a host name or host:port (e.g. \"hearth.example.org\")"),
            ));
        }
    }
    if !(1..=8760).contains(&config.server.ui_session_hours) {
        return Err(problem(
            "server.ui_session_hours",
            format!(
                "{} is out of range; give 1 to 8760 hours (default 12)",
                config.server.ui_session_hours
            ),
        ));
    }
    let providers = &config.llm.providers;
    for (name, pc) in providers {
        let key = format!("llm.providers.{name}");
        if pc.kind == ProviderType::OpenaiCompat && pc.base_url.is_none() {
            return Err(problem(
                key,
                "type \"openai_compat\" needs `base_url`, the server's address \
                 (e.g. \"http://127.0.0.1:11434/v1\" for Ollama)",
            ));
        }
        if let Some(url) = &pc.base_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(problem(
                format!("{key}.base_url"),
                format!("{url:?} is not an http:// or https:// URL"),
            ));
        }
        let caps = pc
            .capabilities
            .keys()
            .chain(pc.model_capabilities.values().flat_map(|m| m.flags.keys()));
        for cap in caps {
            if !CAPABILITY_KEYS.contains(&cap.as_str()) {
                return Err(problem(
                    key,
                    format!(
                        "unknown capability {cap:?}; known: {}",
                        CAPABILITY_KEYS.join(", ")
                    ),
                ));
            }
        }
    }
    if let Some(m) = &config.llm.default_model {
        model_ref(config, "llm.default_model", m)?;
    }
    for (i, m) in config.llm.fallback.iter().enumerate() {
        model_ref(config, &format!("llm.fallback[{i}]"), m)?;
    }
    if let Some(m) = &config.memory.embeddings {
        embeddings_ref(config, m)?;
    }
    if config.memory.vector_cache_mb > MAX_VECTOR_CACHE_MB {
        return Err(problem(
            "memory.vector_cache_mb",
            format!(
                "{} is more than {MAX_VECTOR_CACHE_MB} MB; use 0 (keep none) to \
                 {MAX_VECTOR_CACHE_MB} megabytes (default {})",
                config.memory.vector_cache_mb,
                crate::memory::DEFAULT_VECTOR_CACHE_MB
            ),
        ));
    }
    if let Some(name) = config.budget.duplicate_name() {
        return Err(problem(
            "budget.pools",
            format!(
                "pool name {name:?} is used twice; each pool (shortcuts included) needs its own name"
            ),
        ));
    }
    if config.agent.max_output_tokens == 0 {
        return Err(problem(
            "agent.max_output_tokens",
            "must be at least 1 (most tokens of one model answer; default 4096)",
        ));
    }
    crate::channels::validate(&config.channels).map_err(|(key, message)| problem(key, message))?;
    let ch = &config.channels;
    crate::permissions::validate(
        &config.permissions,
        &[
            ("telegram", ch.telegram.default_mode),
            ("discord", ch.discord.default_mode),
            ("slack", ch.slack.default_mode),
            ("sms", ch.sms.default_mode),
        ],
    )
    .map_err(|(key, message)| problem(key, message))?;
    crate::router::validate(&config.router).map_err(|(key, message)| problem(key, message))?;
    let ch = &config.channels;
    crate::alerts::validate(&config.alerts, |name| match name {
        "telegram" => ch.telegram.enabled,
        "discord" => ch.discord.enabled,
        "slack" => ch.slack.enabled,
        _ => false,
    })
    .map_err(|(key, message)| problem(key, message))?;
    for (i, arm) in config.router.arms.iter().enumerate() {
        model_ref(config, &format!("router.arms[{i}].model"), &arm.model)?;
    }
    Ok(())
}

/// Limits of `[agent]` that would make every run fail (a run needs one step,
/// one model call and some time) or every tool call time out.
fn agent_limits(agent: &crate::AgentConfig) -> Result<(), Problem> {
    let limits = [
        (
            "agent.max_steps",
            u64::from(agent.max_steps),
            "model calls plus tool calls of one run; default 24",
        ),
        (
            "agent.max_llm_calls",
            u64::from(agent.max_llm_calls),
            "model calls of one run; default 12",
        ),
        (
            "agent.max_wall_secs",
            agent.max_wall_secs,
            "seconds one run may take; default 300",
        ),
        (
            "agent.tool_timeout_secs",
            agent.tool_timeout_secs,
            "seconds one tool call may take; default 30",
        ),
        (
            "agent.subagents.max_children",
            u64::from(agent.subagents.max_children),
            "children one run may start; default 8 (max_depth = 0 turns delegation off)",
        ),
        (
            "agent.subagents.max_parallel",
            u64::from(agent.subagents.max_parallel),
            "children of one run unfinished at once; default 4",
        ),
    ];
    for (key, value, what) in limits {
        if value == 0 {
            return Err(problem(
                key,
                format!("must be at least 1: with 0 every run would fail ({what})"),
            ));
        }
    }
    Ok(())
}

/// `<provider>/<model>`, naming a configured provider when any is configured
/// (with none, providers found in the environment are added at start, so
/// only the form can be checked here).
fn model_ref(config: &Config, key: &str, value: &str) -> Result<(), Problem> {
    let Some((provider, model)) = value
        .split_once('/')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
    else {
        return Err(problem(
            key,
            format!("{value:?} is not of the form \"<provider>/<model>\", e.g. \"local/llama3.2\""),
        ));
    };
    let providers = &config.llm.providers;
    if providers.is_empty() || provider == ECHO {
        return Ok(());
    }
    let Some(pc) = providers.get(provider) else {
        let known: Vec<&str> = providers.keys().map(String::as_str).collect();
        return Err(problem(
            key,
            format!(
                "{value:?} names provider {provider:?}, which is not configured; \
                 configured: {}, echo (add a [llm.providers.{provider}] section, or fix the name)",
                known.join(", ")
            ),
        ));
    };
    if !pc.models.is_empty() && !pc.models.iter().any(|m| m == model) {
        return Err(problem(
            key,
            format!(
                "provider {provider} offers no model {model:?}: add it to \
                 llm.providers.{provider}.models (now {})",
                pc.models.join(", ")
            ),
        ));
    }
    Ok(())
}

/// The most `[memory] vector_cache_mb` takes (64 GiB): more is surely a
/// unit mistaken.
const MAX_VECTOR_CACHE_MB: u32 = 65_536;

/// `memory.embeddings`: `<provider>/<model>` naming a provider with an
/// embeddings API hearth speaks (OpenAI's, or Gemini's). The model is not checked against the
/// provider's `models`, which lists chat models. With no provider
/// configured, the ones detected from key variables are meant, whose types
/// are known by name.
fn embeddings_ref(config: &Config, value: &str) -> Result<(), Problem> {
    const KEY: &str = "memory.embeddings";
    let Some((provider, _)) = value
        .split_once('/')
        .filter(|(p, m)| !p.is_empty() && !m.is_empty())
    else {
        return Err(problem(
            KEY,
            format!(
                "{value:?} is not of the form \"<provider>/<model>\", \
                 e.g. \"openai/text-embedding-3-small\""
            ),
        ));
    };
    let providers = &config.llm.providers;
    let kind = if provider == ECHO {
        ProviderType::Echo
    } else if let Some(pc) = providers.get(provider) {
        pc.kind
    } else if providers.is_empty() {
        match provider {
            "openai" => ProviderType::Openai,
            "anthropic" => ProviderType::Anthropic,
            "gemini" => ProviderType::Gemini,
            _ => {
                return Err(problem(
                    KEY,
                    format!(
                        "{value:?} names provider {provider:?}, which is not configured \
                         (add a [llm.providers.{provider}] section of type openai, \
                         openai_compat or gemini)"
                    ),
                ));
            }
        }
    } else {
        let known: Vec<&str> = providers.keys().map(String::as_str).collect();
        return Err(problem(
            KEY,
            format!(
                "{value:?} names provider {provider:?}, which is not configured; \
                 configured: {} (add a [llm.providers.{provider}] section, or fix the name)",
                known.join(", ")
            ),
        ));
    };
    let why = match kind {
        ProviderType::Openai | ProviderType::OpenaiCompat | ProviderType::Gemini => {
            return Ok(());
        }
        ProviderType::Anthropic => {
            "is of type anthropic, and Anthropic offers no embeddings API; name an openai, \
             openai_compat or gemini provider (a local Ollama serves /v1/embeddings)"
        }
        ProviderType::Echo => {
            "is the echo provider, which has no embeddings; name an openai, openai_compat \
             or gemini provider"
        }
    };
    Err(problem(
        KEY,
        format!("{value:?}: provider {provider} {why}"),
    ))
}

/// `[store]`: a URL variable that is a name (a URL pasted there is refused
/// without being echoed: it may hold a password), a pool and a lease that work.
fn store(store: &crate::StoreConfig) -> Result<(), Problem> {
    let name = &store.url_env;
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(problem(
            "store.url_env",
            "is not a variable name: it takes the name of the environment variable that holds \
             the PostgreSQL URL (default \"HEARTH_DATABASE_URL\"), never the URL itself",
        ));
    }
    if store.pool_size == 0 || store.pool_size > 1000 {
        return Err(problem(
            "store.pool_size",
            format!(
                "{} is not a pool size; use 1 to 1000 connections (default 8)",
                store.pool_size
            ),
        ));
    }
    if store.lease_secs < 2 || store.lease_secs > 3600 {
        return Err(problem(
            "store.lease_secs",
            format!(
                "{} is not a lease; use 2 to 3600 seconds (default 15)",
                store.lease_secs
            ),
        ));
    }
    Ok(())
}

/// What to write in `api_key_env` (never quoting the value found there).
pub(crate) const ENV_VAR_HINT: &str = "the value of `api_key_env` is not a variable name: it \
    takes the name of an environment variable (such as api_key_env = \"OPENAI_API_KEY\"), not \
    the key itself; export the key in a variable and put its name here, or store the key with \
    `hearth secrets set <name>` and use `api_key_secret = \"<name>\"`";

/// Checks `api_key_env`: it takes the name of an environment variable. A value
/// that cannot be a variable name, or looks like a key pasted in its place,
/// is refused without repeating it (it may be a real key).
pub fn env_var_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("`api_key_env` is empty; name the variable holding the key".into());
    }
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid || looks_like_a_key(name) {
        return Err(ENV_VAR_HINT.to_owned());
    }
    Ok(())
}

/// A long run of mixed-case letters and digits: how keys look, and how
/// variable names (UPPER_SNAKE_CASE by custom) do not.
fn looks_like_a_key(name: &str) -> bool {
    let has = |f: fn(&char) -> bool| name.chars().any(|c| f(&c));
    name.len() >= 20
        && has(char::is_ascii_lowercase)
        && has(char::is_ascii_uppercase)
        && has(char::is_ascii_digit)
}

/// Rewrites serde's type errors in plain words: "invalid type: string "x",
/// expected u32" becomes "expected a whole number from 0 to 4294967295, found
/// the text "x"". Other messages are returned unchanged.
pub fn plain_words(message: &str) -> String {
    let Some((found, expected)) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    else {
        return message.to_owned();
    };
    format!(
        "expected {}, found {}",
        expected_words(expected),
        found_words(found)
    )
}

fn expected_words(expected: &str) -> String {
    let words = match expected {
        "u8" => "a whole number from 0 to 255",
        "u16" => "a whole number from 0 to 65535",
        "u32" => "a whole number from 0 to 4294967295",
        "u64" | "usize" | "u128" => "a whole number, 0 or more",
        "i8" | "i16" | "i32" | "i64" | "isize" | "i128" => "a whole number",
        "f32" | "f64" => "a number (such as 5 or 0.25)",
        "a boolean" => "true or false",
        "a string" | "a borrowed string" | "string or map" => "text in double quotes",
        "a sequence" => "a list in brackets, such as [\"a\", \"b\"]",
        "a map" => "a table (a [section] or { key = value, ... })",
        other if other.starts_with("struct ") => "a table (a [section] or { key = value, ... })",
        other => return other.to_owned(),
    };
    words.to_owned()
}

fn found_words(found: &str) -> String {
    let unquote = |s: &str| s.trim_matches('`').to_owned();
    if let Some(s) = found.strip_prefix("string ") {
        return format!("the text {s}");
    }
    for prefix in ["integer ", "floating point ", "boolean "] {
        if let Some(v) = found.strip_prefix(prefix) {
            return unquote(v);
        }
    }
    match found {
        "sequence" => "a list".to_owned(),
        "map" => "a table".to_owned(),
        other => other.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "/h/hearth.toml", Vec::new())
    }

    #[test]
    fn memory_vector_cache_defaults_to_64_mb_and_is_bounded() {
        assert_eq!(load("").unwrap().memory.vector_cache_mb, 64);
        let off = load("[memory]\nvector_cache_mb = 0\n").unwrap();
        assert_eq!(off.memory.vector_cache_mb, 0);
        let err = load("[memory]\nvector_cache_mb = 100000\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("memory.vector_cache_mb"), "{err}");
        let err = load("[memory]\nvector_cache_mb = -1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("vector_cache_mb"), "{err}");
    }

    #[test]
    fn memory_embeddings_must_name_a_provider_with_an_embeddings_api() {
        let providers = "[llm.providers.local]\ntype = \"openai_compat\"\n\
                         base_url = \"http://127.0.0.1:1/v1\"\nmodels = [\"chat\"]\n\
                         [llm.providers.claude]\ntype = \"anthropic\"\n\
                         [llm.providers.g]\ntype = \"gemini\"\n";
        let ok = load(&format!(
            "{providers}[memory]\nembeddings = \"local/nomic\"\n"
        ))
        .unwrap();
        assert_eq!(ok.memory.embeddings.as_deref(), Some("local/nomic"));
        for (value, needle) in [
            ("claude/x", "Anthropic offers no embeddings API"),
            ("echo/x", "echo provider"),
            ("nope/x", "not configured"),
            ("local", "<provider>/<model>"),
        ] {
            let err = load(&format!("{providers}[memory]\nembeddings = \"{value}\"\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("memory.embeddings"), "{err}");
            assert!(err.contains(needle), "{value}: {err}");
        }
        let err = load("[memory]\nembeddings = \"anthropic/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("Anthropic offers no embeddings API"), "{err}");
        assert!(load("[memory]\nembeddings = \"openai/text-embedding-3-small\"\n").is_ok());
        assert!(load("[memory]\nembeddings = \"gemini/gemini-embedding-001\"\n").is_ok());
        assert!(load(&format!("{providers}[memory]\nembeddings = \"g/e\"\n")).is_ok());
        assert!(load("[memory]\nembedings = \"openai/x\"\n").is_err());
    }

    #[test]
    fn context_windows_and_compaction_settings_load_and_are_checked() {
        let c = load(
            "[agent]\ncontext_fraction = 0.5\ncompaction = false\n\
             [llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             context_window = 8000\nmodel_capabilities.small = { tools = false, context_window = 6000 }\n",
        )
        .unwrap();
        assert!(!c.agent.compaction);
        assert_eq!(c.agent.default_context_tokens, 32_000);
        let p = &c.llm.providers["local"];
        assert_eq!(p.context_window, Some(8000));
        assert_eq!(p.model_capabilities["small"].context_window, Some(6000));
        assert_eq!(
            p.model_capabilities["small"].flags.get("tools"),
            Some(&false)
        );
        for (toml, key) in [
            ("[agent]\ncontext_fraction = 1.5", "agent.context_fraction"),
            ("[agent]\ncontext_fraction = 0.0", "agent.context_fraction"),
            (
                "[agent]\ndefault_context_tokens = 10",
                "agent.default_context_tokens",
            ),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
        let err = load(
            "[llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:1/v1\"\n\
             model_capabilities.small = { vision = true }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown capability"), "{err}");
    }

    #[test]
    fn limits_that_fail_every_run_are_refused_at_load() {
        for key in [
            "max_steps",
            "max_llm_calls",
            "max_wall_secs",
            "tool_timeout_secs",
        ] {
            let err = load(&format!("[agent]\n{key} = 0\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("agent.{key}")), "{err}");
            assert!(err.contains("must be at least 1"), "{err}");
            assert!(err.contains("/h/hearth.toml"), "{err}");
        }
        // No tools at all is a choice, not a broken config.
        assert!(load("[agent]\nmax_tool_calls = 0\n").is_ok());
    }

    #[test]
    fn the_store_section_is_checked_and_a_pasted_url_is_not_echoed() {
        let c = load("[store]\nbackend = \"postgres\"\n").unwrap();
        assert_eq!(c.store.backend, crate::StoreBackend::Postgres);
        assert_eq!(c.store.url_env, "HEARTH_DATABASE_URL");
        assert_eq!((c.store.pool_size, c.store.lease_secs), (8, 15));
        let pasted = load("[store]\nurl_env = \"postgres://u:hunter2@db/x\"\n")
            .unwrap_err()
            .to_string();
        assert!(pasted.contains("store.url_env"), "{pasted}");
        assert!(!pasted.contains("hunter2"), "{pasted}");
        let lease = load("[store]\nlease_secs = 1\n").unwrap_err().to_string();
        assert!(lease.contains("store.lease_secs"), "{lease}");
        let pool = load("[store]\npool_size = 0\n").unwrap_err().to_string();
        assert!(pool.contains("store.pool_size"), "{pool}");
        let backend = load("[store]\nbackend = \"mysql\"\n")
            .unwrap_err()
            .to_string();
        assert!(backend.contains("store.backend"), "{backend}");
        let hours = load("[server]\nui_session_hours = 0\n")
            .unwrap_err()
            .to_string();
        assert!(hours.contains("server.ui_session_hours"), "{hours}");
    }

    #[test]
    fn type_errors_use_plain_words() {
        for (toml, says) in [
            (
                "[agent]\nmax_steps = \"many\"",
                "expected a whole number from 0 to 4294967295, found the text \"many\"",
            ),
            (
                "[server]\nmax_body_bytes = -1",
                "expected a whole number, 0 or more, found -1",
            ),
            (
                "[server]\nmax_body_bytes = 1.5",
                "expected a whole number, 0 or more, found 1.5",
            ),
            ("[llm]\ndaily_spend_alert_usd = \"x\"", "expected a number"),
            (
                "[llm]\nincognito_local_only = 1",
                "expected true or false, found 1",
            ),
            ("[llm]\nfallback = \"a/b\"", "expected a list in brackets"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(says), "{toml}: {err}");
            assert!(err.contains("/h/hearth.toml"), "{err}");
            for jargon in ["u32", "usize", "f64", "sequence", "boolean"] {
                assert!(!err.contains(jargon), "{toml}: {err}");
            }
        }
    }

    #[test]
    fn a_key_pasted_into_api_key_env_is_refused_and_not_echoed() {
        for pasted in [
            "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789",
            "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW",
            "gsk_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6",
            "my key",
        ] {
            let toml = format!("[llm.providers.x]\ntype = \"openai\"\napi_key_env = {pasted:?}\n");
            let err = load(&toml).unwrap_err().to_string();
            assert!(
                err.contains("takes the name of an environment variable"),
                "{err}"
            );
            assert!(err.contains("llm.providers.x"), "{err}");
            assert!(!err.contains(pasted), "the value is echoed: {err}");
        }
        // Pasted without quotes, it is a TOML syntax error, whose usual
        // message quotes the line: that would echo the key too.
        let pasted = "sk-proj-Ab3dEfGh1jKlMnOpQrStUvWxYz0123456789";
        let toml = format!("[llm.providers.x]\ntype = \"openai\"\napi_key_env = {pasted}\n");
        let err = load(&toml).unwrap_err().to_string();
        assert!(err.contains("name of an environment variable"), "{err}");
        assert!(
            err.contains("/h/hearth.toml") && err.contains("line 3"),
            "{err}"
        );
        assert!(!err.contains(pasted) && !err.contains("sk-proj"), "{err}");
        let toml = "[tools.web_search]\nbackend = \"brave\"\napi_key_env = \"BSA-xyz-123\"\n";
        let err = load(toml).unwrap_err().to_string();
        assert!(err.contains("name of an environment variable"), "{err}");
        assert!(!err.contains("BSA-xyz-123"), "{err}");
        for name in ["OPENAI_API_KEY", "_K", "openrouter_key", "MY_LLM_KEY_2"] {
            assert_eq!(env_var_name(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn semantic_errors_name_the_file_and_the_key() {
        let compat = "[llm.providers.local]\ntype = \"openai_compat\"\n";
        let local = "[llm.providers.local]\ntype = \"openai_compat\"\n\
                     base_url = \"http://127.0.0.1:11434/v1\"\nmodels = [\"llama3.2\"]\n";
        for (toml, key, says) in [
            (compat.to_owned(), "llm.providers.local", "needs `base_url`"),
            (
                format!("{compat}base_url = \"127.0.0.1:11434\"\n"),
                "llm.providers.local.base_url",
                "http://",
            ),
            (
                format!("{local}capabilities = {{ tool = false }}\n"),
                "llm.providers.local",
                "unknown capability \"tool\"",
            ),
            (
                format!("[llm]\ndefault_model = \"nope/x\"\n{local}"),
                "llm.default_model",
                "provider \"nope\", which is not configured",
            ),
            (
                format!("[llm]\ndefault_model = \"local/llama9\"\n{local}"),
                "llm.default_model",
                "offers no model \"llama9\"",
            ),
            (
                "[llm]\ndefault_model = \"llama3.2\"\n".to_owned(),
                "llm.default_model",
                "<provider>/<model>",
            ),
            (
                format!("[llm]\nfallback = [\"local/llama3.2\", \"x\"]\n{local}"),
                "llm.fallback[1]",
                "<provider>/<model>",
            ),
        ] {
            let err = load(&toml).unwrap_err().to_string();
            assert!(err.contains("/h/hearth.toml"), "{err}");
            assert!(err.contains(&format!("key `{key}`")), "{key}: {err}");
            assert!(err.contains(says), "{says}: {err}");
        }
        let ok = format!(
            "[llm]\ndefault_model = \"local/llama3.2\"\nfallback = [\"echo/echo\"]\n{local}"
        );
        assert!(load(&ok).is_ok());
        // With no provider configured, ones found in the environment are added
        // at start: only the form is checked.
        assert!(load("[llm]\ndefault_model = \"anthropic/claude-sonnet-4-5\"\n").is_ok());
    }

    #[test]
    fn a_semantic_error_from_an_override_names_the_variable() {
        let local = "[llm.providers.local]\ntype = \"openai_compat\"\n\
                     base_url = \"http://127.0.0.1:11434/v1\"\n";
        let err = crate::load_str(
            local,
            "/h/hearth.toml",
            vec![("HEARTH_LLM__DEFAULT_MODEL".to_owned(), "nope/x".to_owned())],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("HEARTH_LLM__DEFAULT_MODEL"), "{err}");
        assert!(err.contains("/h/hearth.toml"), "{err}");
    }
}
