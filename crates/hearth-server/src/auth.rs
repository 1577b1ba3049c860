//! Bearer-token auth. Tokens are stored as SHA-256 hashes; the plaintext is
//! shown once at creation.
//!
//! With no active token, requests pass only while the server is bound to a
//! loopback address (`hearth serve` refuses a public bind without tokens).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hearth_store::Store;
use sha2::{Digest, Sha256};

use crate::AppState;
use crate::error::ApiError;

/// How long a token check is trusted before the store is asked again; bounds
/// how long a revoked token keeps working.
const CACHE_TTL: Duration = Duration::from_secs(2);

/// A new token secret: `hth_` + 32 random bytes in base32 (256 bits).
pub fn generate_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(format!(
        "hth_{}",
        data_encoding::BASE32_NOPAD
            .encode(&bytes)
            .to_ascii_lowercase()
    ))
}

/// SHA-256 hex of a token secret: what the store keeps.
pub fn hash_token(token: &str) -> String {
    data_encoding::HEXLOWER.encode(&Sha256::digest(token.as_bytes()))
}

/// Token checks with a short cache in front of the store.
pub struct Auth {
    store: Arc<dyn Store>,
    loopback: bool,
    cache: Mutex<HashMap<String, (bool, Instant)>>,
    any_tokens: Mutex<Option<(bool, Instant)>>,
}

impl Auth {
    /// Auth over the store's tokens; `loopback` is whether the bind address is loopback.
    pub fn new(store: Arc<dyn Store>, loopback: bool) -> Self {
        Self {
            store,
            loopback,
            cache: Mutex::new(HashMap::new()),
            any_tokens: Mutex::new(None),
        }
    }

    async fn tokens_exist(&self) -> Result<bool, ApiError> {
        if let Some((v, at)) = *self
            .any_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            && at.elapsed() < CACHE_TTL
        {
            return Ok(v);
        }
        let n = self
            .store
            .active_token_count()
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        *self
            .any_tokens
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((n > 0, Instant::now()));
        Ok(n > 0)
    }

    async fn valid(&self, token: &str) -> Result<bool, ApiError> {
        let hash = hash_token(token);
        if let Some((v, at)) = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&hash)
            && at.elapsed() < CACHE_TTL
        {
            return Ok(*v);
        }
        let v = self
            .store
            .token_hash_valid(&hash)
            .await
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() > 1024 {
            cache.clear();
        }
        cache.insert(hash, (v, Instant::now()));
        Ok(v)
    }

    /// Decides one request's `Authorization` header.
    pub async fn check(&self, header: Option<&str>) -> Result<(), ApiError> {
        match header.and_then(|h| h.strip_prefix("Bearer ")) {
            Some(token) if self.valid(token.trim()).await? => Ok(()),
            Some(_) => Err(ApiError::Unauthorized),
            None if self.loopback && !self.tokens_exist().await? => Ok(()),
            None => Err(ApiError::Unauthorized),
        }
    }
}

/// Middleware on `/v1`: 401 `unauthorized` unless `Auth::check` passes.
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    state.auth.check(header).await?;
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_hash_stably() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("hth_") && a.len() > 50);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_eq!(hash_token(&a).len(), 64);
    }
}
