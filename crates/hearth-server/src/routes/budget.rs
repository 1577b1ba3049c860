//! `GET /v1/budget`: each limit pool's limit, use, holds and reset.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;

/// One pool (for one subject, when scoped) of `GET /v1/budget`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BudgetPool {
    /// The pool's name (`[[budget.pools]]` name, or a shortcut's key).
    pub name: String,
    /// `cost_usd`, `tokens` or `requests`.
    #[schema(pattern = "^(cost_usd|tokens|requests)$")]
    pub kind: String,
    /// `global`, `user` or `thread`.
    #[schema(pattern = "^(global|user|thread)$")]
    pub scope: String,
    /// The user or thread key of a scoped pool; null for a global pool, or
    /// for a scoped pool nobody used in this window.
    pub subject: Option<String>,
    /// The most per window.
    pub limit: f64,
    /// Settled use in the current window.
    pub used: f64,
    /// Held by model calls in flight (their estimates).
    pub reserved: f64,
    /// When the use shown is gone (RFC 3339): the window's end, or for a
    /// rolling `24h` pool when its oldest use drops out.
    pub resets_at: String,
}

/// `GET /v1/budget`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BudgetPools {
    /// Pools in configuration order; a scoped pool has one entry per subject.
    pub pools: Vec<BudgetPool>,
}

/// Each limit pool's limit, use, holds and reset.
#[utoipa::path(get, path = "/v1/budget", tag = "usage",
    responses((status = 200, description = "Every pool; empty without [budget] pools", body = BudgetPools)))]
pub async fn budget(State(st): State<AppState>) -> Json<BudgetPools> {
    // Money and token counts stay readable: no float noise past 1e-9.
    let round = |x: f64| (x * 1e9).round() / 1e9;
    Json(BudgetPools {
        pools: st
            .runtime
            .budget_status()
            .await
            .into_iter()
            .map(|p| BudgetPool {
                name: p.name,
                kind: p.kind.as_str().to_owned(),
                scope: p.scope.as_str().to_owned(),
                subject: p.subject,
                limit: p.limit,
                used: round(p.used),
                reserved: round(p.reserved),
                resets_at: hearth_core::rfc3339(p.resets_at),
            })
            .collect(),
    })
}
