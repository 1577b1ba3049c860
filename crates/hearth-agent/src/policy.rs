//! The permission model's decisions: pure and synchronous over data the
//! caller loads (the configuration, the user's roles, and the grants of the
//! user's subjects in the scope chain).
//!
//! A user's capabilities are the union of the configured default preset and
//! the grants to the user and to their roles in the scope (or globally);
//! configured admins hold every capability. A check answers which of these
//! allowed it, in that precedence: admin, then preset, then grant.
//!
//! Loading grants for a check:
//!
//! ```text
//! let chain = scope_chain(scope)?;            // [scope, "global"] or ["global"]
//! let subjects = subjects(user_key, roles);   // ["user:<key>", "role:<id>", ...]
//! let grants = store.grants_for(&subjects, &chain).await?;
//! let decision = decide(&cfg, user_key, roles, capability, &grants);
//! ```

use std::fmt;

use hearth_store::Grant;
use serde::Serialize;

/// Every capability hearth checks, in a stable order.
pub const CAPABILITIES: &[&str] = &[
    "memory.read",
    "memory.write",
    "web.fetch",
    "web.search",
    "permissions.manage",
    "confirmations.resolve_any",
    "agent.analytics",
    "llm.configure",
    "jobs.manage",
    "skills.read",
    "skills.use",
    "permissions.bypass",
    "agents.delegate",
];

/// The scope of grants that count everywhere.
pub const GLOBAL_SCOPE: &str = "global";

/// The prefix of a capability name that grants a whole preset.
pub const PRESET_PREFIX: &str = "preset:";

/// Longest subject or scope accepted, in characters.
pub const MAX_NAME_CHARS: usize = 256;

const MEMBER: &[&str] = &[
    "memory.read",
    "memory.write",
    "web.fetch",
    "web.search",
    "skills.read",
    "agents.delegate",
];
const TRUSTED: &[&str] = &[
    "memory.read",
    "memory.write",
    "web.fetch",
    "web.search",
    "skills.read",
    "agents.delegate",
    "jobs.manage",
    "skills.use",
];

/// A named set of capabilities: the default every user holds, or a set
/// granted at once (`preset:<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// No capability.
    None,
    /// `memory.read`, `memory.write`, `web.fetch`, `web.search`, `skills.read`,
    /// `agents.delegate` (the default).
    #[default]
    Member,
    /// `member` plus `jobs.manage` and `skills.use`.
    Trusted,
    /// Every capability.
    Admin,
}

impl Preset {
    /// Every preset, from least to most.
    pub const ALL: [Preset; 4] = [Self::None, Self::Member, Self::Trusted, Self::Admin];

    /// The preset named `name` (`none`, `member`, `trusted`, `admin`).
    pub fn parse(name: &str) -> Option<Preset> {
        Self::ALL.into_iter().find(|p| p.as_str() == name)
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Member => "member",
            Self::Trusted => "trusted",
            Self::Admin => "admin",
        }
    }

    /// The capabilities it holds.
    pub fn capabilities(self) -> &'static [&'static str] {
        match self {
            Self::None => &[],
            Self::Member => MEMBER,
            Self::Trusted => TRUSTED,
            Self::Admin => CAPABILITIES,
        }
    }

    /// Whether it holds `capability`.
    pub fn contains(self, capability: &str) -> bool {
        self.capabilities().contains(&capability)
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a grant gives: one capability or a whole preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CapabilityName {
    /// One of [`CAPABILITIES`].
    Capability(&'static str),
    /// `preset:<name>`.
    Preset(Preset),
}

impl CapabilityName {
    /// Whether it gives `capability`.
    pub fn includes(self, capability: &str) -> bool {
        match self {
            Self::Capability(name) => name == capability,
            Self::Preset(preset) => preset.contains(capability),
        }
    }
}

impl fmt::Display for CapabilityName {
    /// The canonical name, as stored in a grant.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Capability(name) => f.write_str(name),
            Self::Preset(preset) => write!(f, "{PRESET_PREFIX}{preset}"),
        }
    }
}

/// Who a grant is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Subject {
    /// `user:<user_key>`.
    User(String),
    /// `role:<id>`.
    Role(String),
}

impl fmt::Display for Subject {
    /// The canonical form, as stored in a grant.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User(key) => write!(f, "user:{key}"),
            Self::Role(id) => write!(f, "role:{id}"),
        }
    }
}

/// A name that is not valid in the permission model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Neither a capability nor `preset:<name>`.
    #[error("unknown capability {0:?}; known: {known}", known = known_capability_names())]
    UnknownCapability(String),
    /// Not `user:<user_key>` or `role:<id>`.
    #[error("invalid subject {subject:?}: {reason}; expected user:<user_key> or role:<id>")]
    BadSubject {
        /// The subject given.
        subject: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Not `global` or `<channel>:<kind>:<id>`.
    #[error("invalid scope {scope:?}: {reason}; expected global or <channel>:<kind>:<id>")]
    BadScope {
        /// The scope given.
        scope: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Every name [`parse_capability`] accepts, comma-separated.
pub fn known_capability_names() -> String {
    let presets = Preset::ALL.map(|p| format!("{PRESET_PREFIX}{p}"));
    CAPABILITIES
        .iter()
        .copied()
        .chain(presets.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parses a grantable capability name: one of [`CAPABILITIES`] or
/// `preset:<name>` (`none`, `member`, `trusted`, `admin`). Exact and
/// case-sensitive.
pub fn parse_capability(name: &str) -> Result<CapabilityName, PolicyError> {
    if let Some(known) = CAPABILITIES.iter().find(|c| **c == name) {
        return Ok(CapabilityName::Capability(known));
    }
    name.strip_prefix(PRESET_PREFIX)
        .and_then(Preset::parse)
        .map(CapabilityName::Preset)
        .ok_or_else(|| PolicyError::UnknownCapability(name.to_owned()))
}

/// Parses a name that can be granted: what [`parse_capability`] accepts, or
/// one of `extra`, the capabilities this hearth's tool sources declare
/// beyond [`CAPABILITIES`] (a configured MCP server's `mcp.<server>`), each
/// with the least preset holding it. Returns the canonical name, as stored
/// in a grant.
pub fn parse_grantable(
    name: &str,
    extra: &std::collections::BTreeMap<String, Preset>,
) -> Result<String, PolicyError> {
    match parse_capability(name) {
        Ok(c) => Ok(c.to_string()),
        Err(_) if extra.contains_key(name) => Ok(name.to_owned()),
        Err(e) => Err(e),
    }
}

/// Parses `user:<user_key>` or `role:<id>`: the part after the prefix is
/// non-empty, nothing contains a control character, and the whole is at most
/// [`MAX_NAME_CHARS`] characters.
pub fn parse_subject(s: &str) -> Result<Subject, PolicyError> {
    let bad = |reason| PolicyError::BadSubject {
        subject: s.to_owned(),
        reason,
    };
    if s.chars().count() > MAX_NAME_CHARS {
        return Err(bad("longer than 256 characters"));
    }
    if s.chars().any(char::is_control) {
        return Err(bad("contains a control character"));
    }
    let subject = if let Some(key) = s.strip_prefix("user:") {
        Subject::User(key.to_owned())
    } else if let Some(id) = s.strip_prefix("role:") {
        Subject::Role(id.to_owned())
    } else {
        return Err(bad("unknown subject kind"));
    };
    match &subject {
        Subject::User(id) | Subject::Role(id) if id.is_empty() => Err(bad("empty id")),
        _ => Ok(subject),
    }
}

/// Checks a scope's syntax: `global`, or `<channel>:<kind>:<id>` where channel
/// and kind are non-empty lowercase ASCII letters, digits, `_` or `-`, the id
/// is non-empty, nothing contains whitespace or a control character, and the
/// whole is at most [`MAX_NAME_CHARS`] characters.
pub fn validate_scope(scope: &str) -> Result<(), PolicyError> {
    if scope == GLOBAL_SCOPE {
        return Ok(());
    }
    let bad = |reason| PolicyError::BadScope {
        scope: scope.to_owned(),
        reason,
    };
    if scope.chars().count() > MAX_NAME_CHARS {
        return Err(bad("longer than 256 characters"));
    }
    if scope.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad("contains whitespace or a control character"));
    }
    let mut parts = scope.splitn(3, ':');
    let (Some(channel), Some(kind), Some(id)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("not global and not three parts"));
    };
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
    };
    if !word(channel) || !word(kind) {
        return Err(bad(
            "channel and kind must be lowercase letters, digits, _ or -",
        ));
    }
    if id.is_empty() {
        return Err(bad("empty id"));
    }
    Ok(())
}

/// The scopes whose grants count for a check in `scope`: `["global"]` for
/// `global`, `[scope, "global"]` otherwise. Errors when the scope is invalid
/// (see [`validate_scope`]).
pub fn scope_chain(scope: &str) -> Result<Vec<String>, PolicyError> {
    validate_scope(scope)?;
    if scope == GLOBAL_SCOPE {
        Ok(vec![GLOBAL_SCOPE.to_owned()])
    } else {
        Ok(vec![scope.to_owned(), GLOBAL_SCOPE.to_owned()])
    }
}

/// The grant subjects of a user: `user:<user_key>`, then `role:<id>` for each
/// role, in order.
pub fn subjects(user_key: &str, roles: &[String]) -> Vec<String> {
    std::iter::once(Subject::User(user_key.to_owned()).to_string())
        .chain(roles.iter().map(|r| Subject::Role(r.clone()).to_string()))
        .collect()
}

/// The `[permissions]` configuration a decision needs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyConfig {
    /// What every user holds (`member` unless configured).
    pub default_preset: Preset,
    /// User keys that hold every capability.
    pub admins: Vec<String>,
}

impl PolicyConfig {
    /// Whether `user_key` is a configured admin.
    pub fn is_admin(&self, user_key: &str) -> bool {
        self.admins.iter().any(|a| a == user_key)
    }
}

/// What allowed a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// The user is an admin.
    Admin,
    /// The default preset holds the capability.
    Preset,
    /// A grant to the user or one of their roles (a granted preset included).
    Grant,
}

impl Via {
    /// The wire name: `admin`, `preset` or `grant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Preset => "preset",
            Self::Grant => "grant",
        }
    }
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The answer to a check; serialises as `{"allowed": bool, "via":
/// "admin"|"preset"|"grant"|null}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Decision {
    /// Whether the user holds the capability.
    pub allowed: bool,
    /// What allowed it; `None` exactly when not allowed.
    pub via: Option<Via>,
}

impl Decision {
    /// Not allowed.
    pub const DENIED: Decision = Decision {
        allowed: false,
        via: None,
    };

    fn allowed(via: Via) -> Decision {
        Decision {
            allowed: true,
            via: Some(via),
        }
    }
}

/// Whether `user_key` (with `roles`) holds `capability`, and why.
///
/// In precedence order: a configured admin holds everything (`Admin`); the
/// default preset's capabilities (`Preset`); a grant of the capability, or of
/// a preset containing it, to `user:<user_key>` or one of `role:<id>`
/// (`Grant`); otherwise denied.
///
/// `grants` are the grants loaded for [`subjects`] in the [`scope_chain`] of
/// the checked scope; grants to other subjects are ignored, as are grants of
/// names this build does not know. A `capability` that is not one of
/// [`CAPABILITIES`] is denied to everyone, admins included, so a misspelt
/// check fails closed.
pub fn decide(
    cfg: &PolicyConfig,
    user_key: &str,
    roles: &[String],
    capability: &str,
    grants: &[Grant],
) -> Decision {
    if !CAPABILITIES.contains(&capability) {
        return Decision::DENIED;
    }
    if cfg.is_admin(user_key) {
        return Decision::allowed(Via::Admin);
    }
    if cfg.default_preset.contains(capability) {
        return Decision::allowed(Via::Preset);
    }
    let holders = subjects(user_key, roles);
    let granted = grants.iter().any(|g| {
        holders.contains(&g.subject)
            && parse_capability(&g.capability).is_ok_and(|c| c.includes(capability))
    });
    if granted {
        Decision::allowed(Via::Grant)
    } else {
        Decision::DENIED
    }
}

/// [`decide`] for a capability outside [`CAPABILITIES`] that `least` and every
/// larger preset hold (an MCP server's `mcp.<server>`, whose preset is
/// configured with the server): an admin holds it; the default preset when it
/// is at least `least`; a grant of such a preset, or of the capability itself.
pub fn decide_extra(
    cfg: &PolicyConfig,
    user_key: &str,
    roles: &[String],
    capability: &str,
    least: Preset,
    grants: &[Grant],
) -> Decision {
    let rank = |p: Preset| Preset::ALL.iter().position(|q| *q == p).unwrap_or(0);
    if cfg.is_admin(user_key) {
        return Decision::allowed(Via::Admin);
    }
    if rank(cfg.default_preset) >= rank(least) {
        return Decision::allowed(Via::Preset);
    }
    let holders = subjects(user_key, roles);
    let granted = grants.iter().any(|g| {
        holders.contains(&g.subject)
            && (g.capability == capability
                || g.capability
                    .strip_prefix(PRESET_PREFIX)
                    .and_then(Preset::parse)
                    .is_some_and(|p| rank(p) >= rank(least)))
    });
    if granted {
        Decision::allowed(Via::Grant)
    } else {
        Decision::DENIED
    }
}
