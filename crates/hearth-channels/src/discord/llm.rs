//! `/llm key set|remove` and `/llm usage`: a server's own provider key, for the guild owner
//! and members with Administrator. `set` opens a modal, so the key is typed
//! into a form Discord sends only to hearth and never appears in the
//! channel or in the command's options; hearth seals it (through the
//! runtime, like `PUT /v1/scopes/{scope}/credentials/{provider}`), audits
//! who set it, and never shows it again. The server's runs then call that
//! provider with it; no other server's runs, and no DM, ever do. `/llm
//! usage` shows what the server's runs used today, all together (no
//! member's figures, no text).

use hearth_runtime::surfaces::Secret;
use serde_json::json;

use super::interactions::{is_guild_admin, private, respond};
use super::types::{CommandOption, Interaction, User, option};
use super::{Dc, guild_scope, is_snowflake, user_key};
use crate::error::ChannelError;

/// The modal callback type.
const MODAL: u8 = 9;
/// Text input component, short style.
const TEXT_INPUT: u8 = 4;
const SHORT: u8 = 1;
/// A modal's custom id starts with this; the provider follows.
const MODAL_PREFIX: &str = "llmkey:";
/// The key field's custom id.
const KEY_FIELD: &str = "key";
/// Discord's limit on a modal's title.
const MAX_TITLE: usize = 45;

const ADMINS_ONLY: &str = "Only the server owner or an Administrator can manage this server's key.";

/// The configured providers (of the models offered).
fn providers(dc: &Dc) -> Vec<String> {
    let mut names: Vec<String> = crate::commands::model_ids(&dc.runtime)
        .into_iter()
        .filter_map(|m| m.split_once('/').map(|(p, _)| p.to_owned()))
        .filter(|p| p != "echo")
        .collect();
    names.dedup();
    names
}

/// The guild's scope when the actor may manage its key; else tells them why not.
async fn admin_scope(dc: &Dc, i: &Interaction, actor: &User) -> Option<String> {
    let Some(guild) = i.guild_id.as_deref().filter(|g| is_snowflake(g)) else {
        private(dc, i, "Use this command in a server.").await;
        return None;
    };
    if !is_guild_admin(dc, i, actor) {
        private(dc, i, ADMINS_ONLY).await;
        return None;
    }
    Some(guild_scope(guild))
}

/// `/llm key set|remove provider:<name>`.
pub(super) async fn command(
    dc: &Dc,
    i: &Interaction,
    actor: &User,
    group: Option<&CommandOption>,
) -> Result<(), ChannelError> {
    let Some(scope) = admin_scope(dc, i, actor).await else {
        return Ok(());
    };
    if group.is_some_and(|g| g.name == "usage") {
        let report = dc.runtime.scope_usage_today(&scope).await?;
        let text = format!(
            "This server: {}",
            crate::commands::usage_text(std::slice::from_ref(&report))
        );
        private(dc, i, &text).await;
        return Ok(());
    }
    let Some(sub) = group
        .filter(|g| g.name == "key")
        .and_then(|g| g.options.first())
    else {
        private(dc, i, "Use /llm key set or /llm key remove.").await;
        return Ok(());
    };
    let provider = option(&sub.options, "provider").unwrap_or_default();
    let provider = provider.trim();
    let known = providers(dc);
    if !known.iter().any(|p| p == provider) {
        let text = format!(
            "{provider:?} is not a provider here; choose one of: {}",
            known.join(", ")
        );
        private(dc, i, &text).await;
        return Ok(());
    }
    match sub.name.as_str() {
        "set" => {
            let title: String = format!("{provider} key for this server")
                .chars()
                .take(MAX_TITLE)
                .collect();
            let data = json!({
                "custom_id": format!("{MODAL_PREFIX}{provider}"),
                "title": title,
                "components": [{ "type": 1, "components": [{
                    "type": TEXT_INPUT, "custom_id": KEY_FIELD, "style": SHORT,
                    "label": "API key (never shown again)", "min_length": 1, "max_length": 4000,
                    "required": true,
                }] }],
            });
            respond(dc, i, MODAL, data).await;
        }
        "remove" => {
            let who = user_key(&actor.id);
            let text = if dc
                .runtime
                .remove_scope_credential(&scope, provider, &who)
                .await?
            {
                format!(
                    "Removed this server's key for {provider}. Its runs on {provider} now fail \
                     until a new key is set, unless the operator allows falling back to theirs."
                )
            } else {
                format!("This server has no key of its own for {provider}.")
            };
            private(dc, i, &text).await;
        }
        _ => private(dc, i, "Use /llm key set or /llm key remove.").await,
    }
    Ok(())
}

/// The modal of `/llm key set`, submitted: the key is sealed for this
/// server, and the admin told (privately) it is in force.
pub(super) async fn submitted(dc: &Dc, i: &Interaction, actor: &User) -> Result<(), ChannelError> {
    let Some(data) = &i.data else { return Ok(()) };
    let Some(provider) = data
        .custom_id
        .as_deref()
        .and_then(|c| c.strip_prefix(MODAL_PREFIX))
    else {
        return Ok(());
    };
    let Some(scope) = admin_scope(dc, i, actor).await else {
        return Ok(());
    };
    let Some(key) = data.fields.value(KEY_FIELD) else {
        private(dc, i, "No key was given; nothing changed.").await;
        return Ok(());
    };
    let who = user_key(&actor.id);
    let text = match dc
        .runtime
        .set_scope_credential(&scope, provider, Secret::new(key), &who)
        .await
    {
        Ok(()) => format!(
            "This server's runs now use its own key for {provider}. It is sealed and never \
             shown again; /llm key remove takes it away."
        ),
        // The runtime's refusals never carry the key.
        Err(e) if !e.is_transient() => format!("The key was not saved: {e}"),
        Err(e) => return Err(e.into()),
    };
    private(dc, i, &text).await;
    Ok(())
}
