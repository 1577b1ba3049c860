//! `GET /v1/skills` and `POST /v1/skills/reload`.
//!
//! The skills are an extension of the router ([`with_skills`]) rather than
//! part of `AppState`: a server built without them (tests, embedders) lists
//! none and reloads nothing.

use std::sync::Arc;

use axum::extract::Extension;
use axum::{Json, Router};
use hearth_skills::{Catalog, Skills};
use serde::Serialize;
use utoipa::ToSchema;

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

/// `app` with `skills` served by these routes.
pub fn with_skills(app: Router, skills: Arc<Skills>) -> Router {
    app.layer(Extension(skills))
}

fn list(catalog: &Catalog) -> SkillList {
    SkillList {
        skills: catalog
            .skills
            .iter()
            .map(|s| SkillInfo {
                name: s.name.clone(),
                description: s.description.clone(),
                path: s.path.display().to_string(),
                source: s.source.as_str(),
                eligible: s.eligible,
                reason: s.reason.clone(),
                signed: s.signed,
            })
            .collect(),
    }
}

/// Every skill found, eligible or not, with the reason when not.
#[utoipa::path(get, path = "/v1/skills", tag = "skills",
    responses((status = 200, description = "The skills", body = SkillList)))]
pub async fn skills(skills: Option<Extension<Arc<Skills>>>) -> Json<SkillList> {
    Json(match skills {
        Some(Extension(s)) => list(&s.catalog()),
        None => SkillList { skills: Vec::new() },
    })
}

/// Reads every skill folder again (as SIGHUP does); the model sees the new
/// list from its next call.
#[utoipa::path(post, path = "/v1/skills/reload", tag = "skills",
    responses((status = 200, description = "How many skills are listed now", body = SkillsReloaded),
        (status = 500, body = crate::dto::ErrorBody)))]
pub async fn reload(
    skills: Option<Extension<Arc<Skills>>>,
) -> Result<Json<SkillsReloaded>, ApiError> {
    let Some(Extension(skills)) = skills else {
        return Ok(Json(SkillsReloaded { skills: 0 }));
    };
    // Reading folders is blocking file I/O.
    let count = tokio::task::spawn_blocking(move || skills.reload().skills.len())
        .await
        .map_err(|e| ApiError::Internal(format!("reloading skills failed: {e}")))?;
    tracing::info!(skills = count, "skills reloaded");
    Ok(Json(SkillsReloaded { skills: count }))
}
