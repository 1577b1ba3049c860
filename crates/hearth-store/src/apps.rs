//! Other bots' app manifests: versions an admin imported (pending, then
//! approved), and which version each Discord guild has enabled.

use hearth_core::Timestamp;

use crate::error::Result;

/// Where a manifest version stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppVersionStatus {
    /// Imported, not yet reviewed: it can be neither enabled nor used.
    Pending,
    /// Approved by an admin: it can be enabled in a guild.
    Approved,
}

impl AppVersionStatus {
    /// The status as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
        }
    }

    /// The status stored as `s`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            _ => None,
        }
    }
}

/// One imported version of an app's manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppVersionRecord {
    /// The app's name.
    pub app: String,
    /// The manifest's version.
    pub version: String,
    /// The manifest as imported (validated JSON).
    pub manifest: String,
    /// Pending or approved.
    pub status: AppVersionStatus,
    /// Whether the approver consented to hearth sending this version's
    /// public `send_message` actions into channels.
    pub public_dispatch_consent: bool,
    /// When it was imported.
    pub imported_at: Timestamp,
    /// Who imported it.
    pub imported_by: String,
    /// When it was approved.
    pub approved_at: Option<Timestamp>,
    /// Who approved it.
    pub approved_by: Option<String>,
}

/// A guild's enabled version of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppEnablement {
    /// The Discord guild id.
    pub guild_id: String,
    /// The app.
    pub app: String,
    /// The version enabled.
    pub version: String,
    /// When it was enabled.
    pub enabled_at: Timestamp,
    /// Who enabled it.
    pub enabled_by: String,
}

/// App manifests and their guilds.
#[async_trait::async_trait]
pub trait AppStore: Send + Sync + 'static {
    /// Stores a newly imported version (pending, no consent) unless the
    /// app already has this version; returns the stored record either way
    /// (the caller compares manifests: a version is never rewritten).
    async fn import_app_version(
        &self,
        app: &str,
        version: &str,
        manifest: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<AppVersionRecord>;

    /// Approves a version, recording the public-dispatch consent; a version
    /// approved already keeps its first approval. `None` when unknown.
    async fn approve_app_version(
        &self,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<Option<AppVersionRecord>>;

    /// One version, if imported.
    async fn app_version(&self, app: &str, version: &str) -> Result<Option<AppVersionRecord>>;

    /// Every version of every app, by app then import time.
    async fn list_app_versions(&self) -> Result<Vec<AppVersionRecord>>;

    /// Enables `version` of `app` in a guild, replacing the version it had.
    async fn enable_app(
        &self,
        guild_id: &str,
        app: &str,
        version: &str,
        by: &str,
        at: Timestamp,
    ) -> Result<()>;

    /// Disables `app` in a guild. False when it was not enabled there.
    async fn disable_app(&self, guild_id: &str, app: &str) -> Result<bool>;

    /// The apps enabled in `guild_id` (every guild for `None`), by guild
    /// then app.
    async fn list_app_enablements(&self, guild_id: Option<&str>) -> Result<Vec<AppEnablement>>;
}
