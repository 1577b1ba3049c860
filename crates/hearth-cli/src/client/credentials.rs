//! `hearth credentials set|remove|list`: a community's own provider key,
//! through the running server (which seals it under its master key and
//! audits the change). The key is read from stdin, never from arguments,
//! so it stays out of shell history and `ps`, and is never printed.

use std::io::{IsTerminal, Read};

use hearth_server::routes::credentials::Credentials;
use reqwest::Method;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::CredentialsCommand;
use crate::output::{print_json, table};

/// The largest key read (provider keys are far smaller).
const MAX_KEY_BYTES: u64 = 4096;

fn path(scope: &str, provider: Option<&str>) -> String {
    let base = format!("/v1/scopes/{}/credentials", enc(scope));
    match provider {
        Some(p) => format!("{base}/{}", enc(p)),
        None => base,
    }
}

/// The key from stdin, its trailing newline removed.
fn read_key(scope: &str, provider: &str) -> Result<String, Exit> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!(
            "enter {scope}'s key for {provider}, then press Enter and Ctrl-D \
             (or pipe it in: `printf %s \"$KEY\" | hearth credentials set --scope {scope} --provider {provider}`)"
        );
    }
    let mut key = String::new();
    stdin
        .by_ref()
        .take(MAX_KEY_BYTES + 1)
        .read_to_string(&mut key)
        .map_err(|e| Exit::config(anyhow::anyhow!("cannot read the key from stdin: {e}")))?;
    let key = key.trim_end_matches(['\r', '\n']).to_owned();
    if key.len() as u64 > MAX_KEY_BYTES {
        return Err(Exit::config(anyhow::anyhow!(
            "the key is longer than {MAX_KEY_BYTES} bytes"
        )));
    }
    if key.trim().is_empty() {
        return Err(Exit::config(anyhow::anyhow!(
            "no key on stdin; pipe it in, e.g. `printf %s \"$KEY\" | hearth credentials set \
             --scope {scope} --provider {provider}`"
        )));
    }
    Ok(key)
}

/// Sets, removes or lists a community's keys.
pub(super) async fn credentials(
    api: &Api,
    command: CredentialsCommand,
    json_out: bool,
) -> Result<(), Exit> {
    match command {
        CredentialsCommand::Set { scope, provider } => {
            let key = read_key(&scope, &provider)?;
            let rb = api
                .request(Method::PUT, &path(&scope, Some(&provider)))
                .json(&json!({ "key": key }));
            drop(key);
            api.call_empty(rb).await?;
            if json_out {
                print_json(&json!({ "scope": scope, "provider": provider, "set": true }));
            } else {
                println!(
                    "{scope} now uses its own key for {provider} (sealed; it is not shown again)"
                );
            }
        }
        CredentialsCommand::Remove { scope, provider } => {
            api.call_empty(api.request(Method::DELETE, &path(&scope, Some(&provider))))
                .await?;
            if json_out {
                print_json(&json!({ "scope": scope, "provider": provider, "removed": true }));
            } else {
                println!("removed {scope}'s key for {provider}");
            }
        }
        CredentialsCommand::List { scope } => {
            let c: Credentials = api.get(&path(&scope, None)).await?;
            if json_out {
                print_json(&c);
                return Ok(());
            }
            if c.credentials.is_empty() {
                println!("{scope} has no key of its own");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = c
                .credentials
                .into_iter()
                .map(|c| vec![c.provider, c.set_at])
                .collect();
            println!("{}", table(&["provider", "set"], &[false; 2], &rows));
        }
    }
    Ok(())
}
