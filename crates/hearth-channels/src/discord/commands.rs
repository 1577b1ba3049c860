//! The slash commands: their definitions, registered with one bulk
//! overwrite (`PUT /applications/{app}/commands`) when `sync_commands`.

use reqwest::Method;
use serde_json::{Value, json};
use tracing::{info, warn};

use super::Dc;

/// Option types.
const SUB_COMMAND: u8 = 1;
const SUB_COMMAND_GROUP: u8 = 2;
const STRING: u8 = 3;
const USER: u8 = 6;
const ROLE: u8 = 8;
/// Discord shows at most this many choices.
const MAX_CHOICES: usize = 25;
/// The Administrator permission bit.
pub(super) const ADMINISTRATOR: u64 = 1 << 3;

fn option(kind: u8, name: &str, description: &str, required: bool) -> Value {
    json!({ "type": kind, "name": name, "description": description, "required": required })
}

fn choices(values: &[String]) -> Value {
    values
        .iter()
        .filter(|v| v.chars().count() <= 100)
        .take(MAX_CHOICES)
        .map(|v| json!({ "name": v, "value": v }))
        .collect()
}

/// Every command, with the configured models as `/model`'s choices.
pub(super) fn definitions(models: &[String]) -> Value {
    let mut model = option(STRING, "name", "The model to use", false);
    if models.len() <= MAX_CHOICES {
        model["choices"] = choices(models);
    }
    let mut level = option(STRING, "level", "How hard it thinks", false);
    level["choices"] = choices(&["off", "low", "medium", "high"].map(String::from));
    let mut mode = option(STRING, "mode", "What may run without asking", false);
    mode["choices"] = choices(&hearth_core::PermissionMode::ALL.map(|m| m.as_str().to_owned()));
    let target = |verb: &str| {
        json!({ "type": SUB_COMMAND, "name": verb, "description": format!("{verb} a capability for a role or a user in this server"),
            "options": [
                option(STRING, "capability", "A capability (e.g. web.fetch) or preset:<name>", true),
                option(ROLE, "role", "The role", false),
                option(USER, "user", "The user", false),
            ] })
    };
    json!([
        { "name": "ping", "description": "Check that the assistant answers" },
        { "name": "ask", "description": "Ask the assistant", "options": [option(STRING, "question", "Your question", true)] },
        { "name": "model", "description": "Show or choose the model of this channel", "options": [model] },
        { "name": "thinking", "description": "Show or choose how hard the model thinks", "options": [level] },
        { "name": "mode", "description": "Show or choose what runs without asking in this channel", "options": [mode.clone()] },
        { "name": "runplan", "description": "Carry out the last plan, switching to the mode (default ask)", "options": [mode] },
        { "name": "new", "description": "Start a new conversation in this channel" },
        { "name": "usage", "description": "Today's model usage and cost" },
        { "name": "permissions", "description": "Capabilities of roles and users in this server",
          "default_member_permissions": ADMINISTRATOR.to_string(), "contexts": [0],
          "options": [
            target("grant"),
            target("revoke"),
            { "type": SUB_COMMAND, "name": "list", "description": "List this server's grants" },
          ] },
        { "name": "agent", "description": "The assistant's runs in this channel",
          "options": [
            { "type": SUB_COMMAND, "name": "cancel", "description": "Stop the answer being worked on" },
            { "type": SUB_COMMAND, "name": "stats", "description": "Run health of this server" },
          ] },
        { "name": "llm", "description": "This server's own provider key (admins)",
          "default_member_permissions": ADMINISTRATOR.to_string(), "contexts": [0],
          "options": [
            { "type": SUB_COMMAND_GROUP, "name": "key", "description": "This server's own provider key",
              "options": [
                { "type": SUB_COMMAND, "name": "set", "description": "Give a key (typed in a private form) for this server's runs",
                  "options": [option(STRING, "provider", "The provider the key is for", true)] },
                { "type": SUB_COMMAND, "name": "remove", "description": "Take this server's key away",
                  "options": [option(STRING, "provider", "The provider", true)] },
              ] },
            { "type": SUB_COMMAND, "name": "usage", "description": "This server's model usage and cost today" },
          ] },
        { "name": "plugins", "description": "Other bots' apps in this server (admins)",
          "default_member_permissions": ADMINISTRATOR.to_string(), "contexts": [0],
          "options": [
            { "type": SUB_COMMAND, "name": "import", "description": "Import an app's manifest from an https address",
              "options": [option(STRING, "url", "The manifest's https:// address", true)] },
            { "type": SUB_COMMAND, "name": "enable", "description": "Turn an approved version of an app on here",
              "options": [option(STRING, "app", "The app's name", true), option(STRING, "version", "The approved version", true)] },
            { "type": SUB_COMMAND, "name": "disable", "description": "Turn an app off here",
              "options": [option(STRING, "app", "The app's name", true)] },
            { "type": SUB_COMMAND, "name": "list", "description": "Apps, their versions and what is on here" },
          ] },
        { "name": "help", "description": "What this bot does" },
    ])
}

/// Registers the commands (replacing any others of the application).
pub(super) async fn sync(dc: Dc) {
    let (Ok(api), Some(me)) = (&dc.kit.api, dc.kit.me.get()) else {
        return;
    };
    let models = crate::commands::model_ids(&dc.runtime);
    let path = format!("/applications/{}/commands", me.app_id);
    match api
        .call::<Value>(
            Method::PUT,
            &path,
            "PUT commands",
            Some(&definitions(&models)),
        )
        .await
    {
        Ok(_) => info!(channel = "discord", "slash commands registered"),
        Err(e) => {
            warn!(channel = "discord", error = %e, "could not register the slash commands")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn definitions_are_valid_for_discord() {
        let models: Vec<String> = (0..30).map(|i| format!("p/m{i}")).collect();
        for defs in [definitions(&models), definitions(&models[..3])] {
            let list = defs.as_array().unwrap();
            assert_eq!(list.len(), 13);
            for c in list {
                let name = c["name"].as_str().unwrap();
                assert!(
                    (1..=32).contains(&name.len())
                        && name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                );
                let d = c["description"].as_str().unwrap();
                assert!((1..=100).contains(&d.chars().count()));
                for o in c["options"].as_array().into_iter().flatten() {
                    assert!(o["description"].as_str().unwrap().chars().count() <= 100);
                    assert!(o["choices"].as_array().is_none_or(|c| c.len() <= 25));
                }
            }
        }
        assert_eq!(
            definitions(&models[..3])[2]["options"][0]["choices"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }
}
