//! Extractors whose rejections are `ApiError`s, so every refusal of a body,
//! a path parameter or a query string answers in the error envelope:
//! `ApiJson` (a strict JSON body), `ApiPath` and `ApiQuery`.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A JSON body parsed strictly (the DTOs deny unknown fields), sent as
/// `Content-Type: application/json` (else 415 `unsupported_media_type`).
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        // Before the body is read: a page on another site can send
        // `text/plain` or a form without a CORS preflight, and such a body
        // must never reach the JSON parser.
        crate::door::json_content_type(req.headers()).map_err(ApiError::UnsupportedMediaType)?;
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

/// Path parameters; a parameter that is not valid percent-encoded UTF-8
/// answers 400 `invalid_request` (axum's own rejection is plain text).
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(t)| ApiPath(t))
            .map_err(|e| ApiError::InvalidRequest(format!("bad path parameter: {}", e.body_text())))
    }
}

/// A query string; one that does not parse answers 400 `invalid_request`.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(t)| ApiQuery(t))
            .map_err(|e| ApiError::InvalidRequest(e.body_text()))
    }
}

/// The configured body limit, put in request extensions so rejections can name it.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimit(pub usize);

/// Largest `limit` of a listing.
pub const MAX_LIMIT: u32 = 1000;

/// A listing's `limit` query parameter: `default` when absent, else 1 to
/// [`MAX_LIMIT`] (400 `invalid_request` outside, as the document states).
pub fn page_limit(limit: Option<u32>, default: u32) -> Result<u32, ApiError> {
    match limit {
        None => Ok(default),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::InvalidRequest(format!(
            "limit {n} is out of range; give 1 to {MAX_LIMIT}"
        ))),
    }
}
