//! `POST /v1/tokens`: an operator makes an API token, for an operator or
//! bound to a user (as `hearth token create [--user]` does).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hearth_core::records::NewToken;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::ApiJson;

/// `POST /v1/tokens`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// A label for people: 1 to 100 characters, not blank.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// Bind the token to this user: it then acts as that user, on their
    /// own runs only. Without it, an operator token.
    #[schema(value_type = Option<crate::schemas::Key>)]
    pub user_key: Option<String>,
}

/// A token just made: its secret is shown this once.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenCreated {
    /// Its id (`tok_...`), for revoking it.
    pub id: String,
    /// Its label.
    pub name: String,
    /// The user it acts as; `null` for an operator token.
    pub user_key: Option<String>,
    /// The secret, for `Authorization: Bearer`; never shown again.
    pub token: String,
}

/// Makes an API token (operators only).
#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = TokenRequest,
    responses((status = 201, description = "The token, with its secret shown once", body = TokenCreated),
        (status = 400, description = "Bad input", body = crate::dto::ErrorBody),
        (status = 403, description = "A token bound to a user may not make tokens", body = crate::dto::ErrorBody)))]
pub async fn create_token(
    State(st): State<AppState>,
    ApiJson(body): ApiJson<TokenRequest>,
) -> Result<(StatusCode, Json<TokenCreated>), ApiError> {
    let name = body.name.trim().to_owned();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::InvalidRequest(
            "name must be 1 to 100 characters, not blank".into(),
        ));
    }
    if let Some(u) = &body.user_key {
        hearth_runtime::check_key("user_key", u)?;
    }
    let token = crate::auth::generate_token()
        .map_err(|e| ApiError::Internal(format!("no randomness available for a token: {e}")))?;
    let id = format!(
        "tok_{}",
        hearth_core::new_run_id().trim_start_matches("run_")
    );
    st.runtime
        .create_api_token(NewToken {
            id: id.clone(),
            name: name.clone(),
            hash_hex: crate::auth::hash_token(&token),
            created_at: hearth_core::now_ms(),
            user_key: body.user_key.clone(),
        })
        .await?;
    tracing::info!(token_id = %id, bound = body.user_key.is_some(), "an API token was created over HTTP");
    Ok((
        StatusCode::CREATED,
        Json(TokenCreated {
            id,
            name,
            user_key: body.user_key,
            token,
        }),
    ))
}
