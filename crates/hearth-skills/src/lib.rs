//! hearth-skills: SKILL.md skills and signed executable skills.
//!
//! Owns discovery (the standard folders, precedence, real paths kept inside
//! their root), SKILL.md parsing and eligibility, the `skill_read` and
//! `skill_file` tools, the skill list for the system prompt, and
//! `hearth-skill.json` manifests: canonical form, ed25519 signatures, file
//! hashes. It never runs a skill's install steps or programs: a loaded
//! executable skill is only described ([`ExecutableSkill`]) for the MCP
//! client to start. It reads no environment variables itself: the caller
//! passes the [`Host`] facts.

pub mod catalog;
pub mod discover;
pub mod frontmatter;
pub mod invoke;
pub mod manifest;
pub mod read;
pub mod signing;
pub mod tools;

use std::path::Path;

pub use catalog::{Catalog, ExecutableSkill, Host, Skill, Skills, SkillsOptions};
pub use discover::{Root, Source};
pub use frontmatter::Problem;
pub use manifest::{MANIFEST, Manifest, Trust};
pub use signing::{PrivateKey, TrustedKey};

/// The version executable skills' `hearth` ranges are checked against.
pub const HEARTH_VERSION: &str = env!("CARGO_PKG_VERSION");

/// A skill's file name.
pub const SKILL_MD: &str = "SKILL.md";

/// What can go wrong with skills.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// An executable skill that must not load, and why.
    #[error("{0}")]
    Refused(String),
    /// A key that cannot be used.
    #[error("key {0}")]
    Key(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// The result of this crate's operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Checks a skill name: 1 to 64 of `a-z 0-9 -`, not starting or ending with
/// `-`, no `--` (the Agent Skills spec). It is used in tool arguments and
/// `/name` invocations.
pub fn check_name(name: &str) -> std::result::Result<(), String> {
    let valid = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a skill name: use 1 to 64 of a-z, 0-9 and single hyphens inside"
        ))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn names() {
        for ok in ["a", "pdf-tools", "x2", &"a".repeat(64)] {
            assert_eq!(super::check_name(ok), Ok(()), "{ok}");
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a b", "é", &"a".repeat(65)] {
            assert!(super::check_name(bad).is_err(), "{bad}");
        }
    }
}
