//! `GET /v1/tools`: the tools the model can be offered.

use axum::Json;
use axum::extract::{Query, State};

use crate::AppState;
use crate::dto::{ToolInfo, ToolList, ToolsParams};

/// Every registered tool; with `channel`, the tools that channel offers
/// (its `[tools.profiles.<channel>]` applied, other channels' own tools left
/// out). Each user then sees only what their capabilities allow.
#[utoipa::path(get, path = "/v1/tools", tag = "tools", params(ToolsParams),
    responses((status = 200, body = ToolList)))]
pub async fn tools(State(st): State<AppState>, Query(q): Query<ToolsParams>) -> Json<ToolList> {
    let registry = st.runtime.engine().tools();
    let chosen: Vec<_> = match q.channel.as_deref() {
        Some(channel) => registry.for_channel(channel).collect(),
        None => registry.iter().collect(),
    };
    Json(ToolList {
        tools: chosen
            .into_iter()
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
