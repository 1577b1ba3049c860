//! Permissions (grants, checks) and the audit log. The API token holder acts
//! as the operator: grant changes are audited with actor `operator`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hearth_core::records::{AuditEvent, Grant};
use hearth_runtime::policy::{
    CapabilityName, GLOBAL_SCOPE, parse_capability, parse_subject, validate_scope,
};

use crate::AppState;
use crate::dto::{
    AuditEvents, AuditParams, CheckParams, CheckResult, GrantRequest, GrantView, Permissions,
    PermissionsParams, RemovedGrant,
};
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiQuery, page_limit};

/// The actor of changes made through the API.
const OPERATOR: &str = "operator";

/// Default `limit` of `GET /v1/audit`.
const AUDIT_DEFAULT_LIMIT: u32 = 100;

/// A validated scope: `global` when absent.
fn scope_of(scope: Option<String>) -> Result<String, ApiError> {
    let scope = scope.unwrap_or_else(|| GLOBAL_SCOPE.to_owned());
    validate_scope(&scope)?;
    Ok(scope)
}

/// Most role ids a check names (a Discord member has at most 250 roles).
const MAX_ROLES: usize = 250;

/// The role ids of a check's comma-separated `roles`, each valid as a grant's
/// `role:<id>` subject; none when absent or empty.
pub(crate) fn roles_of(roles: Option<&str>) -> Result<Vec<String>, ApiError> {
    let Some(roles) = roles.filter(|r| !r.is_empty()) else {
        return Ok(Vec::new());
    };
    let ids: Vec<String> = roles.split(',').map(str::to_owned).collect();
    if ids.len() > MAX_ROLES {
        return Err(ApiError::InvalidRequest(format!(
            "roles names {} role ids; at most {MAX_ROLES}",
            ids.len()
        )));
    }
    for id in &ids {
        parse_subject(&format!("role:{id}")).map_err(|e| {
            ApiError::InvalidRequest(format!("roles: {e}; give role ids separated by commas"))
        })?;
    }
    Ok(ids)
}

/// The prefix of an MCP server's capability.
const MCP_PREFIX: &str = "mcp.";

/// The grantable `mcp.<server>` names, comma-separated (`none` when no
/// server is configured).
fn configured_mcp(st: &AppState) -> String {
    let names: Vec<String> = st.runtime.extra_capabilities().into_keys().collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The canonical (subject, capability, scope) of a grant request; the
/// capability may also be a configured MCP server's `mcp.<server>`.
fn parse_grant(st: &AppState, req: GrantRequest) -> Result<(String, String, String), ApiError> {
    let subject = parse_subject(&req.subject)?.to_string();
    let capability = st.runtime.grantable(&req.capability).map_err(|e| {
        match req.capability.strip_prefix(MCP_PREFIX) {
            Some(server) => ApiError::UnknownCapability(format!(
                "no MCP server named {server:?} is configured, so {:?} cannot be granted; \
                 configured: {}",
                req.capability,
                configured_mcp(st)
            )),
            None => e.into(),
        }
    })?;
    let scope = scope_of(req.scope)?;
    Ok((subject, capability, scope))
}

async fn find_grant(
    st: &AppState,
    subject: &str,
    capability: &str,
    scope: &str,
) -> Result<Option<Grant>, ApiError> {
    Ok(st
        .runtime
        .list_grants(Some(scope))
        .await?
        .into_iter()
        .find(|g| g.subject == subject && g.capability == capability && g.scope == scope))
}

fn grant_event(action: &str, subject: &str, capability: &str, scope: &str) -> AuditEvent {
    AuditEvent {
        at: hearth_core::now_ms(),
        actor: OPERATOR.to_owned(),
        action: action.to_owned(),
        target: subject.to_owned(),
        outcome: "ok".to_owned(),
        capability: Some(capability.to_owned()),
        scope: Some(scope.to_owned()),
    }
}

/// The default preset and the grants in a scope.
#[utoipa::path(get, path = "/v1/permissions", tag = "permissions", params(PermissionsParams),
    responses((status = 200, description = "The default preset and the scope's grants", body = Permissions), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn list(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<PermissionsParams>,
) -> Result<Json<Permissions>, ApiError> {
    let scope = scope_of(q.scope)?;
    let grants = st.runtime.list_grants(Some(&scope)).await?;
    Ok(Json(Permissions {
        scope,
        default_preset: st.runtime.permissions().default_preset.as_str().to_owned(),
        grants: grants.into_iter().map(GrantView::from).collect(),
    }))
}

/// Grants a capability or a preset to a user or role in a scope. Granting
/// what is already granted changes nothing and answers the existing grant.
#[utoipa::path(post, path = "/v1/permissions/grants", tag = "permissions",
    request_body = GrantRequest,
    responses((status = 201, description = "The grant (the existing one when it was already granted)", body = GrantView), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn add_grant(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<GrantRequest>,
) -> Result<(StatusCode, Json<GrantView>), ApiError> {
    let (subject, capability, scope) = parse_grant(&st, req)?;
    let grant = Grant {
        subject: subject.clone(),
        capability: capability.clone(),
        scope: scope.clone(),
        granted_at: hearth_core::now_ms(),
        granted_by: OPERATOR.to_owned(),
    };
    let event = grant_event("grant.add", &subject, &capability, &scope);
    let added = st.runtime.add_grant(grant.clone(), event).await?;
    let grant = if added {
        grant
    } else {
        // Already granted: answer the stored grant (with its original date).
        find_grant(&st, &subject, &capability, &scope)
            .await?
            .unwrap_or(grant)
    };
    Ok((StatusCode::CREATED, Json(grant.into())))
}

/// Revokes a grant.
#[utoipa::path(delete, path = "/v1/permissions/grants", tag = "permissions",
    request_body = GrantRequest,
    responses((status = 200, description = "The grant that was removed", body = RemovedGrant), (status = 400, body = crate::dto::ErrorBody),
        (status = 404, body = crate::dto::ErrorBody)))]
pub async fn remove_grant(
    State(st): State<AppState>,
    ApiJson(req): ApiJson<GrantRequest>,
) -> Result<Json<RemovedGrant>, ApiError> {
    let (subject, capability, scope) = parse_grant(&st, req)?;
    let not_found =
        || ApiError::NotFound(format!("{subject} has no grant of {capability} in {scope}"));
    let Some(existing) = find_grant(&st, &subject, &capability, &scope).await? else {
        return Err(not_found());
    };
    let event = grant_event("grant.remove", &subject, &capability, &scope);
    let removed = st
        .runtime
        .remove_grant(&subject, &capability, &scope, event)
        .await?;
    if !removed {
        return Err(not_found());
    }
    Ok(Json(RemovedGrant {
        removed: existing.into(),
    }))
}

/// Whether a user holds a capability in a scope, and why.
#[utoipa::path(get, path = "/v1/permissions/check", tag = "permissions", params(CheckParams),
    responses((status = 200, description = "The verdict and what allowed it", body = CheckResult), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn check(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<CheckParams>,
) -> Result<Json<CheckResult>, ApiError> {
    let user_key = q
        .user_key
        .ok_or_else(|| ApiError::InvalidRequest("user_key is required".into()))?;
    hearth_runtime::check_key("user_key", &user_key)?;
    let capability = q.capability.filter(|c| !c.is_empty()).ok_or_else(|| {
        ApiError::InvalidRequest("capability is required (e.g. web.fetch)".into())
    })?;
    let extra = st.runtime.extra_capabilities();
    let capability = match parse_capability(&capability) {
        Ok(CapabilityName::Capability(c)) => c,
        Ok(CapabilityName::Preset(_)) => {
            return Err(ApiError::UnknownCapability(format!(
                "{capability:?} is a preset; check one capability, such as web.fetch"
            )));
        }
        // A configured MCP server's `mcp.<server>`.
        Err(_) if extra.contains_key(&capability) => capability.as_str(),
        Err(e) => return Err(e.into()),
    };
    let scope = scope_of(q.scope)?;
    let roles = roles_of(q.roles.as_deref())?;
    let d = st
        .runtime
        .check_permission(&user_key, &roles, capability, &scope)
        .await?;
    Ok(Json(CheckResult {
        allowed: d.allowed,
        via: d.via.map(str::to_owned),
    }))
}

/// The newest audit events, newest first.
#[utoipa::path(get, path = "/v1/audit", tag = "audit", params(AuditParams),
    responses((status = 200, description = "Audit events, newest first", body = AuditEvents), (status = 400, body = crate::dto::ErrorBody)))]
pub async fn audit(
    State(st): State<AppState>,
    ApiQuery(q): ApiQuery<AuditParams>,
) -> Result<Json<AuditEvents>, ApiError> {
    let limit = page_limit(q.limit, AUDIT_DEFAULT_LIMIT)?;
    let events = st.runtime.list_audit(limit).await?;
    Ok(Json(AuditEvents {
        events: events.into_iter().map(Into::into).collect(),
    }))
}
