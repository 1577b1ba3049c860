//! Other bots' app manifests (`/v1/apps`, admin only): import a manifest
//! (uploaded, or fetched from an HTTPS address through the SSRF guard),
//! approve a version (recording the consent for hearth to send its public
//! commands), enable it in a Discord server or disable it, and list it all.
//!
//! Enabling a version that is not approved is 409 `conflict` (the version
//! exists, but its state forbids the change: approve it first), as is
//! importing a version again with other content.

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use hearth_core::rfc3339;
use hearth_runtime::apps::ManifestSource;
use hearth_runtime::apps::{AppEnablement, AppVersionRecord};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::auth::Caller;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// `POST /v1/apps/manifests` by address.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ManifestUrl {
    /// An `https://` address of the manifest (at most 64 KiB; no redirects).
    pub url: String,
}

/// `POST /v1/apps/manifests`: the manifest itself
/// (`shared/app-manifest.v1.schema.json`), or `{"url": "https://..."}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ImportRequest {
    /// Fetch it from an address.
    Url(ManifestUrl),
    /// The manifest document.
    #[schema(value_type = Object)]
    Manifest(Value),
}

/// `POST /v1/apps/manifests` answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ImportedApp {
    /// The app's name.
    pub app: String,
    /// The version imported.
    pub version: String,
    /// `pending` until an admin approves it (`approved` if it already was).
    pub status: String,
}

/// One version of an app.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AppVersionView {
    /// The app's name.
    pub app: String,
    /// The version.
    pub version: String,
    /// `pending` or `approved`.
    pub status: String,
    /// Whether hearth may send this version's public `send_message`
    /// actions (recorded at approval).
    pub public_dispatch_consent: bool,
    /// When it was imported (RFC 3339).
    pub imported_at: String,
    /// Who imported it.
    pub imported_by: String,
    /// When it was approved.
    pub approved_at: Option<String>,
    /// Who approved it.
    pub approved_by: Option<String>,
    /// The manifest, for review.
    #[schema(value_type = Object)]
    pub manifest: Value,
}

impl From<AppVersionRecord> for AppVersionView {
    fn from(r: AppVersionRecord) -> Self {
        Self {
            manifest: serde_json::from_str(&r.manifest).unwrap_or(Value::Null),
            app: r.app,
            version: r.version,
            status: r.status.as_str().to_owned(),
            public_dispatch_consent: r.public_dispatch_consent,
            imported_at: rfc3339(r.imported_at),
            imported_by: r.imported_by,
            approved_at: r.approved_at.map(rfc3339),
            approved_by: r.approved_by,
        }
    }
}

/// An app's version enabled in a Discord server.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EnablementView {
    /// The Discord server (guild) id.
    pub guild_id: String,
    /// The app.
    pub app: String,
    /// The version enabled.
    pub version: String,
    /// When (RFC 3339).
    pub enabled_at: String,
    /// Who enabled it.
    pub enabled_by: String,
}

impl From<AppEnablement> for EnablementView {
    fn from(e: AppEnablement) -> Self {
        Self {
            guild_id: e.guild_id,
            app: e.app,
            version: e.version,
            enabled_at: rfc3339(e.enabled_at),
            enabled_by: e.enabled_by,
        }
    }
}

/// One app and its versions.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AppView {
    /// The app's name.
    pub name: String,
    /// Its versions, oldest import first.
    pub versions: Vec<AppVersionView>,
}

/// `GET /v1/apps`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct AppsList {
    /// Every app, by name.
    pub apps: Vec<AppView>,
    /// Every Discord server's enabled versions.
    pub enablements: Vec<EnablementView>,
}

/// `PUT /v1/apps/{app}/guilds/{guild_id}`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnableRequest {
    /// The approved version to enable.
    pub version: String,
}

/// Imports a manifest as a pending version of its app. A malformed one is
/// 400 `invalid_manifest`, the message naming the field.
#[utoipa::path(post, path = "/v1/apps/manifests", tag = "apps", request_body = ImportRequest,
    responses((status = 201, description = "Imported (pending approval)", body = ImportedApp),
        (status = 400, description = "A malformed manifest (`invalid_manifest`, naming the field), or an address refused or not fetched", body = crate::dto::ErrorBody),
        (status = 403, description = "Not an operator token", body = crate::dto::ErrorBody),
        (status = 409, description = "This version was imported already with other content", body = crate::dto::ErrorBody)))]
pub async fn import_manifest(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiJson(body): ApiJson<ImportRequest>,
) -> Result<(StatusCode, Json<ImportedApp>), ApiError> {
    let source = match body {
        ImportRequest::Url(u) => ManifestSource::Url(u.url),
        ImportRequest::Manifest(doc) => ManifestSource::Document(doc),
    };
    let stored = st
        .runtime
        .import_app_manifest(source, &caller.operator_key())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(ImportedApp {
            app: stored.app,
            version: stored.version,
            status: stored.status.as_str().to_owned(),
        }),
    ))
}

/// Approves a version: it may then be enabled, and hearth may send its
/// public `send_message` actions (the consent is recorded).
#[utoipa::path(post, path = "/v1/apps/{app}/versions/{version}/approve", tag = "apps",
    params(("app" = crate::schemas::AppLabel, Path, description = "The app's name"),
        ("version" = crate::schemas::AppLabel, Path, description = "The version")),
    responses((status = 200, description = "The version, approved", body = AppVersionView),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 403, description = "Not an operator token", body = crate::dto::ErrorBody),
        (status = 404, description = "No such version", body = crate::dto::ErrorBody)))]
pub async fn approve_version(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((app, version)): ApiPath<(String, String)>,
) -> Result<Json<AppVersionView>, ApiError> {
    let approved = st
        .runtime
        .approve_app_version(&app, &version, &caller.operator_key())
        .await?;
    Ok(Json(approved.into()))
}

/// Every app with its versions, and every server's enabled versions.
#[utoipa::path(get, path = "/v1/apps", tag = "apps",
    responses((status = 200, description = "Apps, versions and enablements", body = AppsList),
        (status = 403, description = "Not an operator token", body = crate::dto::ErrorBody)))]
pub async fn list_apps(State(st): State<AppState>) -> Result<Json<AppsList>, ApiError> {
    let overview = st.runtime.list_apps().await?;
    let mut apps: Vec<AppView> = Vec::new();
    for v in overview.versions {
        match apps.last_mut() {
            Some(last) if last.name == v.app => last.versions.push(v.into()),
            _ => apps.push(AppView {
                name: v.app.clone(),
                versions: vec![v.into()],
            }),
        }
    }
    Ok(Json(AppsList {
        apps,
        enablements: overview.enablements.into_iter().map(Into::into).collect(),
    }))
}

/// Enables an approved version of an app in a Discord server (replacing
/// the version it had there). A pending version is 409 `conflict`.
#[utoipa::path(put, path = "/v1/apps/{app}/guilds/{guild_id}", tag = "apps",
    params(("app" = crate::schemas::AppLabel, Path, description = "The app's name"),
        ("guild_id" = crate::schemas::GuildId, Path, description = "The Discord server (guild) id")),
    request_body = EnableRequest,
    responses((status = 200, description = "Enabled", body = EnablementView),
        (status = 400, description = "Bad input (a guild id is digits)", body = crate::dto::ErrorBody),
        (status = 403, description = "Not an operator token", body = crate::dto::ErrorBody),
        (status = 404, description = "No such version", body = crate::dto::ErrorBody),
        (status = 409, description = "The version is not approved", body = crate::dto::ErrorBody)))]
pub async fn enable_app(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((app, guild_id)): ApiPath<(String, String)>,
    ApiJson(body): ApiJson<EnableRequest>,
) -> Result<Json<EnablementView>, ApiError> {
    let enabled = st
        .runtime
        .enable_app(&guild_id, &app, &body.version, &caller.operator_key())
        .await?;
    Ok(Json(enabled.into()))
}

/// Disables an app in a Discord server: nothing of it is sent or offered
/// there any more.
#[utoipa::path(delete, path = "/v1/apps/{app}/guilds/{guild_id}", tag = "apps",
    params(("app" = crate::schemas::AppLabel, Path, description = "The app's name"),
        ("guild_id" = crate::schemas::GuildId, Path, description = "The Discord server (guild) id")),
    responses((status = 204, description = "Disabled"),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 403, description = "Not an operator token", body = crate::dto::ErrorBody),
        (status = 404, description = "The app is not enabled there", body = crate::dto::ErrorBody)))]
pub async fn disable_app(
    State(st): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((app, guild_id)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    if st
        .runtime
        .disable_app(&guild_id, &app, &caller.operator_key())
        .await?
    {
        return Ok(StatusCode::NO_CONTENT);
    }
    Err(ApiError::NotFound(format!(
        "{app} is not enabled in server {guild_id} (see GET /v1/apps)"
    )))
}
