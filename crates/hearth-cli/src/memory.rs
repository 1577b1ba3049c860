//! `hearth memory`: a user's right to see and erase what hearth remembers
//! about them. Works on the home's database directly, like `hearth secrets`,
//! so an operator can answer a request with the server stopped; `reembed`
//! embeds every memory again after `[memory] embeddings` names a new model.

use std::io::{BufRead, IsTerminal, Write};

use hearth_core::{now_ms, rfc3339};
use hearth_store::AuditEvent;
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, MemoryCommand};

/// Runs a memory command against the home's database.
pub async fn run(g: &Global, command: MemoryCommand) -> Result<(), Exit> {
    let user = match &command {
        MemoryCommand::Export { user } | MemoryCommand::Delete { user, .. } => user,
        MemoryCommand::Reembed => return reembed(g).await,
    };
    if user.trim().is_empty() {
        return Err(Exit::config(anyhow::anyhow!("--user must not be empty")));
    }
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = crate::serve::load_config(g, &home)?;
    let store = crate::serve::open_store(&home, &config).await?;
    match command {
        MemoryCommand::Export { user } => {
            let memories = store
                .export_user_memories(&user)
                .await
                .map_err(anyhow::Error::new)?;
            let memories: Vec<_> = memories
                .iter()
                .map(|m| {
                    json!({
                        "id": m.id,
                        "text": m.text,
                        "thread_key": m.thread_key,
                        "run_id": m.run_id,
                        "created_at": rfc3339(m.created_at),
                        "last_used_at": rfc3339(m.last_used_at),
                    })
                })
                .collect();
            // Always JSON: an export is for handing over, not for reading here.
            crate::output::print_json(&json!({ "user_key": user, "memories": memories }));
            Ok(())
        }
        // Answered above, before a user is needed.
        MemoryCommand::Reembed => Ok(()),
        MemoryCommand::Delete { user, yes } => {
            if !yes && !confirmed(&user)? {
                return Err(Exit::config(anyhow::anyhow!(
                    "not confirmed; nothing was deleted"
                )));
            }
            // The erasure itself is recorded (who, whose), never what was
            // erased, in the same transaction: no erasure goes unrecorded.
            let audit = AuditEvent {
                at: now_ms(),
                actor: "operator".to_owned(),
                action: "memory.delete".to_owned(),
                target: user.clone(),
                outcome: "deleted".to_owned(),
                capability: None,
                scope: None,
            };
            let deleted = store
                .delete_user_memories(&user, audit)
                .await
                .map_err(anyhow::Error::new)?;
            if g.json {
                crate::output::print_json(&json!({ "user_key": user, "deleted": deleted }));
            } else {
                println!("deleted {deleted} memories of {user}");
            }
            Ok(())
        }
    }
}

/// Embeds every memory again with the configured model, showing
/// `done/total` on a terminal.
async fn reembed(g: &Global) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let config = crate::serve::load_config(g, &home)?;
    let Some(model) = config.memory.embeddings.clone() else {
        return Err(Exit::config(
            hearth_runtime::memory::ReembedError::EmbeddingsOff,
        ));
    };
    let store = crate::serve::open_store(&home, &config).await?;
    let memory = hearth_runtime::memory::for_command(&config, store)
        .await
        .map_err(|e| match e {
            hearth_runtime::BuildError::Config(m) => Exit::config(anyhow::anyhow!(m)),
            other => Exit::from(anyhow::Error::new(other)),
        })?;
    let live = std::io::stderr().is_terminal();
    let mut progress = |done: u64, total: u64| {
        if live {
            eprint!("\r\x1b[2Kre-embedding memories with {model}: {done}/{total}");
        }
    };
    let result = memory.reembed(&mut progress).await;
    if live {
        eprintln!();
    }
    let done = result.map_err(anyhow::Error::new)?;
    if g.json {
        crate::output::print_json(&json!({ "model": model, "reembedded": done }));
    } else {
        println!("re-embedded {done} memories with {model}");
    }
    Ok(())
}

/// Asks on the terminal; without one, `--yes` is required (a script must
/// say so explicitly rather than erase by accident).
fn confirmed(user: &str) -> Result<bool, Exit> {
    if !std::io::stdin().is_terminal() {
        return Err(Exit::config(anyhow::anyhow!(
            "refusing to delete without confirmation: pass --yes"
        )));
    }
    eprint!("erase every memory of {user}? type yes to confirm: ");
    std::io::stderr().flush().map_err(anyhow::Error::new)?;
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(anyhow::Error::new)?;
    Ok(answer.trim() == "yes")
}
