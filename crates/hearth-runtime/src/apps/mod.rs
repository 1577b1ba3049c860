//! Other bots of a Discord server, by their app manifests: an admin
//! imports a manifest (uploaded, or fetched from an HTTPS address through
//! the same SSRF guard as `web_fetch`), approves a version (recording the
//! consent for hearth to send its public commands), and enables it in a
//! guild. Enabled actions then become tools (`app__<app>__<action>`, see
//! [`tools`]) and deterministic triggers ([`dispatch`]) for that guild's
//! runs and mentions. Every change, dispatch and dry run is audited,
//! never with the message text.

pub mod dispatch;
pub(crate) mod tools;

use hearth_core::apps::{AppManifest, MAX_MANIFEST_BYTES};
use hearth_core::now_ms;
use hearth_core::records::AuditEvent;

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

pub use dispatch::{AppCommand, Dispatched, TriggerRequest};
/// The stored app records, for the surfaces that show them.
pub use hearth_store::{AppEnablement, AppVersionRecord, AppVersionStatus};

/// Where a manifest to import comes from.
#[derive(Debug, Clone)]
pub enum ManifestSource {
    /// The document itself (an upload).
    Document(serde_json::Value),
    /// An `https://` address to fetch it from.
    Url(String),
}

/// Every app version and where each is enabled.
#[derive(Debug, Clone, Default)]
pub struct AppsOverview {
    /// Every imported version, by app then import time.
    pub versions: Vec<AppVersionRecord>,
    /// Every guild's enabled versions.
    pub enablements: Vec<AppEnablement>,
}

/// Checks a Discord guild id: 1 to 20 digits.
pub fn check_guild_id(guild_id: &str) -> Result<()> {
    if !guild_id.is_empty() && guild_id.len() <= 20 && guild_id.bytes().all(|b| b.is_ascii_digit())
    {
        return Ok(());
    }
    Err(RuntimeError::InvalidInput(format!(
        "{guild_id:?} is not a Discord server (guild) id: 1 to 20 digits"
    )))
}

/// Checks an app name or version as given in a path: short printable
/// text (the store only holds validated names, so anything else is
/// simply unknown; this keeps messages and logs tidy).
pub fn check_label(field: &str, value: &str) -> Result<()> {
    if !value.is_empty()
        && value.len() <= 64
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.+".contains(&b))
    {
        return Ok(());
    }
    Err(RuntimeError::InvalidInput(format!(
        "{field} must be 1 to 64 letters, digits, '-', '_', '.' or '+'"
    )))
}

impl Runtime {
    pub(crate) async fn audit_app(
        &self,
        actor: &str,
        action: &str,
        target: String,
        scope: Option<String>,
    ) {
        let event = AuditEvent {
            at: now_ms(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            target,
            outcome: "ok".into(),
            capability: None,
            scope,
        };
        if let Err(e) = self.inner.store.append_audit(event).await {
            tracing::warn!(error = %e, action, "could not write an app change to the audit log");
        }
    }

    /// Imports a manifest as a pending version of its app, by `actor`.
    /// The same version imported again with the same content is the stored
    /// one; with other content it is a conflict (publish a new version).
    pub async fn import_app_manifest(
        &self,
        source: ManifestSource,
        actor: &str,
    ) -> Result<AppVersionRecord> {
        let manifest = match source {
            ManifestSource::Document(doc) => AppManifest::from_value(&doc),
            ManifestSource::Url(url) => {
                let allow_loopback = self.inner.live().config.apps.allow_loopback_urls;
                let body =
                    hearth_tools::web::fetch_document(&url, MAX_MANIFEST_BYTES, allow_loopback)
                        .await
                        .map_err(|e| {
                            RuntimeError::InvalidInput(format!("could not fetch the manifest: {e}"))
                        })?;
                AppManifest::parse(body.as_bytes())
            }
        }
        .map_err(|e| RuntimeError::InvalidManifest(format!("invalid manifest: {e}")))?;
        let json = manifest.to_json();
        let (app, version) = (&manifest.app.name, &manifest.version);
        let stored = self
            .inner
            .store
            .import_app_version(app, version, &json, actor, now_ms())
            .await?;
        if stored.manifest != json {
            return Err(RuntimeError::Conflict(format!(
                "{app} version {version} was imported already with other content; a version \
                 never changes: publish the manifest under a new version"
            )));
        }
        tracing::info!(app, version, "an app manifest was imported");
        self.audit_app(
            actor,
            "app.import",
            format!("app:{app} version:{version}"),
            None,
        )
        .await;
        Ok(stored)
    }

    /// Approves `version` of `app`, by `actor`: it may then be enabled,
    /// and the approver's consent for hearth to send its public
    /// `send_message` actions (no permissions needed) is recorded.
    pub async fn approve_app_version(
        &self,
        app: &str,
        version: &str,
        actor: &str,
    ) -> Result<AppVersionRecord> {
        check_label("app", app)?;
        check_label("version", version)?;
        let approved = self
            .inner
            .store
            .approve_app_version(app, version, actor, now_ms())
            .await?
            .ok_or_else(|| not_found(app, version))?;
        self.audit_app(
            actor,
            "app.approve",
            format!("app:{app} version:{version}"),
            None,
        )
        .await;
        self.refresh_app_tools().await;
        Ok(approved)
    }

    /// Every app version and every guild's enabled ones.
    pub async fn list_apps(&self) -> Result<AppsOverview> {
        Ok(AppsOverview {
            versions: self.inner.store.list_app_versions().await?,
            enablements: self.inner.store.list_app_enablements(None).await?,
        })
    }

    /// Enables `version` of `app` in a guild, by `actor` (replacing the
    /// version it had there). Only an approved version can be enabled: a
    /// pending one is a conflict (approve it first).
    pub async fn enable_app(
        &self,
        guild_id: &str,
        app: &str,
        version: &str,
        actor: &str,
    ) -> Result<AppEnablement> {
        check_guild_id(guild_id)?;
        check_label("app", app)?;
        check_label("version", version)?;
        let found = self
            .inner
            .store
            .app_version(app, version)
            .await?
            .ok_or_else(|| not_found(app, version))?;
        if found.status != AppVersionStatus::Approved {
            return Err(RuntimeError::Conflict(format!(
                "{app} version {version} is pending: approve it first (hearth apps approve {app} \
                 {version})"
            )));
        }
        let at = now_ms();
        self.inner
            .store
            .enable_app(guild_id, app, version, actor, at)
            .await?;
        self.audit_app(
            actor,
            "app.enable",
            format!("app:{app} version:{version}"),
            Some(format!("discord:guild:{guild_id}")),
        )
        .await;
        self.refresh_app_tools().await;
        Ok(AppEnablement {
            guild_id: guild_id.to_owned(),
            app: app.to_owned(),
            version: version.to_owned(),
            enabled_at: at,
            enabled_by: actor.to_owned(),
        })
    }

    /// Disables `app` in a guild, by `actor`; false when it was not enabled.
    pub async fn disable_app(&self, guild_id: &str, app: &str, actor: &str) -> Result<bool> {
        check_guild_id(guild_id)?;
        check_label("app", app)?;
        let disabled = self.inner.store.disable_app(guild_id, app).await?;
        if disabled {
            self.audit_app(
                actor,
                "app.disable",
                format!("app:{app}"),
                Some(format!("discord:guild:{guild_id}")),
            )
            .await;
            self.refresh_app_tools().await;
        }
        Ok(disabled)
    }
}

fn not_found(app: &str, version: &str) -> RuntimeError {
    RuntimeError::NotFound(format!(
        "no version {version} of app {app} was imported (see GET /v1/apps or hearth apps list)"
    ))
}
