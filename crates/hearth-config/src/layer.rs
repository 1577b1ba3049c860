//! Loading: file, then environment overrides, then one strict deserialisation.

use std::path::Path;

use toml::{Table, Value};

use crate::{Config, ConfigError};

/// The prefix of override variables: `HEARTH_<SECTION>__<KEY>`.
const ENV_PREFIX: &str = "HEARTH_";

/// Loads `path` (a missing file means all defaults) and applies the overrides
/// found in `env` (pass `std::env::vars()` at the binary's edge).
pub fn load(
    path: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    load_str(&text, &path.display().to_string(), env)
}

/// Like `load`, from text; `origin` names it in errors.
pub fn load_str(
    text: &str,
    origin: &str,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let mut table: Table = text
        .parse()
        .map_err(|e: toml::de::Error| ConfigError::Syntax {
            path: origin.to_owned(),
            message: syntax_message(text, &e),
        })?;
    // Check the file alone first, so an error in it is reported against the file.
    deserialize(table.clone(), origin)?;
    let mut overrides: Vec<(String, String)> = env
        .into_iter()
        .filter(|(k, _)| k.starts_with(ENV_PREFIX) && k.contains("__"))
        .collect();
    overrides.sort();
    for (var, raw) in &overrides {
        let path: Vec<String> = var[ENV_PREFIX.len()..]
            .split("__")
            .map(str::to_ascii_lowercase)
            .collect();
        if path.iter().any(String::is_empty) {
            return Err(invalid(var, &path.join("."), "empty key segment"));
        }
        set_path(&mut table, &path, parse_env_value(raw))
            .map_err(|m| invalid(var, &path.join("."), &m))?;
        deserialize(table.clone(), &format!("environment variable {var}"))?;
    }
    let config = deserialize(table, origin)?;
    // Checks that span keys run on the final config: a reference in the file
    // may be satisfied by an override, so the error names both sources.
    crate::check::semantic(&config).map_err(|p| {
        let origin = if overrides.is_empty() {
            origin.to_owned()
        } else {
            let vars: Vec<&str> = overrides.iter().map(|(v, _)| v.as_str()).collect();
            format!("{origin} (with {})", vars.join(", "))
        };
        invalid(&origin, &p.key, &p.message)
    })?;
    Ok(config)
}

/// The parser's message, which quotes the offending line, unless that line
/// sets `api_key_env`: a key pasted there without quotes is a syntax error,
/// and quoting the line would print the key.
fn syntax_message(text: &str, e: &toml::de::Error) -> String {
    let at = e.span().map_or(0, |s| s.start).min(text.len());
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or_default();
    if line.trim_start().starts_with("api_key_env") {
        let number = text[..line_start].matches('\n').count() + 1;
        return format!(
            "line {number}: {}",
            crate::check::ENV_VAR_HINT.replace("a variable name", "a quoted variable name")
        );
    }
    e.to_string().trim().to_owned()
}

fn invalid(origin: &str, key: &str, message: &str) -> ConfigError {
    ConfigError::Invalid {
        origin: origin.to_owned(),
        key: key.to_owned(),
        message: message.to_owned(),
    }
}

fn deserialize(table: Table, origin: &str) -> Result<Config, ConfigError> {
    serde_path_to_error::deserialize(Value::Table(table)).map_err(|e| {
        let key = e.path().to_string();
        let inner = e.into_inner();
        ConfigError::Invalid {
            origin: origin.to_owned(),
            key,
            message: crate::check::plain_words(inner.message()),
        }
    })
}

/// An override value is TOML when it parses as a TOML value (numbers, booleans,
/// arrays, quoted strings), and a plain string otherwise.
fn parse_env_value(raw: &str) -> Value {
    let probe = format!("v = {raw}");
    match probe.parse::<Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| Value::String(raw.to_owned())),
        Err(_) => Value::String(raw.to_owned()),
    }
}

fn set_path(table: &mut Table, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parents)) = path.split_last() else {
        return Err("empty key".into());
    };
    let mut cur = table;
    for p in parents {
        let entry = cur
            .entry(p.clone())
            .or_insert_with(|| Value::Table(Table::new()));
        cur = match entry {
            Value::Table(t) => t,
            _ => return Err(format!("`{p}` is not a table")),
        };
    }
    cur.insert(last.clone(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Durability, ProviderType};

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = load_str("", "t.toml", env(&[])).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.server.bind, "127.0.0.1:7777");
    }

    #[test]
    fn parses_providers() {
        let c = load_str(
            r#"
            [llm]
            default_model = "local/llama3.2"
            [llm.providers.local]
            type = "openai_compat"
            base_url = "http://127.0.0.1:11434/v1"
            headers = { "X-Title" = "hearth" }
            models = ["llama3.2"]
            "#,
            "t.toml",
            env(&[]),
        )
        .unwrap();
        let p = &c.llm.providers["local"];
        assert_eq!(p.kind, ProviderType::OpenaiCompat);
        assert_eq!(p.headers["X-Title"], "hearth");
        assert_eq!(c.llm.default_model.as_deref(), Some("local/llama3.2"));
    }

    #[test]
    fn unknown_key_names_file_and_key() {
        let err = load_str("[server]\nbnd = \"x\"\n", "/h/hearth.toml", env(&[])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("/h/hearth.toml"), "{msg}");
        assert!(msg.contains("server"), "{msg}");
        assert!(msg.contains("bnd"), "{msg}");
    }

    #[test]
    fn wrong_type_names_key() {
        let err = load_str("[agent]\nmax_steps = \"many\"\n", "f.toml", env(&[])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("agent.max_steps"), "{msg}");
    }

    #[test]
    fn syntax_error_names_file() {
        let err = load_str("[server\n", "f.toml", env(&[])).unwrap_err();
        assert!(matches!(err, ConfigError::Syntax { .. }));
        assert!(err.to_string().contains("f.toml"));
    }

    #[test]
    fn env_overrides_apply_and_are_typed() {
        let c = load_str(
            "",
            "f.toml",
            env(&[
                ("HEARTH_SERVER__BIND", "127.0.0.1:9999"),
                ("HEARTH_AGENT__MAX_STEPS", "3"),
                ("HEARTH_STORE__DURABILITY", "strict"),
                ("HEARTH_HOME", "/ignored"),
                ("PATH", "/bin"),
            ]),
        )
        .unwrap();
        assert_eq!(c.server.bind, "127.0.0.1:9999");
        assert_eq!(c.agent.max_steps, 3);
        assert_eq!(c.store.durability, Durability::Strict);
    }

    #[test]
    fn bad_env_override_names_variable() {
        let err = load_str("", "f.toml", env(&[("HEARTH_SERVER__NOPE", "1")])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("HEARTH_SERVER__NOPE"), "{msg}");
    }
}
