//! `[permissions]`: the default preset, the admins, and the permission
//! modes (which allowed calls run without asking).

use serde::{Deserialize, Serialize};

/// A permission preset by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PresetName {
    /// Nothing beyond tools anyone may use.
    None,
    /// Memory and web tools.
    Member,
    /// Member, plus jobs and skills.
    Trusted,
    /// Everything.
    Admin,
}

/// A permission mode by name (see hearth-core's `PermissionMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ModeName {
    /// No tools are offered.
    Deny,
    /// Only read-class tools are offered; the model answers with a plan.
    Plan,
    /// Every write-class call asks first.
    #[default]
    Ask,
    /// Calls of the `edit_tools` run without asking; other writes ask.
    AcceptEdits,
    /// Every allowed write runs without asking, but the `always_ask` ones.
    Auto,
    /// Nothing asks (never a configured default: it expires).
    Bypass,
}

impl ModeName {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Plan => "plan",
            Self::Ask => "ask",
            Self::AcceptEdits => "accept_edits",
            Self::Auto => "auto",
            Self::Bypass => "bypass",
        }
    }
}

/// `[permissions]`: who may do what, and what runs without asking.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// What every user may do.
    pub default_preset: PresetName,
    /// User keys that hold every capability.
    pub admins: Vec<String>,
    /// The permission mode of a thread nobody set one on (`ask`); a
    /// channel's `default_mode` overrides it there. `bypass` is refused.
    pub default_mode: ModeName,
    /// Globs over tool names: the write-class tools `accept_edits` runs
    /// without asking (default: the reference filesystem MCP server's
    /// writing tools).
    pub edit_tools: Vec<String>,
    /// Globs over tool names: write-class tools that ask even in
    /// `accept_edits` and `auto` (default `memory_forget`, `cancel_job`).
    pub always_ask: Vec<String>,
    /// Minutes after which `bypass` falls back to `ask` (default 60).
    pub bypass_minutes: u64,
}

impl Default for PermissionsConfig {
    fn default() -> Self {
        Self {
            default_preset: PresetName::Member,
            admins: Vec::new(),
            default_mode: ModeName::Ask,
            edit_tools: [
                "*__write_file",
                "*__edit_file",
                "*__create_directory",
                "*__move_file",
            ]
            .map(String::from)
            .to_vec(),
            always_ask: ["memory_forget", "cancel_job"].map(String::from).to_vec(),
            bypass_minutes: 60,
        }
    }
}

/// The first mistake in `[permissions]`' mode keys and the channels'
/// `default_mode`, as `(key, message)`.
pub(crate) fn validate(
    p: &PermissionsConfig,
    channel_modes: &[(&str, Option<ModeName>)],
) -> Result<(), (String, String)> {
    let bypass = "`bypass` cannot be a default: it must be set on a thread by someone holding \
                  permissions.bypass, and it expires; use `auto` for the most a default allows";
    if p.default_mode == ModeName::Bypass {
        return Err(("permissions.default_mode".into(), bypass.into()));
    }
    for (name, mode) in channel_modes {
        if *mode == Some(ModeName::Bypass) {
            return Err((format!("channels.{name}.default_mode"), bypass.into()));
        }
    }
    if p.bypass_minutes == 0 {
        return Err((
            "permissions.bypass_minutes".into(),
            "must be at least 1 (minutes before `bypass` falls back to `ask`; default 60)".into(),
        ));
    }
    for (key, globs) in [
        ("permissions.edit_tools", &p.edit_tools),
        ("permissions.always_ask", &p.always_ask),
    ] {
        if let Some(g) = globs.iter().find(|g| g.trim().is_empty()) {
            return Err((
                key.into(),
                format!(
                    "{g:?} is an empty glob; give tool names or globs such as \"*__write_file\""
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    fn load(toml: &str) -> Result<crate::Config, crate::ConfigError> {
        crate::load_str(toml, "/h/hearth.toml", Vec::new())
    }

    #[test]
    fn mode_keys_have_their_defaults_and_are_checked() {
        let c = load("").unwrap();
        assert_eq!(c.permissions.default_mode, super::ModeName::Ask);
        assert_eq!(c.permissions.bypass_minutes, 60);
        assert_eq!(c.permissions.always_ask, ["memory_forget", "cancel_job"]);
        assert!(
            c.permissions
                .edit_tools
                .contains(&"*__edit_file".to_owned())
        );
        let c = load(
            "[permissions]\ndefault_mode = \"accept_edits\"\nedit_tools = [\"fs__*\"]\n\
             [channels.telegram]\ndefault_mode = \"plan\"\n",
        )
        .unwrap();
        assert_eq!(c.permissions.default_mode, super::ModeName::AcceptEdits);
        assert_eq!(
            c.channels.telegram.default_mode,
            Some(super::ModeName::Plan)
        );
        for (toml, key) in [
            (
                "[permissions]\ndefault_mode = \"bypass\"\n",
                "permissions.default_mode",
            ),
            (
                "[channels.slack]\ndefault_mode = \"bypass\"\n",
                "channels.slack.default_mode",
            ),
            (
                "[permissions]\nbypass_minutes = 0\n",
                "permissions.bypass_minutes",
            ),
            (
                "[permissions]\nalways_ask = [\"\"]\n",
                "permissions.always_ask",
            ),
            ("[permissions]\ndefault_mode = \"yolo\"\n", "default_mode"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
    }
}
