//! Answering a write-class tool call's confirmation.

use axum::extract::State;
use axum::{Extension, Json};
use hearth_core::RunEnvelope;

use crate::AppState;
use crate::auth::Caller;
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
        (status = 403, description = "Another user's confirmation, or a token bound to a user answering as another user (`forbidden`)", body = crate::dto::ErrorBody),
        (status = 404, description = "Unknown, used or expired token", body = crate::dto::ErrorBody)))]
pub async fn resolve(
    State(st): State<AppState>,
    caller: Option<Extension<Caller>>,
    ApiPath(token): ApiPath<String>,
    ApiJson(body): ApiJson<ConfirmRequest>,
) -> Result<Json<RunEnvelope>, ApiError> {
    // A token bound to a user answers as that user only (the runtime then
    // lets them answer their own questions, as for anyone).
    if let Some(user) = caller.as_ref().and_then(|c| c.member())
        && body.user_key != user
    {
        return Err(ApiError::Forbidden(format!(
            "this token acts as {user}; it cannot answer as {}",
            body.user_key
        )));
    }
    Ok(Json(
        st.runtime
            .resolve_confirmation(&token, &body.user_key, body.approve)
            .await?,
    ))
}
