//! `hearth token`: create, list and revoke API tokens in the local store.

use std::path::Path;

use hearth_core::{now_ms, rfc3339};
use hearth_store::NewToken;
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, TokenCommand};

/// Runs a token command against the home's database.
pub async fn run(g: &Global, command: TokenCommand) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = crate::serve::load_config(g, &home)?;
    let store = crate::serve::open_store(&home, &config).await?;
    // Shown to people, so absolute even when --home was relative.
    let home = std::fs::canonicalize(&home).unwrap_or(home);
    match command {
        TokenCommand::Create { name, user } => {
            if let Some(u) = &user {
                hearth_runtime::check_key("user", u).map_err(Exit::config)?;
            }
            let secret = hearth_server::generate_token()
                .map_err(|e| anyhow::anyhow!("no randomness available for a token: {e}"))?;
            let id = format!("tok_{}", &uuid_like());
            store
                .create_token(NewToken {
                    id: id.clone(),
                    name: name.clone(),
                    hash_hex: hearth_server::hash_token(&secret),
                    created_at: now_ms(),
                    user_key: user.clone(),
                })
                .await
                .map_err(anyhow::Error::new)?;
            if g.json {
                crate::output::print_json(&json!({ "id": id, "name": name, "token": secret,
                                                   "user_key": user,
                                                   "home": home.display().to_string() }));
            } else {
                // The secret alone on stdout, so `$(hearth token create)` captures
                // it; the guidance on stderr.
                println!("{secret}");
                eprintln!("{}", created_note(&id, &name, &home, &secret));
            }
        }
        TokenCommand::List => {
            let tokens = store.list_tokens().await.map_err(anyhow::Error::new)?;
            if g.json {
                let v: Vec<_> = tokens
                    .iter()
                    .map(|t| {
                        json!({ "id": t.id, "name": t.name, "created_at": rfc3339(t.created_at),
                                "revoked_at": t.revoked_at.map(rfc3339), "user_key": t.user_key })
                    })
                    .collect();
                crate::output::print_json(&json!({ "tokens": v }));
            } else if tokens.is_empty() {
                println!(
                    "no tokens in {}; create one with `hearth token create`",
                    home.display()
                );
            } else {
                for t in tokens {
                    let state = if t.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    let user = t.user_key.as_deref().unwrap_or("operator");
                    println!(
                        "{}  {}  {}  {}  {}",
                        t.id,
                        state,
                        rfc3339(t.created_at),
                        user,
                        t.name
                    );
                }
            }
        }
        TokenCommand::Revoke { id } => {
            if store.revoke_token(&id).await.map_err(anyhow::Error::new)? {
                println!("revoked {id}");
            } else {
                return Err(anyhow::anyhow!("no active token with id {id}").into());
            }
        }
    }
    Ok(())
}

/// What to do with a new token, and where it lives: the server of this
/// home accepts it (on every address), and the CLI sends it from
/// `HEARTH_TOKEN` or `--token`.
fn created_note(id: &str, name: &str, home: &Path, secret: &str) -> String {
    format!(
        "token {id} ({name}) created in the home {home}; the secret above is shown only now.\n\
         From now on the hearth serving this home asks every /v1 request for a token. \
         Use it with the CLI:\n  export HEARTH_TOKEN={secret}\n\
         (or pass --token), and over HTTP as `Authorization: Bearer <token>`.",
        home = home.display()
    )
}

fn uuid_like() -> String {
    hearth_core::new_run_id()
        .trim_start_matches("run_")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_created_note_names_the_home_and_how_to_use_the_token() {
        let note = created_note("tok_1", "laptop", Path::new("/h/.hearth"), "hth_abc");
        for part in [
            "tok_1",
            "laptop",
            "/h/.hearth",
            "export HEARTH_TOKEN=hth_abc",
            "--token",
        ] {
            assert!(note.contains(part), "{part}: {note}");
        }
    }
}
