//! Keys that belong to a community (`/v1/scopes/{scope}/credentials`): the
//! operator gives a guild, a Slack workspace or a Telegram group its own
//! provider key, which that community's runs then use instead of the
//! operator's. A key is sealed at once, audited, and never shown again:
//! the list has providers and when each was set, nothing else.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hearth_core::rfc3339;
use hearth_runtime::surfaces::Secret;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// The actor of changes made through the API.
const OPERATOR: &str = "operator";

/// `PUT /v1/scopes/{scope}/credentials/{provider}`
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyRequest {
    /// The provider key. It is sealed at once and never shown again.
    pub key: String,
}

/// Hand-written: the key never reaches a log.
impl std::fmt::Debug for KeyRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRequest").finish_non_exhaustive()
    }
}

/// One provider a community has its own key for.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct CredentialView {
    /// The provider (a name under `[llm.providers]`).
    pub provider: String,
    /// When the key was set (RFC 3339).
    pub set_at: String,
}

/// `GET /v1/scopes/{scope}/credentials`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Credentials {
    /// The providers the community has its own key for, by name.
    pub credentials: Vec<CredentialView>,
}

/// Sets a community's own key for a provider: runs asked in that scope
/// call the provider with it, no other run does.
#[utoipa::path(put, path = "/v1/scopes/{scope}/credentials/{provider}", tag = "permissions",
    params(("scope" = crate::schemas::CommunityScope, Path, description = "discord:guild:<id>, slack:team:<id> or telegram:chat:<group id>"),
        ("provider" = String, Path, description = "A configured provider")),
    request_body = KeyRequest,
    responses((status = 204, description = "Set (sealed; never shown again)"),
        (status = 400, description = "Not a community scope, not a configured provider, an unusable key, or no HEARTH_SECRET_KEY to seal it with", body = crate::dto::ErrorBody)))]
pub async fn set_credential(
    State(st): State<AppState>,
    ApiPath((scope, provider)): ApiPath<(String, String)>,
    ApiJson(req): ApiJson<KeyRequest>,
) -> Result<StatusCode, ApiError> {
    st.runtime
        .set_scope_credential(&scope, &provider, Secret::new(req.key), OPERATOR)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes a community's key: its runs on that provider then fail, unless
/// `[llm] community_fallback = true` lets them use the operator's key.
#[utoipa::path(delete, path = "/v1/scopes/{scope}/credentials/{provider}", tag = "permissions",
    params(("scope" = crate::schemas::CommunityScope, Path, description = "discord:guild:<id>, slack:team:<id> or telegram:chat:<group id>"),
        ("provider" = String, Path, description = "The provider")),
    responses((status = 204, description = "Removed"),
        (status = 400, description = "Not a community scope", body = crate::dto::ErrorBody),
        (status = 404, description = "The community has no key for this provider", body = crate::dto::ErrorBody)))]
pub async fn remove_credential(
    State(st): State<AppState>,
    ApiPath((scope, provider)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    if st
        .runtime
        .remove_scope_credential(&scope, &provider, OPERATOR)
        .await?
    {
        return Ok(StatusCode::NO_CONTENT);
    }
    Err(ApiError::NotFound(format!(
        "{scope} has no key of its own for {provider:?} (see GET /v1/scopes/{scope}/credentials)"
    )))
}

/// The providers a community has its own key for, with when each was set
/// (never the keys).
#[utoipa::path(get, path = "/v1/scopes/{scope}/credentials", tag = "permissions",
    params(("scope" = crate::schemas::CommunityScope, Path, description = "discord:guild:<id>, slack:team:<id> or telegram:chat:<group id>")),
    responses((status = 200, description = "Providers and when their keys were set", body = Credentials),
        (status = 400, description = "Not a community scope", body = crate::dto::ErrorBody)))]
pub async fn list_credentials(
    State(st): State<AppState>,
    ApiPath(scope): ApiPath<String>,
) -> Result<Json<Credentials>, ApiError> {
    let credentials = st
        .runtime
        .scope_credentials(&scope)
        .await?
        .into_iter()
        .map(|c| CredentialView {
            provider: c.provider,
            set_at: rfc3339(c.set_at),
        })
        .collect();
    Ok(Json(Credentials { credentials }))
}
