//! Each configured provider answers with its key, and has each model the
//! config names on it (its `models`, and the default, fallback and router
//! models that name it). The model lists are the providers' own:
//! OpenAI-compatible `GET /models`, Ollama's `/api/tags` through its
//! OpenAI-compatible `/v1/models`, Anthropic's `/v1/models`, Gemini's
//! `/models`. `serve` starts whatever they answer, so problems here are
//! warnings.

use std::collections::BTreeMap;

use hearth_config::{Config, ProviderConfig, ProviderType};
use hearth_store::secrets::SecretString;
use serde_json::Value;

use super::{Report, Status, TIMEOUT};

/// Ollama's port: a base URL on it gets `ollama pull` as the fix for a
/// missing model.
pub const OLLAMA_PORT: u16 = 11434;

/// Checks every provider of `config`.
pub async fn check(
    report: &mut Report,
    config: &Config,
    env: &BTreeMap<String, String>,
    sealed: &BTreeMap<String, SecretString>,
    client: &reqwest::Client,
) {
    if config.llm.providers.is_empty() {
        report.ok(
            "providers",
            "none configured: hearth uses the keys it finds in the environment, or the echo provider",
        );
    }
    for (name, pc) in &config.llm.providers {
        let key = match (&pc.api_key_env, &pc.api_key_secret) {
            (Some(var), _) => match env.get(var).filter(|k| !k.trim().is_empty()) {
                Some(k) => Some(k.trim().to_owned()),
                // Reported by the env check, as serve refuses it.
                None => continue,
            },
            (None, Some(secret)) => match sealed.get(secret) {
                Some(s) => Some(s.expose().to_owned()),
                // Reported by the secrets check.
                None => continue,
            },
            (None, None) => None,
        };
        let label = format!("provider {name}");
        let listed = match list_models(client, name, pc, key.as_deref()).await {
            Ok(Listed::Models(base, models)) => {
                report.ok(
                    label,
                    format!("{base} answered; key accepted; {} model(s)", models.len()),
                );
                Some(models)
            }
            Ok(Listed::NoList(base)) => {
                report.ok(label, format!("{base} answered (it has no model list)"));
                None
            }
            Ok(Listed::Builtin) => {
                report.ok(label, "built in, nothing to reach");
                None
            }
            Err(e) => {
                report.bad(label, Status::Warn, e.message, e.fix);
                None
            }
        };
        let Some(listed) = listed else { continue };
        for model in configured_models(config, name, pc) {
            let label = format!("model {name}/{model}");
            if has_model(&listed, &model) {
                report.ok(label, format!("{name} offers it"));
            } else {
                report.bad(
                    label,
                    Status::Warn,
                    format!("provider {name} does not offer model {model:?}"),
                    Some(missing_model_fix(name, pc, &model, &listed)),
                );
            }
        }
    }
}

/// The models the config names on provider `name`, in order, once each.
fn configured_models(config: &Config, name: &str, pc: &ProviderConfig) -> Vec<String> {
    let mut out: Vec<String> = pc.models.clone();
    let refs = config
        .llm
        .default_model
        .iter()
        .chain(config.llm.fallback.iter())
        .chain(config.router.arms.iter().map(|a| &a.model));
    for r in refs {
        if let Some((p, m)) = r.split_once('/')
            && p == name
            && !out.iter().any(|x| x == m)
        {
            out.push(m.to_owned());
        }
    }
    out
}

/// True when `model` is in the list: exactly, as Ollama's `<name>:latest`,
/// or as Gemini's `models/<name>`.
fn has_model(listed: &[String], model: &str) -> bool {
    listed.iter().any(|l| {
        let l = l.strip_prefix("models/").unwrap_or(l);
        l == model || l.strip_suffix(":latest") == Some(model)
    })
}

/// What to do about a model the provider does not offer.
fn missing_model_fix(name: &str, pc: &ProviderConfig, model: &str, listed: &[String]) -> String {
    if is_ollama(name, pc) {
        return format!("ollama pull {model}");
    }
    let mut some: Vec<&str> = listed.iter().map(String::as_str).take(8).collect();
    if listed.len() > some.len() {
        some.push("...");
    }
    format!(
        "use a model it offers ({}), or check the name's spelling",
        some.join(", ")
    )
}

/// A provider that is an Ollama: named so (as `hearth init` names it), or
/// on Ollama's port or host name.
pub fn is_ollama(name: &str, pc: &ProviderConfig) -> bool {
    let url = pc
        .base_url
        .as_deref()
        .and_then(|u| reqwest::Url::parse(u).ok());
    name == "ollama"
        || url.as_ref().and_then(reqwest::Url::port) == Some(OLLAMA_PORT)
        || url
            .as_ref()
            .and_then(|u| u.host_str())
            .is_some_and(|h| h.contains("ollama"))
}

/// What a provider's model list call found.
pub enum Listed {
    /// The base URL and the model ids.
    Models(String, Vec<String>),
    /// It answered but has no list (some OpenAI-compatible servers).
    NoList(String),
    /// The echo provider.
    Builtin,
}

/// Why a provider could not be listed, and what to do.
pub struct ListError {
    /// What was found.
    pub message: String,
    /// What to do.
    pub fix: Option<String>,
}

/// The base URL `pc` is called on.
pub fn base_url(pc: &ProviderConfig) -> String {
    let base = pc.base_url.clone().unwrap_or_else(|| match pc.kind {
        ProviderType::Anthropic => {
            hearth_llm::anthropic::AnthropicConfig::DEFAULT_BASE_URL.to_owned()
        }
        ProviderType::Openai => hearth_llm::openai::OpenAiConfig::DEFAULT_BASE_URL.to_owned(),
        ProviderType::Gemini => hearth_llm::gemini::DEFAULT_BASE_URL.to_owned(),
        _ => String::new(),
    });
    base.trim_end_matches('/').to_owned()
}

/// Lists the provider's models with its key (and its configured headers).
pub async fn list_models(
    client: &reqwest::Client,
    name: &str,
    pc: &ProviderConfig,
    key: Option<&str>,
) -> Result<Listed, ListError> {
    let base = base_url(pc);
    let mut rb = match pc.kind {
        ProviderType::Echo => return Ok(Listed::Builtin),
        ProviderType::Anthropic => client
            .get(format!("{base}/v1/models?limit=1000"))
            .header("x-api-key", key.unwrap_or_default())
            .header("anthropic-version", "2023-06-01"),
        ProviderType::Gemini => client
            .get(format!("{base}/models?pageSize=1000"))
            .header("x-goog-api-key", key.unwrap_or_default()),
        ProviderType::Openai | ProviderType::OpenaiCompat => {
            let rb = client.get(format!("{base}/models"));
            match key {
                Some(k) => rb.bearer_auth(k),
                None => rb,
            }
        }
    };
    for (h, v) in &pc.headers {
        rb = rb.header(h.as_str(), v.as_str());
    }
    let resp = rb.timeout(TIMEOUT).send().await.map_err(|e| ListError {
        message: format!("cannot reach {base}: {}", e.without_url()),
        fix: Some(if is_ollama(name, pc) {
            "start Ollama (`ollama serve`), or fix base_url".into()
        } else {
            "check base_url and the network".into()
        }),
    })?;
    let status = resp.status().as_u16();
    match status {
        200..=299 => {}
        401 | 403 => {
            let source = pc
                .api_key_env
                .clone()
                .or_else(|| pc.api_key_secret.clone().map(|s| format!("the secret {s}")))
                .unwrap_or_else(|| "api_key_env (none is set)".into());
            return Err(ListError {
                message: format!("{base} refused the key (HTTP {status})"),
                fix: Some(format!("set a valid key in {source}")),
            });
        }
        // Some OpenAI-compatible servers have no model list; reachable is
        // what can be known.
        404 if pc.kind == ProviderType::OpenaiCompat => return Ok(Listed::NoList(base)),
        s => {
            return Err(ListError {
                message: format!("{base} answered HTTP {s} to its model list"),
                fix: Some("is base_url right?".into()),
            });
        }
    }
    let v: Value = resp.json().await.map_err(|e| ListError {
        message: format!(
            "{base} answered its model list with something else than JSON: {}",
            e.without_url()
        ),
        fix: Some("is base_url right?".into()),
    })?;
    Ok(Listed::Models(base, model_ids(&v)))
}

/// The ids of an OpenAI/Anthropic (`data[].id`), Gemini (`models[].name`)
/// or Ollama (`models[].name`) list.
pub fn model_ids(v: &Value) -> Vec<String> {
    let from = |items: &Value, field: &str| -> Vec<String> {
        items
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|m| m[field].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut ids = from(&v["data"], "id");
    ids.extend(from(&v["models"], "name"));
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_of_each_kind_are_read() {
        let openai = serde_json::json!({"data": [{"id": "gpt-4.1"}, {"id": "o3"}]});
        assert_eq!(model_ids(&openai), ["gpt-4.1", "o3"]);
        let ollama = serde_json::json!({"models": [{"name": "llama3.2:latest"}]});
        assert!(has_model(&model_ids(&ollama), "llama3.2"));
        assert!(!has_model(&model_ids(&ollama), "qwen3"));
        let gemini = serde_json::json!({"models": [{"name": "models/gemini-2.5-flash"}]});
        assert!(has_model(&model_ids(&gemini), "gemini-2.5-flash"));
    }

    #[test]
    fn a_missing_ollama_model_says_ollama_pull() {
        let c = hearth_config::load_str(
            "[llm.providers.local]\ntype = \"openai_compat\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n",
            "/h/hearth.toml",
            Vec::new(),
        )
        .unwrap();
        let pc = &c.llm.providers["local"];
        assert_eq!(
            missing_model_fix("local", pc, "llama3.2", &["qwen3:latest".into()]),
            "ollama pull llama3.2"
        );
    }
}
