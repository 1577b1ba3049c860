//! `ApiJson`: a strict JSON body extractor whose rejections are `ApiError`s.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body parsed strictly (the DTOs deny unknown fields).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map(|l| l.0)
            .unwrap_or(0);
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge(limit)
            } else {
                ApiError::InvalidRequest(format!("could not read the request body: {e}"))
            }
        })?;
        if bytes.is_empty() {
            return Err(ApiError::InvalidRequest(
                "the request body is empty; send a JSON object".into(),
            ));
        }
        let de = &mut serde_json::Deserializer::from_slice(&bytes);
        serde_path_to_error_free(de).map(ApiJson)
    }
}

fn serde_path_to_error_free<T: DeserializeOwned>(
    de: &mut serde_json::Deserializer<serde_json::de::SliceRead<'_>>,
) -> Result<T, ApiError> {
    let v = T::deserialize(&mut *de)
        .and_then(|v| de.end().map(|()| v))
        .map_err(|e| ApiError::InvalidRequest(format!("invalid JSON body: {e}")))?;
    Ok(v)
}

/// The configured body limit, put in request extensions so rejections can name it.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);
