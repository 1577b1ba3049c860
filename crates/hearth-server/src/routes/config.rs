//! `GET /v1/config` and `POST /v1/config/reload`: the configuration in
//! force, and reading `hearth.toml` and the environment again (as SIGHUP
//! and `hearth config reload` do). Both need the API token (operator).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;

/// `GET /v1/config`: every section of `hearth.toml` as in force (defaults,
/// file and `HEARTH_*` overrides merged). Secrets are never shown: beside
/// each `<x>_env` (the variable's name) stands `<x>`, `"<set>"` or
/// `"<unset>"`; literal header, MCP `env` and skill `config` values show as
/// `"<set>"`; an alert webhook as its scheme and host; `secret_key` is
/// `HEARTH_SECRET_KEY`'s state.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConfigShown {
    /// When the configuration in force was read (RFC 3339).
    pub loaded_at: String,
    /// The sections (`server`, `llm`, `agent`, ...) and `secret_key`.
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub sections: BTreeMap<String, Value>,
}

/// `POST /v1/config/reload`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConfigReloaded {
    /// Sections changed and in force for the next runs (`llm`,
    /// `permissions`, `tools`, `agent`, `budget`, `router`, `mcp`,
    /// `skills`); runs in flight finish with the configuration they started
    /// with.
    pub changed: Vec<String>,
    /// Sections or keys changed that take effect only after a restart
    /// (`server.<key>`, `store`, `home`, `log`, `channels`, `alerts`,
    /// `tools.web_search`); not applied, and nothing else of the reload is
    /// refused for them.
    pub needs_restart: Vec<String>,
    /// When the configuration now in force was read (RFC 3339).
    pub loaded_at: String,
}

/// The configuration in force, with secrets shown as `<set>`/`<unset>`.
#[utoipa::path(get, path = "/v1/config", tag = "config",
    responses((status = 200, description = "The configuration in force", body = ConfigShown)))]
pub async fn show_config(State(st): State<AppState>) -> Json<ConfigShown> {
    let view = st.runtime.config_view();
    let sections = match view.config {
        Value::Object(map) => map.into_iter().collect(),
        _ => BTreeMap::new(),
    };
    Json(ConfigShown {
        loaded_at: hearth_core::rfc3339(view.loaded_at),
        sections,
    })
}

/// Reads `hearth.toml` and the environment again, checks the whole
/// configuration, and applies what can change live. An invalid one
/// changes nothing (400 `invalid_config`, saying why) and the one in force
/// keeps serving.
#[utoipa::path(post, path = "/v1/config/reload", tag = "config",
    responses((status = 200, description = "What changed and what needs a restart", body = ConfigReloaded),
        (status = 400, description = "The configuration read cannot be served; nothing changed", body = crate::dto::ErrorBody)))]
pub async fn reload_config(State(st): State<AppState>) -> Result<Json<ConfigReloaded>, ApiError> {
    let report = st.runtime.reload_config().await?;
    Ok(Json(ConfigReloaded {
        changed: report.changed,
        needs_restart: report.needs_restart,
        loaded_at: hearth_core::rfc3339(report.loaded_at),
    }))
}
