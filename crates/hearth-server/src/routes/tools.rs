//! `GET /v1/tools`: the tools the model can be offered.

use axum::Json;
use axum::extract::{Query, State};

use crate::AppState;
use crate::dto::{ToolInfo, ToolList, ToolsParams};

/// Every registered tool; with `channel`, the tools that channel offers.
/// Channel profiles are not configurable yet, so every channel offers every
/// registered tool (each user then sees only what their capabilities allow).
#[utoipa::path(get, path = "/v1/tools", tag = "tools", params(ToolsParams),
    responses((status = 200, body = ToolList)))]
pub async fn tools(State(st): State<AppState>, Query(_q): Query<ToolsParams>) -> Json<ToolList> {
    Json(ToolList {
        tools: st
            .runtime
            .engine()
            .tools()
            .iter()
            .map(|t| ToolInfo {
                name: t.spec().name.clone(),
                description: t.spec().description.clone(),
                class: t.class().as_str(),
                capability: t.capability(),
                source: "builtin",
            })
            .collect(),
    })
}
