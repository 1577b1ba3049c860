//! `hearth doctor`: checks the config, the home's permissions, the store,
//! each provider (reachable, key accepted: a models call) and each enabled
//! channel's token, one line each with what to do when it fails; exits 1 if
//! anything fails.

use std::collections::BTreeMap;
use std::time::Duration;

use hearth_config::{ProviderConfig, ProviderType};

use crate::Exit;
use crate::cli::Global;

/// How long one provider check may take.
const TIMEOUT: Duration = Duration::from_secs(10);

struct Report {
    failed: usize,
}

impl Report {
    fn line(&mut self, what: &str, r: Result<String, String>) {
        match r {
            Ok(ok) => println!("ok    {what}: {ok}"),
            Err(e) => {
                self.failed += 1;
                println!("FAIL  {what}: {e}");
            }
        }
    }
}

/// Runs every check and prints one line each.
pub async fn run(g: &Global) -> Result<(), Exit> {
    let mut report = Report { failed: 0 };
    let home = crate::serve::home_dir(g)?;
    let config = match crate::serve::load_config(g, &home) {
        Ok(c) => {
            report.line(
                "config",
                Ok(format!("{} is valid", home.join("hearth.toml").display())),
            );
            c
        }
        Err(e) => {
            report.line("config", Err(format!("{:#}", e.error)));
            return Err(anyhow::anyhow!("1 check failed").into());
        }
    };
    report.line("home", home_permissions(&home));
    let store = match crate::serve::open_store(&home, &config) {
        Ok(s) => {
            let r = s.ping().await.map(|()| "opened and migrated".to_owned());
            report.line(
                "store",
                r.map_err(|e| format!("{e}; is the disk full or the file damaged?")),
            );
            Some(s)
        }
        Err(e) => {
            report.line("store", Err(format!("{:#}", e.error)));
            None
        }
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let client = hearth_http::client_builder()
        .connect_timeout(TIMEOUT)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let sealed = match &store {
        Some(store) => {
            match hearth_runtime::builder::open_secrets(&config, &env, store.as_ref()).await {
                Ok(s) => s,
                Err(e) => {
                    report.line("secrets", Err(e.to_string()));
                    BTreeMap::new()
                }
            }
        }
        None => BTreeMap::new(),
    };
    if config.llm.providers.is_empty() {
        report.line(
            "providers",
            Ok("none configured: hearth uses the keys it finds in the environment, or the echo provider".into()),
        );
    }
    for (name, pc) in &config.llm.providers {
        let key = match (&pc.api_key_env, &pc.api_key_secret) {
            (Some(var), _) => env.get(var).cloned(),
            (None, Some(secret)) => sealed.get(secret).map(|s| s.expose().to_owned()),
            (None, None) => None,
        };
        let r = provider(&client, pc, key.as_deref()).await;
        report.line(&format!("provider {name}"), r);
    }
    let sources = hearth_channels::secrets::TokenSources {
        env,
        sealed: sealed
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect(),
    };
    for (name, r) in
        hearth_channels::doctor::check_tokens(&config.channels, &sources, &client).await
    {
        report.line(&format!("channel {name}"), r);
    }
    if report.failed > 0 {
        let n = report.failed;
        return Err(anyhow::anyhow!("{n} check{} failed", if n == 1 { "" } else { "s" }).into());
    }
    Ok(())
}

fn home_permissions(home: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(home).map_err(|e| format!("cannot read {}: {e}", home.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} has mode {mode:o}: other users can read keys and history; run chmod 700 {}",
            home.display(),
            home.display()
        ));
    }
    Ok(format!("{} is private (mode {mode:o})", home.display()))
}

/// Lists the provider's models with its key: reachable and key accepted.
async fn provider(
    client: &reqwest::Client,
    pc: &ProviderConfig,
    key: Option<&str>,
) -> Result<String, String> {
    let base = pc.base_url.clone().unwrap_or_else(|| match pc.kind {
        ProviderType::Anthropic => {
            hearth_llm::anthropic::AnthropicConfig::DEFAULT_BASE_URL.to_owned()
        }
        ProviderType::Openai => hearth_llm::openai::OpenAiConfig::DEFAULT_BASE_URL.to_owned(),
        ProviderType::Gemini => hearth_llm::gemini::DEFAULT_BASE_URL.to_owned(),
        _ => String::new(),
    });
    let base = base.trim_end_matches('/');
    let rb = match pc.kind {
        ProviderType::Echo => return Ok("built in, nothing to reach".into()),
        ProviderType::Anthropic => client
            .get(format!("{base}/v1/models"))
            .header("x-api-key", key.unwrap_or_default())
            .header("anthropic-version", "2023-06-01"),
        ProviderType::Gemini => client
            .get(format!("{base}/models"))
            .header("x-goog-api-key", key.unwrap_or_default()),
        _ => {
            let rb = client.get(format!("{base}/models"));
            match key {
                Some(k) => rb.bearer_auth(k),
                None => rb,
            }
        }
    };
    let resp = rb.timeout(TIMEOUT).send().await.map_err(|e| {
        format!(
            "cannot reach {base}: {}; check base_url and the network",
            e.without_url()
        )
    })?;
    match resp.status().as_u16() {
        200..=299 => Ok(format!("{base} answered; key accepted")),
        401 | 403 => Err(format!(
            "{base} refused the key (HTTP {}); set a valid key in {}",
            resp.status().as_u16(),
            pc.api_key_env
                .clone()
                .or_else(|| pc.api_key_secret.clone().map(|s| format!("secret {s}")))
                .unwrap_or_else(|| "api_key_env".into())
        )),
        // Some OpenAI-compatible servers have no /models; reachable is what matters.
        404 if pc.kind == ProviderType::OpenaiCompat => {
            Ok(format!("{base} answered (no /models endpoint)"))
        }
        s => Err(format!("{base} answered HTTP {s}; is base_url right?")),
    }
}
