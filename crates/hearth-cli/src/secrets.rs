//! `hearth secrets`: sealed secrets in the local store, and opening the ones
//! providers name (`api_key_secret`) when `hearth serve` starts.
//!
//! The master key comes only from `HEARTH_SECRET_KEY`, read here at the
//! binary's edge. Secret values are read from stdin (never argv, so they stay
//! out of shell history and `ps`) and are never printed, logged or put in an
//! error message.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};

use hearth_config::Config;
use hearth_core::{now_ms, rfc3339};
use hearth_store::secrets::{Sealer, SecretError, SecretString, generate_key_base64};
use hearth_store::{SecretStore, Store};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, SecretsCommand};

/// The variable holding the base64 master key.
pub const KEY_VAR: &str = "HEARTH_SECRET_KEY";

/// The largest value `hearth secrets set` accepts (API keys are far smaller).
const MAX_VALUE_BYTES: u64 = 64 * 1024;

/// Runs a secrets command against the home's database.
pub async fn run(g: &Global, command: SecretsCommand) -> Result<(), Exit> {
    if let SecretsCommand::Keygen = command {
        return keygen(g);
    }
    // Validate before touching the home, so a typo costs nothing.
    if let SecretsCommand::Set { name } | SecretsCommand::Delete { name } = &command {
        hearth_config::validate_secret_name(name)
            .map_err(|e| Exit::config(anyhow::anyhow!("{e}")))?;
    }
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = crate::serve::load_config(g, &home)?;
    let store = crate::serve::open_store(&home, &config)?;
    // Only sealing needs the key: listing and deleting work without it (so a
    // secret sealed under a lost key can still be removed). The advice for a
    // missing key depends on what is already sealed, hence after the store.
    let sealer = match &command {
        SecretsCommand::Set { .. } => Some(sealer_from_env(&store).await?),
        _ => None,
    };
    match command {
        SecretsCommand::Keygen => Ok(()),
        SecretsCommand::Set { name } => {
            let Some(sealer) = sealer else {
                return Err(Exit::config(anyhow::anyhow!("{KEY_VAR} is not set")));
            };
            let value = read_value(&name)?;
            let sealed = sealer
                .seal(&name, value.expose().as_bytes())
                .map_err(anyhow::Error::new)?;
            drop(value);
            let existed = store
                .get_secret(&name)
                .await
                .map_err(anyhow::Error::new)?
                .is_some();
            store
                .put_secret(&name, sealed, now_ms())
                .await
                .map_err(anyhow::Error::new)?;
            let verb = if existed { "replaced" } else { "stored" };
            if g.json {
                crate::output::print_json(&json!({ "name": name, "replaced": existed }));
            } else {
                println!("{verb} secret {name}");
            }
            Ok(())
        }
        SecretsCommand::List => {
            let secrets = store.list_secrets().await.map_err(anyhow::Error::new)?;
            if g.json {
                let v: Vec<_> = secrets
                    .iter()
                    .map(|s| {
                        json!({ "name": s.name, "created_at": rfc3339(s.created_at),
                                "updated_at": rfc3339(s.updated_at) })
                    })
                    .collect();
                crate::output::print_json(&json!({ "secrets": v }));
            } else if secrets.is_empty() {
                eprintln!("no secrets stored; add one with `hearth secrets set <name>`");
            } else {
                for s in secrets {
                    println!(
                        "{}  created {}  updated {}",
                        s.name,
                        rfc3339(s.created_at),
                        rfc3339(s.updated_at)
                    );
                }
            }
            Ok(())
        }
        SecretsCommand::Delete { name } => {
            if store
                .delete_secret(&name)
                .await
                .map_err(anyhow::Error::new)?
            {
                if g.json {
                    crate::output::print_json(&json!({ "name": name, "deleted": true }));
                } else {
                    println!("deleted secret {name}");
                }
                Ok(())
            } else {
                Err(anyhow::anyhow!("no secret named {name}").into())
            }
        }
    }
}

fn keygen(g: &Global) -> Result<(), Exit> {
    let key = generate_key_base64().map_err(anyhow::Error::new)?;
    if g.json {
        crate::output::print_json(&json!({ "key": key }));
    } else {
        println!("{key}");
    }
    eprintln!(
        "export this as {KEY_VAR} wherever hearth runs and keep it safe: \
         without it the stored secrets cannot be opened"
    );
    Ok(())
}

/// The sealer for the key in `HEARTH_SECRET_KEY`; a missing or invalid key is
/// a configuration error (exit 2) whose message says what to do: make a key
/// when nothing is sealed yet, else restore the one the secrets were sealed with.
pub async fn sealer_from_env(store: &dyn Store) -> Result<Sealer, Exit> {
    let key = std::env::var_os(KEY_VAR);
    let key = key.as_ref().map(|k| k.to_str());
    if let Some(Some(k)) = key
        && let Ok(sealer) = Sealer::from_base64(k)
    {
        return Ok(sealer);
    }
    let sealed: Vec<String> = store
        .list_secrets()
        .await
        .map_err(anyhow::Error::new)?
        .into_iter()
        .map(|s| s.name)
        .collect();
    sealer_from(key, &sealed)
}

/// `key`: `None` when unset, `Some(None)` when set but not Unicode.
/// `sealed`: the names of the secrets already in the store.
fn sealer_from(key: Option<Option<&str>>, sealed: &[String]) -> Result<Sealer, Exit> {
    let problem = match key {
        None => format!("{KEY_VAR} is not set"),
        Some(None) => format!("{KEY_VAR} is not valid base64 (not even UTF-8 text)"),
        Some(Some(k)) => match Sealer::from_base64(k) {
            Ok(sealer) => return Ok(sealer),
            // With nothing sealed yet, the store's own advice (make a key) fits.
            Err(e) if sealed.is_empty() => return Err(Exit::config(e)),
            Err(SecretError::EmptyKey) => format!("{KEY_VAR} is empty"),
            Err(SecretError::KeyNotBase64 { position }) => {
                format!("{KEY_VAR} is not valid base64 (problem at character {position})")
            }
            Err(SecretError::KeyWrongLength { len }) => {
                format!("{KEY_VAR} decodes to {len} bytes, not 32")
            }
            Err(e) => e.to_string(),
        },
    };
    if sealed.is_empty() {
        return Err(Exit::config(anyhow::anyhow!(
            "{problem}; generate one with `hearth secrets keygen` \
             (or `openssl rand -base64 32`) and export it"
        )));
    }
    // A new key cannot open what the old one sealed: never suggest one here.
    Err(Exit::config(anyhow::anyhow!(
        "{problem}, and this home holds {} sealed secret(s) ({}): export in {KEY_VAR} the \
         master key they were sealed with (a newly generated key cannot open them)",
        sealed.len(),
        sealed.join(", ")
    )))
}

/// Reads the secret's value from stdin: one trailing newline (`\n` or `\r\n`)
/// is dropped, an empty value is refused.
fn read_value(name: &str) -> Result<SecretString, Exit> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "enter the value of {name}, then press Enter and Ctrl-D \
             (or pipe it in: `printf %s \"$VALUE\" | hearth secrets set {name}`)"
        );
    }
    // One allocation up front, so growing does not leave copies behind.
    let mut text = String::with_capacity(8 * 1024);
    stdin
        .by_ref()
        .take(MAX_VALUE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::InvalidData {
                "it is not UTF-8 text".to_owned()
            } else {
                e.to_string()
            };
            Exit::config(anyhow::anyhow!(
                "cannot read the value of {name} from stdin: {why}"
            ))
        })?;
    // Truncating never reallocates; wrapped right after, so every exit below
    // wipes it.
    if text.ends_with("\r\n") {
        text.truncate(text.len() - 2);
    } else if text.ends_with('\n') {
        text.truncate(text.len() - 1);
    }
    let value = SecretString::new(text);
    if value.expose().len() as u64 > MAX_VALUE_BYTES {
        return Err(Exit::config(anyhow::anyhow!(
            "the value of {name} is larger than {MAX_VALUE_BYTES} bytes"
        )));
    }
    if value.expose().is_empty() {
        return Err(Exit::config(anyhow::anyhow!(
            "refusing to store an empty value for {name}; pipe the value on stdin, \
             e.g. `printf %s \"$VALUE\" | hearth secrets set {name}`"
        )));
    }
    Ok(value)
}

/// Opens the secrets providers name by `api_key_secret` (for the catalog)
/// and enabled chat channels name by `*_secret` (for their tokens).
/// A missing or invalid `HEARTH_SECRET_KEY` (when some provider needs it), a
/// secret not in the store, or one that does not open is a start-up error
/// (exit 2) naming the provider and the secret.
pub async fn provider_secrets(
    config: &Config,
    key: Option<&str>,
    store: &dyn Store,
) -> Result<BTreeMap<String, SecretString>, Exit> {
    let ch = &config.channels;
    // The chat channels' tokens may be sealed secrets too (enabled channels only).
    let channel_secrets = [
        (
            ch.telegram.enabled,
            "channels.telegram",
            &ch.telegram.token_secret,
        ),
        (
            ch.discord.enabled,
            "channels.discord",
            &ch.discord.token_secret,
        ),
        (
            ch.slack.enabled,
            "channels.slack",
            &ch.slack.bot_token_secret,
        ),
        (
            ch.slack.enabled,
            "channels.slack",
            &ch.slack.app_token_secret,
        ),
    ];
    let wanted: Vec<(&str, &str)> = config
        .llm
        .providers
        .iter()
        .filter_map(|(provider, pc)| {
            pc.api_key_secret
                .as_deref()
                .map(|secret| (provider.as_str(), secret))
        })
        .chain(
            channel_secrets
                .iter()
                .filter(|(enabled, _, _)| *enabled)
                .filter_map(|(_, owner, secret)| secret.as_deref().map(|s| (*owner, s))),
        )
        .collect();
    let mut opened = BTreeMap::new();
    let Some(&(first_provider, first_secret)) = wanted.first() else {
        if let Some(Err(e)) = key.map(Sealer::from_base64) {
            tracing::warn!(error = %e, "{KEY_VAR} is set but unusable; no provider needs it");
        }
        return Ok(opened);
    };
    let sealed: Vec<String> = store
        .list_secrets()
        .await
        .map_err(anyhow::Error::new)?
        .into_iter()
        .map(|s| s.name)
        .collect();
    let sealer = sealer_from(key.map(Some), &sealed).map_err(|exit| {
        Exit::config(anyhow::anyhow!(
            "provider {first_provider}: api_key_secret `{first_secret}` needs the master key: {:#}",
            exit.error
        ))
    })?;
    for (provider, secret) in wanted {
        if opened.contains_key(secret) {
            continue;
        }
        let sealed = store
            .get_secret(secret)
            .await
            .map_err(anyhow::Error::new)?
            .ok_or_else(|| {
                Exit::config(anyhow::anyhow!(
                    "provider {provider}: api_key_secret `{secret}` is not in the store; \
                     set it with `hearth secrets set {secret}`"
                ))
            })?;
        let value = sealer.open(secret, &sealed).map_err(|e| {
            Exit::config(anyhow::anyhow!(
                "provider {provider}: api_key_secret `{secret}`: {e}"
            ))
        })?;
        opened.insert(secret.to_owned(), value);
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_errors_say_how_to_make_one() {
        for key in [None, Some(None), Some(Some("")), Some(Some("not base64!"))] {
            let Err(exit) = sealer_from(key, &[]) else {
                panic!("{key:?} was accepted");
            };
            assert_eq!(exit.code, crate::EXIT_CONFIG);
            assert!(
                format!("{:#}", exit.error).contains("hearth secrets keygen"),
                "{:#}",
                exit.error
            );
        }
        let key = generate_key_base64().unwrap();
        assert!(sealer_from(Some(Some(&key)), &[]).is_ok());
    }

    /// With secrets already sealed, a new key would open none of them: the
    /// advice is to restore the old key, never to make one.
    #[test]
    fn with_sealed_secrets_the_advice_is_the_old_key_not_a_new_one() {
        let sealed = ["openai.key".to_owned()];
        for key in [
            None,
            Some(None),
            Some(Some("")),
            Some(Some("not base64!")),
            Some(Some("c2hvcnQ=")),
        ] {
            let Err(exit) = sealer_from(key, &sealed) else {
                panic!("{key:?} was accepted");
            };
            assert_eq!(exit.code, crate::EXIT_CONFIG);
            let msg = format!("{:#}", exit.error);
            assert!(
                msg.contains("openai.key") && msg.contains("sealed with"),
                "{msg}"
            );
            for new_key in ["keygen", "openssl rand"] {
                assert!(!msg.contains(new_key), "{key:?} suggests a new key: {msg}");
            }
        }
    }
}
