//! The configuration as JSON for `GET /v1/config` and as the material a
//! reload compares, with every secret left out.
//!
//! hearth.toml names secrets, it does not hold them: a key is read from the
//! variable `*_env` names (or a sealed secret `*_secret` names). The view
//! keeps the names and adds, beside each `<x>_env`, `<x>`: `"<set>"` or
//! `"<unset>"` by the variable's state, never its value. Values the file may
//! hold literally and that often are credentials (a provider's extra
//! `headers`, an MCP server's `env`, a skill's `config`) show as `"<set>"`,
//! and an alert webhook shows its scheme and host only.

use std::collections::BTreeMap;

use hearth_config::{AlertTarget, Config};
use serde_json::{Map, Value, json};

/// Shown for a secret that is present.
pub const SET: &str = "<set>";
/// Shown for a secret that is missing or empty.
pub const UNSET: &str = "<unset>";

/// The keys whose values are literal and may be credentials.
const LITERAL_SECRET_MAPS: [&str; 3] = ["headers", "env", "config"];

/// The variables the runtime reads a provider key from when no provider
/// is configured (see the catalog's detection).
const DETECTED_KEY_VARS: [&str; 3] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY"];

fn state(env: &BTreeMap<String, String>, var: &str) -> &'static str {
    if env.get(var).is_some_and(|v| !v.trim().is_empty()) {
        SET
    } else {
        UNSET
    }
}

/// `config` as JSON with secrets replaced (see the module documentation):
/// one member per section, plus `secret_key` (`HEARTH_SECRET_KEY`'s state).
pub fn redacted(config: &Config, env: &BTreeMap<String, String>) -> Value {
    let mut value = serde_json::to_value(config).unwrap_or(Value::Null);
    redact(&mut value, env);
    if let Some(rules) = value
        .pointer_mut("/alerts/rules")
        .and_then(Value::as_array_mut)
    {
        for rule in rules {
            if let Some(to) = rule.get_mut("to")
                && let Some(text) = to.as_str()
                && let Ok(AlertTarget::Webhook(url)) = AlertTarget::parse(text)
            {
                *to = json!(format!("webhook:{}", url.origin()));
            }
        }
    }
    if let Value::Object(map) = &mut value {
        map.insert(
            "secret_key".into(),
            json!(state(env, crate::builder::KEY_VAR)),
        );
    }
    value
}

fn redact(value: &mut Value, env: &BTreeMap<String, String>) {
    match value {
        Value::Object(map) => {
            let mut states = Map::new();
            for (key, v) in map.iter_mut() {
                if LITERAL_SECRET_MAPS.contains(&key.as_str())
                    && let Value::Object(inner) = v
                {
                    for item in inner.values_mut() {
                        *item = json!(SET);
                    }
                    continue;
                }
                if let Some(base) = key.strip_suffix("_env") {
                    match v {
                        Value::String(var) => {
                            states.insert(base.to_owned(), json!(state(env, var)));
                        }
                        // `headers_env`: header -> variable.
                        Value::Object(vars) => {
                            let shown = vars
                                .iter()
                                .map(|(h, var)| {
                                    (h.clone(), json!(state(env, var.as_str().unwrap_or(""))))
                                })
                                .collect();
                            states.insert(base.to_owned(), Value::Object(shown));
                        }
                        _ => {}
                    }
                    continue;
                }
                redact(v, env);
            }
            for (k, v) in states {
                map.entry(k).or_insert(v);
            }
        }
        Value::Array(items) => {
            for item in items {
                redact(item, env);
            }
        }
        _ => {}
    }
}

/// What a reload compares of one section: its settings, and the values of
/// the variables and sealed secrets they read (variables kept in memory
/// only, secrets as hashes; never shown), so a key or token changed counts
/// as a change of its section.
pub(crate) fn fingerprint(
    section: &Value,
    env: &BTreeMap<String, String>,
    secrets: &BTreeMap<String, String>,
) -> (Value, Vec<Option<String>>) {
    let mut vars = Vec::new();
    let mut sealed = Vec::new();
    collect_vars(section, &mut vars, &mut sealed);
    let values = vars
        .iter()
        .map(|v| env.get(v).cloned())
        .chain(sealed.iter().map(|s| secrets.get(s).cloned()))
        .collect();
    (section.clone(), values)
}

/// Every variable a section reads (`*_env` names, `headers_env` values,
/// `env_pass` entries) and every sealed secret it names (`*_secret`).
fn collect_vars(value: &Value, out: &mut Vec<String>, sealed: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key.ends_with("_env") || key == "env_pass" {
                    match v {
                        Value::String(var) => out.push(var.clone()),
                        Value::Object(vars) => {
                            out.extend(vars.values().filter_map(Value::as_str).map(str::to_owned))
                        }
                        Value::Array(vars) => {
                            out.extend(vars.iter().filter_map(Value::as_str).map(str::to_owned));
                        }
                        _ => {}
                    }
                } else if key.ends_with("_secret")
                    && let Value::String(name) = v
                {
                    sealed.push(name.clone());
                } else {
                    collect_vars(v, out, sealed);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect_vars(i, out, sealed)),
        _ => {}
    }
}

/// The sealed secrets opened, as hashes (a reload compares them, so a
/// secret set again with `hearth secrets set` counts as a change).
pub(crate) fn secret_hashes(
    opened: &BTreeMap<String, hearth_store::secrets::SecretString>,
) -> BTreeMap<String, String> {
    opened
        .iter()
        .map(|(name, s)| (name.clone(), hearth_agent::confirm::hash_token(s.expose())))
        .collect()
}

/// The variables the catalog detects providers from, read only when no
/// provider is configured.
pub(crate) fn detected_key_vars() -> &'static [&'static str] {
    &DETECTED_KEY_VARS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_show_as_set_or_unset_and_never_their_value() {
        let config = hearth_config::load_str(
            r#"
[llm.providers.cloud]
type = "openai_compat"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "CLOUD_KEY"
headers = { "X-Token" = "literal-header-secret" }
models = ["m"]

[llm.providers.other]
type = "openai_compat"
base_url = "http://127.0.0.1:1/v1"
api_key_env = "OTHER_KEY"
models = ["m"]

[mcp.servers.files]
command = "x"
env = { "TOKEN" = "literal-mcp-secret" }

[alerts]
webhook_secret_env = "ALERT_KEY"

[[alerts.rules]]
on = "run.failed"
to = "webhook:https://user:pw@hooks.example/abc?token=q"
"#,
            "t.toml",
            Vec::new(),
        )
        .unwrap();
        let env = BTreeMap::from([
            ("CLOUD_KEY".to_owned(), "sk-live-value".to_owned()),
            ("HEARTH_SECRET_KEY".to_owned(), "sealing-value".to_owned()),
        ]);
        let v = redacted(&config, &env);
        let text = v.to_string();
        for secret in [
            "sk-live-value",
            "sealing-value",
            "literal-header-secret",
            "literal-mcp-secret",
            "pw@",
            "token=q",
        ] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        let cloud = &v["llm"]["providers"]["cloud"];
        assert_eq!(cloud["api_key_env"], "CLOUD_KEY");
        assert_eq!(cloud["api_key"], SET);
        assert_eq!(v["llm"]["providers"]["other"]["api_key"], UNSET);
        assert_eq!(cloud["headers"]["X-Token"], SET);
        assert_eq!(v["mcp"]["servers"]["files"]["env"]["TOKEN"], SET);
        assert_eq!(v["secret_key"], SET);
        assert_eq!(v["alerts"]["webhook_secret"], UNSET);
        assert_eq!(
            v["alerts"]["rules"][0]["to"],
            "webhook:https://hooks.example"
        );
    }

    #[test]
    fn a_changed_key_value_changes_the_fingerprint_not_the_view() {
        let section = json!({"providers": {"a": {"api_key_env": "K"}}});
        let one = BTreeMap::from([("K".to_owned(), "1".to_owned())]);
        let two = BTreeMap::from([("K".to_owned(), "2".to_owned())]);
        let none = BTreeMap::new();
        assert_ne!(
            fingerprint(&section, &one, &none),
            fingerprint(&section, &two, &none)
        );
        assert_eq!(
            fingerprint(&section, &one, &none),
            fingerprint(&section, &one, &none)
        );
        let sealed = json!({"providers": {"a": {"api_key_secret": "a.key"}}});
        let h1 = BTreeMap::from([("a.key".to_owned(), "h1".to_owned())]);
        let h2 = BTreeMap::from([("a.key".to_owned(), "h2".to_owned())]);
        assert_ne!(
            fingerprint(&sealed, &none, &h1),
            fingerprint(&sealed, &none, &h2)
        );
    }
}
