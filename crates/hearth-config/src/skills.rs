//! `[skills]`: where SKILL.md skills are found beyond the standard folders,
//! which keys may sign executable skills, and how much of the system prompt
//! the skill list may take.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The prefix of a trusted public key.
pub const TRUSTED_KEY_PREFIX: &str = "ed25519:";

/// `[skills]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// More folders to search, after the standard ones (lowest precedence);
    /// a relative path is relative to the hearth home.
    pub extra_dirs: Vec<String>,
    /// Public keys whose signatures load executable skills:
    /// `ed25519:<base64 of the 32-byte key>`.
    #[serde(deserialize_with = "trusted_keys")]
    pub trusted_keys: Vec<String>,
    /// Dev mode: folders whose unsigned executable skills load anyway
    /// (relative to the hearth home when relative). Empty in strict mode.
    pub allowed_unsigned_dirs: Vec<String>,
    /// Characters of the system prompt the skill list may take; skills past
    /// it are listed by name only.
    pub prompt_budget_chars: usize,
    /// `[skills.config.<skill>]`: settings an executable skill's manifest
    /// `requires` (a skill missing one is refused), given to the skill's
    /// program as environment variables of those names.
    pub config: BTreeMap<String, BTreeMap<String, String>>,
    /// Seconds an executable skill has to start, and to answer each call.
    pub timeout_secs: u64,
    /// `[skills.executable.<skill>]`: how hearth treats an executable
    /// skill's tools.
    #[serde(deserialize_with = "executables")]
    pub executable: BTreeMap<String, ExecutableSkillConfig>,
}

/// `[skills.executable.<skill>]`: the operator's say over one executable
/// skill's tools, as `[mcp.servers.<name>]` has for a server's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutableSkillConfig {
    /// Tools (the skill's own names, without `<skill>__`) that are
    /// read-class; every other one is write-class unless
    /// `trust_annotations` is set.
    pub read_tools: Vec<String>,
    /// `true` lets the skill's own `readOnlyHint: true` make a tool
    /// read-class (annotations are the publisher's claim, not a check).
    pub trust_annotations: bool,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            extra_dirs: Vec::new(),
            trusted_keys: Vec::new(),
            allowed_unsigned_dirs: Vec::new(),
            prompt_budget_chars: 4000,
            config: BTreeMap::new(),
            timeout_secs: 60,
            executable: BTreeMap::new(),
        }
    }
}

/// Each `[skills.executable.<skill>]` checked: a skill name and its
/// `read_tools`.
fn executables<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, ExecutableSkillConfig>, D::Error> {
    let skills = BTreeMap::<String, ExecutableSkillConfig>::deserialize(d)?;
    for (name, skill) in &skills {
        let valid = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !name.starts_with('-')
            && !name.ends_with('-')
            && !name.contains("--");
        if !valid {
            return Err(serde::de::Error::custom(format!(
                "{name:?} is not a skill name: use the name in its hearth-skill.json \
                 (1 to 64 of a-z, 0-9 and single hyphens inside)"
            )));
        }
        crate::mcp::validate_read_tools(&format!("skill {name}"), name, &skill.read_tools)
            .map_err(serde::de::Error::custom)?;
    }
    Ok(skills)
}

/// Each trusted key checked by [`validate_trusted_key`], so a pasted key with
/// a typo fails at start rather than silently trusting nothing.
fn trusted_keys<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let keys = Vec::<String>::deserialize(d)?;
    for k in &keys {
        validate_trusted_key(k).map_err(serde::de::Error::custom)?;
    }
    Ok(keys)
}

/// Checks the form of a trusted key: `ed25519:` then the standard base64 of
/// 32 bytes (44 characters ending in `=`), as `hearth skills keygen` prints.
pub fn validate_trusted_key(key: &str) -> Result<(), String> {
    let hint = "write it as `hearth skills keygen` prints it: \"ed25519:<base64 of the 32-byte public key>\"";
    let Some(b64) = key.strip_prefix(TRUSTED_KEY_PREFIX) else {
        return Err(format!(
            "trusted key {key:?} does not start with \"ed25519:\"; {hint}"
        ));
    };
    let alphabet = |c: char| c.is_ascii_alphanumeric() || c == '+' || c == '/';
    let body = b64.strip_suffix('=').unwrap_or(b64);
    if b64.len() != 44 || body.len() != 43 || !body.chars().all(alphabet) {
        return Err(format!(
            "trusted key {key:?} is not a base64 ed25519 public key; {hint}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    const KEY: &str = "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=";

    #[test]
    fn skills_section_parses_with_defaults() {
        let c = load(&format!(
            "[skills]\nextra_dirs = [\"/opt/skills\"]\ntrusted_keys = [\"{KEY}\"]\n\
             [skills.config.weather]\nAPI_URL = \"http://x\"\n"
        ))
        .unwrap();
        assert_eq!(c.skills.extra_dirs, vec!["/opt/skills"]);
        assert_eq!(c.skills.trusted_keys, vec![KEY]);
        assert_eq!(c.skills.prompt_budget_chars, 4000);
        assert_eq!(c.skills.timeout_secs, 60);
        assert_eq!(c.skills.config["weather"]["API_URL"], "http://x");
        assert!(Config::default().skills.trusted_keys.is_empty());
    }

    #[test]
    fn executable_skills_trust_annotations_only_when_told() {
        let c = load(
            "[skills.executable.notes]\ntrust_annotations = true\n\
             [skills.executable.weather]\nread_tools = [\"forecast\"]\n",
        )
        .unwrap();
        let notes = &c.skills.executable["notes"];
        assert!(notes.trust_annotations);
        assert!(notes.read_tools.is_empty());
        let weather = &c.skills.executable["weather"];
        assert!(!weather.trust_annotations, "false by default");
        assert_eq!(weather.read_tools, ["forecast"]);
        for (toml, want) in [
            (
                "[skills.executable.Notes]\ntrust_annotations = true\n",
                "\"Notes\" is not a skill name",
            ),
            (
                "[skills.executable.notes]\nread_tools = [\"notes__echo\"]\n",
                "write \"echo\", not \"notes__echo\"",
            ),
            ("[skills.executable.notes]\ntrust = true\n", "trust"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains("skills.executable"), "{toml}: {err}");
            assert!(err.contains(want), "{toml}: {err}");
        }
    }

    #[test]
    fn a_malformed_trusted_key_names_the_key_path() {
        for bad in [
            "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
            "ed25519:short=",
            "ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHUR!=",
        ] {
            let err = load(&format!("[skills]\ntrusted_keys = [\"{bad}\"]\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains("skills.trusted_keys"), "{err}");
            assert!(err.contains("keygen"), "{err}");
        }
        let err = load("[skills]\nextra_dir = []\n").unwrap_err().to_string();
        assert!(err.contains("extra_dir"), "{err}");
    }
}
