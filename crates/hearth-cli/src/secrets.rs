//! `hearth secrets`: sealed secrets in the local store, and opening the ones
//! providers name (`api_key_secret`) when `hearth serve` starts.
//!
//! The master key comes only from `HEARTH_SECRET_KEY`, read here at the
//! binary's edge. Secret values are read from stdin (never argv, so they stay
//! out of shell history and `ps`) and are never printed, logged or put in an
//! error message.

use std::io::{IsTerminal, Read};

use hearth_core::{now_ms, rfc3339};
use hearth_runtime::builder::{KEY_VAR, sealer_from};
use hearth_store::SecretStore;
use hearth_store::secrets::{Sealer, SecretString, generate_key_base64};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, SecretsCommand};

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
    let store = crate::serve::open_store(&home, &config).await?;
    // Only sealing needs the key: listing and deleting work without it (so a
    // secret sealed under a lost key can still be removed). The advice for a
    // missing key depends on what is already sealed, hence after the store.
    let sealer = match &command {
        SecretsCommand::Set { .. } => Some(sealer_from_env(store.as_ref()).await?),
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
async fn sealer_from_env(store: &dyn SecretStore) -> Result<Sealer, Exit> {
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
    sealer_from(key, &sealed).map_err(crate::serve::build_exit)
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
