//! The model router: its posteriors, and ratings of runs' answers.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// `GET /v1/router`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RouterView {
    /// `fixed`, `cheapest` or `learn`.
    pub strategy: String,
    /// Every arm on every task class it takes.
    pub arms: Vec<ArmPosterior>,
}

/// The Beta posterior of one arm on one task class.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ArmPosterior {
    /// `<provider>/<model>`.
    pub model: String,
    /// `chat`, `question`, `code`, `writing`, `summarize`, `tools` or `reasoning`.
    pub task: String,
    /// 1 + prior successes + observed successes.
    pub alpha: f64,
    /// 1 + prior failures + observed failures.
    pub beta: f64,
    /// Routed runs that chose this arm for this class.
    pub runs: u64,
}

/// A rating.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RatingBody {
    /// A good answer.
    Up,
    /// A bad answer.
    Down,
}

/// `POST /v1/runs/{run_id}/feedback`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Feedback {
    /// `up` or `down`.
    pub rating: RatingBody,
    /// Who rates (for the log; any user may rate).
    #[schema(value_type = Option<crate::schemas::Key>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_key: Option<String>,
}

/// The answer to a rating.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct FeedbackResult {
    /// The run rated.
    pub run_id: String,
    /// The rating kept for it.
    pub rating: RatingBody,
    /// False when the router learns nothing from it: the run's model was
    /// set by its thread, or the thread is incognito.
    pub counted: bool,
}

/// The router's strategy and what it has learnt per arm and task class.
#[utoipa::path(get, path = "/v1/router", tag = "router",
    responses((status = 200, description = "Strategy and posteriors", body = RouterView)))]
pub async fn get_router(State(st): State<AppState>) -> Json<RouterView> {
    let report = st.runtime.router_report();
    Json(RouterView {
        strategy: report.strategy.to_owned(),
        arms: report
            .arms
            .into_iter()
            .map(|p| ArmPosterior {
                model: p.model,
                task: p.task.as_str().to_owned(),
                alpha: p.alpha,
                beta: p.beta,
                runs: p.runs,
            })
            .collect(),
    })
}

/// Rates a run's answer: one success (`up`) or failure (`down`) for the
/// arm and task class it was routed to. A run keeps one rating; rating it
/// again replaces the first.
#[utoipa::path(post, path = "/v1/runs/{run_id}/feedback", tag = "router", request_body = Feedback,
    params(("run_id" = String, Path, description = "Run id", min_length = 1)),
    responses((status = 200, description = "The rating is recorded", body = FeedbackResult),
        (status = 400, body = crate::dto::ErrorBody), (status = 404, body = crate::dto::ErrorBody)))]
pub async fn post_feedback(
    State(st): State<AppState>,
    ApiPath(run_id): ApiPath<String>,
    ApiJson(body): ApiJson<Feedback>,
) -> Result<Json<FeedbackResult>, ApiError> {
    if let Some(user) = &body.user_key {
        hearth_runtime::check_key("user_key", user)?;
    }
    let rating = match body.rating {
        RatingBody::Up => hearth_core::records::router::Rating::Up,
        RatingBody::Down => hearth_core::records::router::Rating::Down,
    };
    let counted = st.runtime.rate_run(&run_id, rating).await?;
    tracing::debug!(
        run_id,
        rating = rating.as_str(),
        user_key = body.user_key.as_deref(),
        counted,
        "run rated"
    );
    Ok(Json(FeedbackResult {
        run_id,
        rating: body.rating,
        counted,
    }))
}
