//! `/plugins import|enable|disable|list`: other bots' app manifests in this
//! server, for the guild owner and members with Administrator (as `/llm`).
//! `import` fetches a manifest from an https address (through the same
//! guard as `web_fetch`) as a pending version: the hearth operator reviews
//! and approves it (`hearth apps approve`), which records the consent for
//! hearth to send its public commands. `enable` turns an approved version
//! on in this server, `disable` turns the app off, `list` shows what there
//! is. Every answer is private to the admin.

use hearth_runtime::RuntimeError;
use hearth_runtime::apps::{AppVersionStatus, ManifestSource};
use serde_json::json;

use super::interactions::{DEFERRED, EPHEMERAL, edit_original, is_guild_admin, private, respond};
use super::types::{CommandOption, Interaction, User, option};
use super::{Dc, is_snowflake, user_key};
use crate::error::ChannelError;

const ADMINS_ONLY: &str =
    "Only the server owner or an Administrator can manage this server's apps.";
const USAGE: &str = "Use /plugins import <url>, /plugins enable <app> <version>, /plugins disable <app> or /plugins list.";

/// The runtime's refusal as a sentence for the admin; transient failures
/// are the caller's to retry.
fn refusal(e: RuntimeError) -> Result<String, ChannelError> {
    if e.is_transient() {
        return Err(e.into());
    }
    Ok(format!("Not done: {e}"))
}

/// `/plugins <sub>`.
pub(super) async fn command(
    dc: &Dc,
    i: &Interaction,
    actor: &User,
    sub: Option<&CommandOption>,
) -> Result<(), ChannelError> {
    let Some(guild) = i.guild_id.as_deref().filter(|g| is_snowflake(g)) else {
        private(dc, i, "Use this command in a server.").await;
        return Ok(());
    };
    if !is_guild_admin(dc, i, actor) {
        private(dc, i, ADMINS_ONLY).await;
        return Ok(());
    }
    let Some(sub) = sub else {
        private(dc, i, USAGE).await;
        return Ok(());
    };
    let who = user_key(&actor.id);
    let arg = |name: &str| option(&sub.options, name).unwrap_or_default();
    match sub.name.as_str() {
        "import" => {
            // Fetching may take longer than Discord waits for an answer.
            respond(dc, i, DEFERRED, json!({ "flags": EPHEMERAL })).await;
            let source = ManifestSource::Url(arg("url").trim().to_owned());
            let text = match dc.runtime.import_app_manifest(source, &who).await {
                Ok(v) if v.status == AppVersionStatus::Approved => format!(
                    "{} version {} is imported and approved: /plugins enable {} {} turns it on here.",
                    v.app, v.version, v.app, v.version
                ),
                Ok(v) => format!(
                    "Imported {} version {} (pending). The hearth operator reviews and approves \
                     it (hearth apps approve {} {}); then /plugins enable {} {} turns it on here.",
                    v.app, v.version, v.app, v.version, v.app, v.version
                ),
                Err(e) => refusal(e)?,
            };
            edit_original(dc, i, &text).await;
        }
        "enable" => {
            let (app, version) = (arg("app"), arg("version"));
            let text = match dc.runtime.enable_app(guild, &app, &version, &who).await {
                Ok(e) => format!(
                    "{} version {} is enabled in this server: mention me with its commands, or \
                     ask me to use it.",
                    e.app, e.version
                ),
                Err(e) => refusal(e)?,
            };
            private(dc, i, &text).await;
        }
        "disable" => {
            let app = arg("app");
            let text = match dc.runtime.disable_app(guild, &app, &who).await {
                Ok(true) => format!("{app} is disabled in this server."),
                Ok(false) => format!("{app} is not enabled in this server."),
                Err(e) => refusal(e)?,
            };
            private(dc, i, &text).await;
        }
        "list" => {
            let all = dc.runtime.list_apps().await?;
            let mut lines = Vec::new();
            for v in &all.versions {
                let here = all
                    .enablements
                    .iter()
                    .any(|e| e.guild_id == guild && e.app == v.app && e.version == v.version);
                lines.push(format!(
                    "{} {} — {}{}",
                    v.app,
                    v.version,
                    v.status.as_str(),
                    if here { ", enabled here" } else { "" }
                ));
            }
            let text = if lines.is_empty() {
                "No app is imported yet: /plugins import <url>.".to_owned()
            } else {
                lines.join("\n")
            };
            private(dc, i, &text).await;
        }
        _ => private(dc, i, USAGE).await,
    }
    Ok(())
}
