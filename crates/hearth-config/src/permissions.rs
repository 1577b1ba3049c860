//! `[permissions]`: the default preset and the admins.

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

/// `[permissions]`: who may do what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PermissionsConfig {
    /// What every user may do.
    pub default_preset: PresetName,
    /// User keys that hold every capability.
    pub admins: Vec<String>,
}

impl Default for PermissionsConfig {
    fn default() -> Self {
        Self {
            default_preset: PresetName::Member,
            admins: Vec::new(),
        }
    }
}
