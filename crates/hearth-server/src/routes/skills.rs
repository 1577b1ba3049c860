//! `GET /v1/skills` and `POST /v1/skills/reload`: the runtime's skills.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;

/// One skill of `GET /v1/skills`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillInfo {
    /// Its name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Its SKILL.md (or `hearth-skill.json` when it has no SKILL.md).
    pub path: String,
    /// Where it was found: `workspace`, `workspace_agents`, `user_agents`,
    /// `home` or `extra`.
    pub source: &'static str,
    /// Offered to the model (false: invalid, needs unmet, or refused).
    pub eligible: bool,
    /// Why it is not eligible.
    pub reason: Option<String>,
    /// `null` for SKILL.md skills; for executable skills whether a trusted
    /// key signed it (false also for a refused manifest).
    pub signed: Option<bool>,
    /// What is invalid in it, each as `<field>: <what is wrong>`; empty
    /// when it is valid (if perhaps unusable on this machine).
    pub problems: Vec<String>,
}

/// `GET /v1/skills`
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillList {
    /// By precedence of their folder, then path.
    pub skills: Vec<SkillInfo>,
}

/// `POST /v1/skills/reload`
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillsReloaded {
    /// How many skills are listed now.
    pub skills: usize,
}

/// Every skill found, eligible or not, with the reason when not.
#[utoipa::path(get, path = "/v1/skills", tag = "skills",
    responses((status = 200, description = "The skills", body = SkillList)))]
pub async fn skills(State(st): State<AppState>) -> Json<SkillList> {
    let skills = st
        .runtime
        .skills()
        .into_iter()
        .map(|s| SkillInfo {
            name: s.name,
            description: s.description,
            path: s.path,
            source: s.source,
            eligible: s.eligible,
            reason: s.reason,
            signed: s.signed,
            problems: s.problems,
        })
        .collect();
    Json(SkillList { skills })
}

/// Reads every skill folder again (as SIGHUP does); the model sees the new
/// list from its next call.
#[utoipa::path(post, path = "/v1/skills/reload", tag = "skills",
    responses((status = 200, description = "How many skills are listed now", body = SkillsReloaded),
        (status = 500, body = crate::dto::ErrorBody)))]
pub async fn reload(State(st): State<AppState>) -> Result<Json<SkillsReloaded>, ApiError> {
    let count = st.runtime.reload_skills().await?;
    tracing::info!(skills = count, "skills reloaded");
    Ok(Json(SkillsReloaded { skills: count }))
}
