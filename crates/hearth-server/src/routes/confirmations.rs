//! Answering a write-class tool call's confirmation.

use axum::Json;
use axum::extract::State;
use hearth_core::RunEnvelope;

use crate::AppState;
use crate::dto::ConfirmRequest;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// Approves or denies the pending confirmation `token` as `user_key`.
#[utoipa::path(post, path = "/v1/confirmations/{token}", tag = "confirmations",
    params(("token" = String, Path, description = "The token from the envelope or the confirmation.required event", min_length = 1)),
    request_body = ConfirmRequest,
    responses(
        (status = 200, description = "Answered; the waiting run's envelope", body = RunEnvelope),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 403, description = "Another user's confirmation", body = crate::dto::ErrorBody),
        (status = 404, description = "Unknown, used or expired token", body = crate::dto::ErrorBody)))]
pub async fn resolve(
    State(st): State<AppState>,
    ApiPath(token): ApiPath<String>,
    ApiJson(body): ApiJson<ConfirmRequest>,
) -> Result<Json<RunEnvelope>, ApiError> {
    Ok(Json(
        st.runtime
            .resolve_confirmation(&token, &body.user_key, body.approve)
            .await?,
    ))
}
