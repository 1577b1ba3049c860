//! Bearer-token auth. Tokens are stored as SHA-256 hashes; the plaintext is
//! shown once at creation.
//!
//! With no active token, requests pass only while the server is bound to a
//! loopback address (`hearth serve` refuses a public bind without tokens).
//!
//! Every check asks the store (one indexed lookup): tokens are created and
//! revoked by the `hearth token` CLI in another process, which a cache here
//! could not hear of, so a cache would keep a revoked token working. The
//! PostgreSQL store holds the answers itself, only while it listens for
//! every change to them (`hearth_access`), and drops them on each.

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

    /// Decides one request's `Authorization` header for a surface that
    /// only operators use (the OpenAI-compatible one): a token bound to a
    /// user is refused there (403).
    pub async fn check(&self, header: Option<&str>) -> Result<(), ApiError> {
        match self.identify(header).await? {
            Caller::Member { .. } => Err(ApiError::Forbidden(MEMBER_REFUSED.into())),
            Caller::Token(_) | Caller::Local => Ok(()),
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
        let caller =
            match header {
                Some(h) => match bearer_token(h) {
                    Some(token) => self.runtime.api_token_holder(token).await?.map(|holder| {
                        match holder.user_key {
                            Some(user_key) => Caller::Member {
                                name: holder.name,
                                user_key,
                            },
                            None => Caller::Token(holder.name),
                        }
                    }),
                    None => None,
                },
                None => (self.loopback && !self.runtime.api_tokens_exist().await?)
                    .then_some(Caller::Local),
            };
        caller.ok_or_else(|| {
            metrics::counter!("hearth_auth_failures_total").increment(1);
            ApiError::Unauthorized
        })
    }
}

/// What a token bound to a user is told on a surface only operators use.
pub const MEMBER_REFUSED: &str = "this token acts as one user: it may send messages, follow and cancel that user's runs and \
     answer their confirmations; everything else needs an operator token (one made without --user)";

/// Who a request that passed auth comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// The holder of the API token with this name (an operator).
    Token(String),
    /// The holder of a token bound to a user: acts as that user, on their
    /// own runs only.
    Member {
        /// The token's name.
        name: String,
        /// The user it acts as.
        user_key: String,
    },
    /// Nobody in particular: no token exists and the server is bound to loopback.
    Local,
}

impl Caller {
    /// The user key of this caller acting as the operator: `api:operator:<token
    /// name>`, or `api:operator:local` on a loopback hearth without tokens.
    pub fn operator_key(&self) -> String {
        match self {
            Self::Token(name) => format!("api:operator:{name}"),
            Self::Member { user_key, .. } => user_key.clone(),
            Self::Local => "api:operator:local".to_owned(),
        }
    }

    /// The user a token bound to one acts as; `None` for an operator.
    pub fn member(&self) -> Option<&str> {
        match self {
            Self::Member { user_key, .. } => Some(user_key),
            Self::Token(_) | Self::Local => None,
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
    if let Some(user) = caller.member() {
        let (method, path) = (req.method().clone(), req.uri().path().to_owned());
        member_may(&state, user, &method, &path).await?;
    }
    req.extensions_mut().insert(caller);
    Ok(next.run(req).await)
}

/// Whether `thread` is `user`'s own: no other user's run is on it (a
/// thread without runs is anyone's to start), asked of an index. A member
/// may read and write their own threads only; another user's conversation
/// is not theirs to read or join.
pub async fn member_owns_thread(
    runtime: &hearth_runtime::Runtime,
    user: &str,
    thread: &str,
) -> Result<bool, ApiError> {
    hearth_runtime::check_key("thread_key", thread)?;
    Ok(runtime.thread_is_users(thread, user).await?)
}

/// What a token bound to `user` may do on `/v1`: list models, send
/// messages (as that user, checked by the handler), list its runs
/// (narrowed by the handler), follow, trace and cancel its own runs
/// (another user's are 404, as unknown ones), read the history and
/// settings of its own threads (another user's are 404), and answer its
/// own confirmations (checked by the handler). Everything else is 403.
async fn member_may(
    state: &AppState,
    user: &str,
    method: &axum::http::Method,
    path: &str,
) -> Result<(), ApiError> {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    match member_rule(method, &parts) {
        MemberRule::Open => Ok(()),
        MemberRule::OwnRun => {
            let run_id = parts.get(2).copied().unwrap_or_default();
            let run = state.runtime.get_run(run_id).await?;
            if run.user_key == user {
                Ok(())
            } else {
                Err(ApiError::NotFound(format!("no run {run_id}")))
            }
        }
        MemberRule::OwnThread => {
            let thread =
                crate::ui::session::percent_decode(parts.get(2).copied().unwrap_or_default());
            if member_owns_thread(&state.runtime, user, &thread).await? {
                Ok(())
            } else {
                Err(ApiError::NotFound(format!("no thread {thread}")))
            }
        }
        MemberRule::Refused => Err(ApiError::Forbidden(MEMBER_REFUSED.into())),
    }
}

/// What a token bound to a user meets on one `/v1` route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemberRule {
    /// Served (the handler narrows or checks what is theirs).
    Open,
    /// Served for their own run; another user's is 404, as an unknown one.
    OwnRun,
    /// Served for their own thread; another user's is 404.
    OwnThread,
    /// 403 `forbidden`: an operator's route.
    Refused,
}

/// The rule of [`member_may`] for `method` on a path split into its
/// segments (`["v1", "runs", "<id>"]`); a path template's `{run_id}`
/// segments match as any id, so the OpenAPI document is made from the
/// same rule the server applies.
pub(crate) fn member_rule(method: &axum::http::Method, parts: &[&str]) -> MemberRule {
    use axum::http::Method;
    match (method, parts) {
        (&Method::GET, ["v1", "models"])
        | (&Method::POST, ["v1", "messages"])
        | (&Method::GET, ["v1", "runs"])
        | (&Method::POST, ["v1", "confirmations", _]) => MemberRule::Open,
        (&Method::GET, ["v1", "runs", _])
        | (&Method::GET, ["v1", "runs", _, "events" | "trace"])
        | (&Method::POST, ["v1", "runs", _, "cancel"]) => MemberRule::OwnRun,
        (&Method::GET, ["v1", "threads", _, "history" | "runtime"]) => MemberRule::OwnThread,
        _ => MemberRule::Refused,
    }
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
