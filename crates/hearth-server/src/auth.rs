//! Bearer-token auth. Tokens are stored as SHA-256 hashes; the plaintext is
//! shown once at creation.
//!
//! With no active token, requests pass only while the server is bound to a
//! loopback address (`hearth serve` refuses a public bind without tokens).
//!
//! Every check asks the store (one indexed lookup): tokens are created and
//! revoked by the `hearth token` CLI in another process, which a cache here
//! could not hear of, so a cache would keep a revoked token working.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use hearth_runtime::Runtime;

pub use hearth_runtime::hash_token;

use crate::AppState;
use crate::error::ApiError;

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

/// The token of an `Authorization` value: `Bearer <token>` with the scheme
/// in any case (RFC 9110: schemes are case-insensitive) and any run of
/// spaces after it. `None` for another scheme or an empty token.
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim_start().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim();
    (!token.is_empty()).then_some(token)
}

/// Token checks against the runtime's store.
pub struct Auth {
    runtime: Runtime,
    loopback: bool,
}

impl Auth {
    /// Auth over the runtime's tokens; `loopback` is whether the bind address is loopback.
    pub fn new(runtime: Runtime, loopback: bool) -> Self {
        Self { runtime, loopback }
    }

    /// Decides one request's `Authorization` header.
    pub async fn check(&self, header: Option<&str>) -> Result<(), ApiError> {
        let verdict = match header {
            Some(h) => match bearer_token(h) {
                Some(token) => self.runtime.api_token_valid(token).await?,
                None => false,
            },
            None => self.loopback && !self.runtime.api_tokens_exist().await?,
        };
        if verdict {
            Ok(())
        } else {
            metrics::counter!("hearth_auth_failures_total").increment(1);
            Err(ApiError::Unauthorized)
        }
    }

    /// Whether requests pass without a token: the server is bound to
    /// loopback and no token exists (asked of the store each time).
    pub async fn open(&self) -> Result<bool, ApiError> {
        Ok(self.loopback && !self.runtime.api_tokens_exist().await?)
    }

    /// Decides one request's `Authorization` header as `check` does, and
    /// says who passed: the token's holder, or the local user of an open
    /// loopback server. For surfaces that act as their caller (`/mcp`).
    pub async fn identify(&self, header: Option<&str>) -> Result<Caller, ApiError> {
        let caller = match header {
            Some(h) => match bearer_token(h) {
                Some(token) => self.runtime.api_token_name(token).await?.map(Caller::Token),
                None => None,
            },
            None => {
                (self.loopback && !self.runtime.api_tokens_exist().await?).then_some(Caller::Local)
            }
        };
        caller.ok_or_else(|| {
            metrics::counter!("hearth_auth_failures_total").increment(1);
            ApiError::Unauthorized
        })
    }
}

/// Who a request that passed auth comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The holder of the API token with this name.
    Token(String),
    /// Nobody in particular: no token exists and the server is bound to loopback.
    Local,
}

impl Caller {
    /// The user key of this caller acting as the operator: `api:operator:<token
    /// name>`, or `api:operator:local` on a loopback hearth without tokens.
    pub fn operator_key(&self) -> String {
        match self {
            Self::Token(name) => format!("api:operator:{name}"),
            Self::Local => "api:operator:local".to_owned(),
        }
    }
}

/// Middleware on `/v1`: 401 `unauthorized` unless `Auth::identify`
/// passes; who passed goes to the handlers as a [`Caller`] extension.
pub async fn require_token(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.to_str().unwrap_or(""));
    let caller = state.auth.identify(header).await?;
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn tokens_are_long_random_and_hashed_with_sha256() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_ne!(a, b);
        assert!(a.starts_with("hth_") && a.len() > 50);
        // FIPS 180-2 test vector: what the store keeps is SHA-256 in lower-case hex.
        assert_eq!(
            hash_token("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for h in ["Bearer t1", "bearer t1", "BEARER   t1 ", " Bearer t1"] {
            assert_eq!(bearer_token(h), Some("t1"), "{h:?}");
        }
        for h in ["Basic t1", "Bearer", "Bearer   ", "Bearert1", "", "t1"] {
            assert_eq!(bearer_token(h), None, "{h:?}");
        }
    }

    proptest! {
        /// Any header value yields a token only under the bearer scheme,
        /// and the token is a non-empty, trimmed part of the header.
        #[test]
        fn bearer_token_never_panics(h in any::<String>()) {
            if let Some(t) = bearer_token(&h) {
                prop_assert!(!t.is_empty() && h.contains(t) && t.trim() == t);
                prop_assert!(h.trim_start().to_ascii_lowercase().starts_with("bearer "));
            }
        }
    }
}
