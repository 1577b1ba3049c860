//! App manifests: what another bot of a Discord server offers hearth.
//!
//! A manifest (format in `shared/app-manifest.v1.schema.json`, kept in
//! agreement with this parser by a test) names the bot by its Discord ids
//! and declares its prefix commands. An admin imports one, approves a
//! version, and enables it in a guild; its actions then become tools
//! (`app__<app>__<action>`) and deterministic triggers there. Unknown
//! fields are refused and every size is capped, so a hostile manifest
//! costs little; every refusal names the field by its JSON path.

pub mod command;
#[cfg(test)]
mod schema_tests;

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

pub use command::{TriggerMatch, match_trigger, render_command};

/// The manifest format this build reads.
pub const SCHEMA_VERSION: u32 = 1;
/// Largest manifest document, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 64 * 1024;
/// Most actions one manifest declares.
pub const MAX_ACTIONS: usize = 32;
/// Most arguments one action declares.
pub const MAX_ARGS: usize = 8;
/// Most permissions one action declares.
pub const MAX_PERMISSIONS: usize = 16;
/// Longest action description, in characters.
pub const MAX_DESCRIPTION: usize = 500;
/// Longest argument description, in characters.
pub const MAX_ARG_DESCRIPTION: usize = 300;
/// Longest homepage, in characters.
pub const MAX_HOMEPAGE: usize = 512;
/// Longest trigger prefix, in characters.
pub const MAX_PREFIX: usize = 32;
/// Prefix of the tools apps' actions become.
pub const TOOL_PREFIX: &str = "app__";

/// A parsed, validated manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppManifest {
    /// The format's version (1).
    pub schema: u32,
    /// The app and the bot it is.
    pub app: AppInfo,
    /// This manifest's version.
    pub version: String,
    /// The bot's commands.
    pub actions: Vec<AppAction>,
}

/// The app and the bot it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppInfo {
    /// The app's name in hearth.
    pub name: String,
    /// The bot's Discord application id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord_application_id: Option<String>,
    /// The bot's Discord user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discord_bot_user_id: Option<String>,
    /// Where people read about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
}

/// One command of the bot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppAction {
    /// The action's name (unique in the manifest).
    pub name: String,
    /// What it does (the tool's description).
    pub description: String,
    /// How the bot recognises the command.
    pub trigger: Trigger,
    /// Its arguments, in the order they follow the prefix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<AppArg>,
    /// Whether hearth may send it.
    pub dispatch: Dispatch,
    /// Discord permissions it needs; non-empty makes it restricted
    /// (dry-run only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<String>,
    /// Whether the bot's reply may be read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<Reply>,
}

impl AppAction {
    /// True when hearth may send this action into a channel once its
    /// version's public-dispatch consent is recorded: it is a
    /// `send_message` action that needs no permission.
    pub fn is_public(&self) -> bool {
        self.dispatch == Dispatch::SendMessage && self.permissions.is_empty()
    }
}

/// How the bot recognises a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// The command's prefix, such as `!play`.
    pub prefix: String,
}

/// One argument of an action (its value is text).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppArg {
    /// The argument's name.
    pub name: String,
    /// What it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the command needs it.
    #[serde(default)]
    pub required: bool,
}

/// Whether hearth may send an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dispatch {
    /// As a message into the channel, as hearth's bot.
    SendMessage,
    /// Never: the action is only described.
    None,
}

/// What hearth does with the bot's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// It may be read back into the conversation.
    Read,
}

/// A refused manifest: the field (a JSON path such as
/// `actions[0].trigger.prefix`) and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ManifestError {
    /// The field, as a JSON path (`.` for the document).
    pub path: String,
    /// What is wrong and what is accepted.
    pub message: String,
}

impl ManifestError {
    fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The tool an app's action becomes.
pub fn tool_name(app: &str, action: &str) -> String {
    format!("{TOOL_PREFIX}{app}__{action}")
}

/// The app and action a tool name names, when it is an app's tool.
pub fn parse_tool_name(tool: &str) -> Option<(&str, &str)> {
    let rest = tool.strip_prefix(TOOL_PREFIX)?;
    let (app, action) = rest.split_once("__")?;
    (!app.is_empty() && !action.is_empty()).then_some((app, action))
}

impl AppManifest {
    /// Parses and validates a manifest document.
    pub fn parse(doc: &[u8]) -> Result<Self, ManifestError> {
        if doc.len() > MAX_MANIFEST_BYTES {
            return Err(ManifestError::new(
                ".",
                format!(
                    "the manifest is {} bytes; at most {MAX_MANIFEST_BYTES} are accepted",
                    doc.len()
                ),
            ));
        }
        let de = &mut serde_json::Deserializer::from_slice(doc);
        let manifest: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            ManifestError::new(path, message)
        })?;
        manifest.validate()?;
        Ok(manifest)
    }

    /// Parses a manifest given as a JSON value (an uploaded body).
    pub fn from_value(value: &serde_json::Value) -> Result<Self, ManifestError> {
        let doc = serde_json::to_vec(value).map_err(|e| ManifestError::new(".", e.to_string()))?;
        Self::parse(&doc)
    }

    /// The manifest as stored (compact JSON).
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and lists always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The action named `name`.
    pub fn action(&self, name: &str) -> Option<&AppAction> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// True when this manifest is for the bot with `id` as its application
    /// id or its user id (exact match only).
    pub fn is_for_bot(&self, id: &str) -> bool {
        self.app.discord_application_id.as_deref() == Some(id)
            || self.app.discord_bot_user_id.as_deref() == Some(id)
    }

    /// Checks what the types do not: charsets, sizes, uniqueness.
    fn validate(&self) -> Result<(), ManifestError> {
        if self.schema != SCHEMA_VERSION {
            return Err(ManifestError::new(
                "schema",
                format!("this hearth reads manifests of schema {SCHEMA_VERSION}"),
            ));
        }
        check_name("app.name", &self.app.name, 24, false)?;
        let ids = [
            (
                "app.discord_application_id",
                &self.app.discord_application_id,
            ),
            ("app.discord_bot_user_id", &self.app.discord_bot_user_id),
        ];
        for (path, id) in ids {
            if let Some(id) = id
                && (id.is_empty() || id.len() > 20 || !id.bytes().all(|b| b.is_ascii_digit()))
            {
                return Err(ManifestError::new(
                    path,
                    "must be a Discord id: 1 to 20 digits",
                ));
            }
        }
        if ids.iter().all(|(_, id)| id.is_none()) {
            return Err(ManifestError::new(
                "app",
                "needs discord_application_id or discord_bot_user_id: a manifest applies only to \
                 the bot they name",
            ));
        }
        if let Some(home) = &self.app.homepage {
            let ok = home.chars().count() <= MAX_HOMEPAGE
                && home
                    .strip_prefix("https://")
                    .is_some_and(|rest| !rest.is_empty() && !rest.chars().any(char::is_whitespace));
            if !ok {
                return Err(ManifestError::new(
                    "app.homepage",
                    format!("must be an https:// address of at most {MAX_HOMEPAGE} characters"),
                ));
            }
        }
        let v = &self.version;
        let version_ok = v.len() <= 32
            && v.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b));
        if !version_ok {
            return Err(ManifestError::new(
                "version",
                "must be 1 to 32 letters, digits, '.', '+' or '-', starting with a letter or digit",
            ));
        }
        if self.actions.is_empty() || self.actions.len() > MAX_ACTIONS {
            return Err(ManifestError::new(
                "actions",
                format!("must list 1 to {MAX_ACTIONS} actions"),
            ));
        }
        let mut names = HashSet::new();
        let mut prefixes = HashSet::new();
        for (i, action) in self.actions.iter().enumerate() {
            let at = |field: &str| format!("actions[{i}].{field}");
            check_name(&at("name"), &action.name, 24, false)?;
            if !names.insert(action.name.as_str()) {
                return Err(ManifestError::new(at("name"), "is declared twice"));
            }
            let n = action.description.chars().count();
            if n == 0 || n > MAX_DESCRIPTION {
                return Err(ManifestError::new(
                    at("description"),
                    format!("must be 1 to {MAX_DESCRIPTION} characters"),
                ));
            }
            let p = &action.trigger.prefix;
            let n = p.chars().count();
            if n == 0
                || n > MAX_PREFIX
                || p.chars()
                    .any(|c| c.is_whitespace() || c.is_control() || c == '@')
            {
                return Err(ManifestError::new(
                    at("trigger.prefix"),
                    format!(
                        "must be 1 to {MAX_PREFIX} characters without spaces, control characters \
                         or '@'"
                    ),
                ));
            }
            if !prefixes.insert(p.as_str()) {
                return Err(ManifestError::new(
                    at("trigger.prefix"),
                    "is the prefix of another action",
                ));
            }
            if action.args.len() > MAX_ARGS {
                return Err(ManifestError::new(
                    at("args"),
                    format!("at most {MAX_ARGS} arguments"),
                ));
            }
            let mut arg_names = HashSet::new();
            for (j, arg) in action.args.iter().enumerate() {
                check_name(&at(&format!("args[{j}].name")), &arg.name, 32, true)?;
                if !arg_names.insert(arg.name.as_str()) {
                    return Err(ManifestError::new(
                        at(&format!("args[{j}].name")),
                        "is declared twice",
                    ));
                }
                if arg
                    .description
                    .as_ref()
                    .is_some_and(|d| d.chars().count() > MAX_ARG_DESCRIPTION)
                {
                    return Err(ManifestError::new(
                        at(&format!("args[{j}].description")),
                        format!("at most {MAX_ARG_DESCRIPTION} characters"),
                    ));
                }
            }
            if action.permissions.len() > MAX_PERMISSIONS {
                return Err(ManifestError::new(
                    at("permissions"),
                    format!("at most {MAX_PERMISSIONS} permissions"),
                ));
            }
            for (j, perm) in action.permissions.iter().enumerate() {
                let ok = perm.len() <= 64
                    && perm.bytes().next().is_some_and(|b| b.is_ascii_uppercase())
                    && perm
                        .bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
                if !ok {
                    return Err(ManifestError::new(
                        at(&format!("permissions[{j}]")),
                        "must be a Discord permission name such as MANAGE_MESSAGES",
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Checks a name: a lower-case letter, then lower-case letters, digits and
/// `-` (or `_` for arguments), `max` characters at most. App and action
/// names never hold `_`, so `app__<app>__<action>` splits one way only.
fn check_name(path: &str, name: &str, max: usize, underscore: bool) -> Result<(), ManifestError> {
    let sep = if underscore { b'_' } else { b'-' };
    let ok = name.len() <= max
        && name.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == sep);
    if ok {
        return Ok(());
    }
    Err(ManifestError::new(
        path,
        format!(
            "must be a lower-case letter, then up to {} lower-case letters, digits or '{}'",
            max - 1,
            sep as char
        ),
    ))
}
