//! `hearth token`: create, list and revoke API tokens in the local store.

use hearth_core::{now_ms, rfc3339};
use hearth_store::{NewToken, Store};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, TokenCommand};

/// Runs a token command against the home's database.
pub async fn run(g: &Global, command: TokenCommand) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = crate::serve::load_config(g, &home)?;
    let store = crate::serve::open_store(&home, &config)?;
    match command {
        TokenCommand::Create { name } => {
            let secret = hearth_server::generate_token()
                .map_err(|e| anyhow::anyhow!("no randomness available for a token: {e}"))?;
            let id = format!("tok_{}", &uuid_like());
            store
                .create_token(NewToken {
                    id: id.clone(),
                    name: name.clone(),
                    hash_hex: hearth_server::hash_token(&secret),
                    created_at: now_ms(),
                })
                .await
                .map_err(anyhow::Error::new)?;
            if g.json {
                println!("{}", json!({ "id": id, "name": name, "token": secret }));
            } else {
                println!("{secret}");
                eprintln!("token {id} ({name}) created; the secret above is shown only once");
            }
        }
        TokenCommand::List => {
            let tokens = store.list_tokens().await.map_err(anyhow::Error::new)?;
            if g.json {
                let v: Vec<_> = tokens
                    .iter()
                    .map(|t| {
                        json!({ "id": t.id, "name": t.name, "created_at": rfc3339(t.created_at),
                                "revoked_at": t.revoked_at.map(rfc3339) })
                    })
                    .collect();
                println!("{}", json!({ "tokens": v }));
            } else {
                for t in tokens {
                    let state = if t.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    println!("{}  {}  {}  {}", t.id, state, rfc3339(t.created_at), t.name);
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

fn uuid_like() -> String {
    hearth_core::new_run_id()
        .trim_start_matches("run_")
        .to_owned()
}
