//! `hearth apps import|approve|enable|disable|list`: other bots' app
//! manifests, through the running server (admin token).

use hearth_server::routes::apps::{AppVersionView, AppsList, EnablementView, ImportedApp};
use reqwest::Method;
use serde_json::{Value, json};

use super::{Api, enc};
use crate::Exit;
use crate::cli::AppsCommand;
use crate::output::{print_json, table};

/// The largest manifest file read (the server caps manifests at 64 KiB).
const MAX_FILE_BYTES: u64 = 64 * 1024;

fn read_manifest(file: &std::path::Path) -> Result<Value, Exit> {
    let size = std::fs::metadata(file)
        .map_err(|e| Exit::config(anyhow::anyhow!("cannot read {}: {e}", file.display())))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(Exit::config(anyhow::anyhow!(
            "{} is {size} bytes; a manifest is at most {MAX_FILE_BYTES}",
            file.display()
        )));
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| Exit::config(anyhow::anyhow!("cannot read {}: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| {
        Exit::config(anyhow::anyhow!(
            "{} is not JSON ({e}); a manifest is a JSON document",
            file.display()
        ))
    })
}

/// Runs one `hearth apps` command.
pub(super) async fn apps(api: &Api, command: AppsCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        AppsCommand::Import { source } => {
            let lower = source.to_ascii_lowercase();
            let body = if lower.starts_with("https://") || lower.starts_with("http://") {
                json!({ "url": source })
            } else {
                read_manifest(std::path::Path::new(&source))?
            };
            let done: ImportedApp = api.post("/v1/apps/manifests", &body).await?;
            if json_out {
                print_json(&done);
            } else {
                println!(
                    "imported {} version {} ({}); review it with `hearth apps list`, then `hearth \
                     apps approve {} {}`",
                    done.app, done.version, done.status, done.app, done.version
                );
            }
        }
        AppsCommand::Approve { app, version } => {
            let path = format!("/v1/apps/{}/versions/{}/approve", enc(&app), enc(&version));
            let v: AppVersionView = api.call(api.request(Method::POST, &path)).await?;
            if json_out {
                print_json(&v);
            } else {
                println!(
                    "approved {} version {} (hearth may send its public commands); enable it in \
                     a server with `hearth apps enable {} {} --guild <id>`",
                    v.app, v.version, v.app, v.version
                );
            }
        }
        AppsCommand::Enable {
            app,
            version,
            guild,
        } => {
            let path = format!("/v1/apps/{}/guilds/{}", enc(&app), enc(&guild));
            let e: EnablementView = api.put(&path, &json!({ "version": version })).await?;
            if json_out {
                print_json(&e);
            } else {
                println!(
                    "{} version {} is enabled in server {}",
                    e.app, e.version, e.guild_id
                );
            }
        }
        AppsCommand::Disable { app, guild } => {
            let path = format!("/v1/apps/{}/guilds/{}", enc(&app), enc(&guild));
            api.call_empty(api.request(Method::DELETE, &path)).await?;
            if json_out {
                print_json(&json!({ "app": app, "guild_id": guild, "disabled": true }));
            } else {
                println!("{app} is disabled in server {guild}");
            }
        }
        AppsCommand::List => {
            let list: AppsList = api.get("/v1/apps").await?;
            if json_out {
                print_json(&list);
                return Ok(());
            }
            if list.apps.is_empty() {
                println!("no app imported (hearth apps import <file> or --url <address>)");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = list
                .apps
                .iter()
                .flat_map(|a| a.versions.iter())
                .map(|v| {
                    let guilds: Vec<&str> = list
                        .enablements
                        .iter()
                        .filter(|e| e.app == v.app && e.version == v.version)
                        .map(|e| e.guild_id.as_str())
                        .collect();
                    let actions = v.manifest["actions"]
                        .as_array()
                        .map(|a| a.len().to_string())
                        .unwrap_or_default();
                    vec![
                        v.app.clone(),
                        v.version.clone(),
                        v.status.clone(),
                        actions,
                        guilds.join(","),
                    ]
                })
                .collect();
            println!(
                "{}",
                table(
                    &["app", "version", "status", "actions", "servers"],
                    &[false, false, false, true, false],
                    &rows
                )
            );
        }
    }
    Ok(())
}
