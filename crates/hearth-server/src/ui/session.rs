//! Who is looking: dashboard sessions, the gate in front of every `/ui`
//! page, and CSRF tokens.
//!
//! A login exchanges an API token for a random session id in the
//! `hearth_session` cookie (`HttpOnly; SameSite=Strict; Path=/`). The store
//! keeps the session under the SHA-256 of its id (a copy of the database
//! opens no session) with the token's hash, never the token, so every
//! replica sharing the store knows the login and a restart keeps it. Every
//! page asks the store for the session joined with its unrevoked token (one
//! indexed lookup, as `/v1` asks for every bearer token), so revoking a
//! token ends its sessions at once.
//!
//! A loopback hearth without tokens is open, as `/v1` is: every page opens
//! without a login, and forms carry this process's random CSRF token.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_TYPE, COOKIE};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use futures_util::future::BoxFuture;

use hearth_core::records::UiSession;

use crate::AppState;
use crate::auth::Caller;
use crate::door::CsrfValidator;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "hearth_session";
/// The cookie that carries the login form's CSRF token before a session exists.
pub const LOGIN_COOKIE: &str = "hearth_login";
/// The form field (and, for scripts, the `X-CSRF-Token` header) of the CSRF token.
pub const CSRF_FIELD: &str = "csrf";
/// Largest form body the gate reads to find its CSRF token.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// The dashboard's sessions and the process's open-mode CSRF token.
pub struct Sessions {
    ttl: Duration,
    open_csrf: String,
    /// The server's state, set when the router is assembled (the door's
    /// CSRF check is made before it).
    state: OnceLock<AppState>,
}

/// A random 256-bit value as lower-case base32.
pub fn random_id() -> String {
    let mut bytes = [0u8; 32];
    // The OS's generator failing is not survivable for a login anyway; an
    // all-zero id would be guessable, so refuse instead (checked below).
    if getrandom::fill(&mut bytes).is_err() {
        return String::new();
    }
    data_encoding::BASE32_NOPAD
        .encode(&bytes)
        .to_ascii_lowercase()
}

/// Equal in constant time for equal lengths (tokens are compared without
/// telling how much of a guess was right).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && !a.is_empty()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The person behind a page request.
#[derive(Debug, Clone)]
pub struct Viewer {
    /// As `/v1` would know them.
    pub caller: Caller,
    /// The CSRF token their forms carry.
    pub csrf: String,
    /// Their session id (none on an open loopback hearth).
    pub session: Option<String>,
}

impl Viewer {
    /// The user a member's token acts as; `None` for an operator.
    pub fn member(&self) -> Option<&str> {
        self.caller.member()
    }

    /// Whether the viewer may see a run of `owner`: an operator sees every
    /// run, a member only their own (another user's is [`forbidden_run`]).
    pub fn may_see(&self, owner: &str) -> bool {
        self.member().is_none_or(|user| user == owner)
    }
}

/// The 403 page of another user's run.
pub fn forbidden_run() -> Response {
    super::layout::status_page(
        axum::http::StatusCode::FORBIDDEN,
        "Forbidden",
        "This run belongs to another user; your token shows only your own runs.",
    )
}

/// The pages a member (a token bound to a user) may open: their runs,
/// threads and confirmations (each page checks the owner). The rest of
/// the dashboard is the operator's.
fn member_page(method: &Method, path: &str) -> bool {
    let parts: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
    matches!(
        (method.as_str(), parts.as_slice()),
        (
            "GET" | "HEAD",
            ["ui"] | ["ui", "runs"] | ["ui", "runs", _] | ["ui", "runs", _, "events"]
        ) | ("GET" | "HEAD", ["ui", "confirmations"] | ["ui", "logout"])
            | ("GET" | "HEAD", ["ui", "threads"] | ["ui", "threads", _])
            | (
                "POST",
                ["ui", "runs", _, "cancel"] | ["ui", "confirmations", _] | ["ui", "logout"]
            )
            | ("POST", ["ui", "threads", _, "send"])
    )
}

impl Sessions {
    /// Sessions lasting `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            open_csrf: random_id(),
            state: OnceLock::new(),
        }
    }

    pub(crate) fn attach(&self, state: AppState) {
        let _ = self.state.set(state);
    }

    /// A new session of `st`'s store for the token whose hash is
    /// `token_hash`; its id (for the cookie).
    pub async fn create(
        &self,
        st: &AppState,
        token_hash: String,
    ) -> Result<Option<String>, crate::ApiError> {
        let id = random_id();
        let csrf = random_id();
        if id.is_empty() || csrf.is_empty() {
            return Ok(None);
        }
        let now = hearth_core::now_ms();
        let ttl = i64::try_from(self.ttl.as_millis()).unwrap_or(i64::MAX);
        st.runtime
            .open_ui_session(UiSession {
                id_hash: crate::auth::hash_token(&id),
                token_hash,
                csrf,
                created_at: now,
                expires_at: now.saturating_add(ttl),
            })
            .await?;
        Ok(Some(id))
    }

    /// Ends a session.
    pub async fn remove(&self, st: &AppState, id: &str) -> Result<(), crate::ApiError> {
        st.runtime
            .end_ui_session(&crate::auth::hash_token(id))
            .await?;
        Ok(())
    }

    /// Who `headers` come from: the open loopback user, the holder of a
    /// live session whose token is still valid, or nobody.
    pub async fn viewer(
        &self,
        st: &AppState,
        headers: &HeaderMap,
    ) -> Result<Option<Viewer>, crate::ApiError> {
        if st.auth.open().await? {
            return Ok(Some(Viewer {
                caller: Caller::Local,
                csrf: self.open_csrf.clone(),
                session: None,
            }));
        }
        let Some(id) = cookie(headers, SESSION_COOKIE) else {
            return Ok(None);
        };
        // Ended, unknown, or its token revoked since: no viewer.
        Ok(st
            .runtime
            .ui_session(&crate::auth::hash_token(&id))
            .await?
            .map(|(session, holder)| Viewer {
                caller: match holder.user_key {
                    Some(user_key) => Caller::Member {
                        name: holder.name,
                        user_key,
                    },
                    None => Caller::Token(holder.name),
                },
                csrf: session.csrf,
                session: Some(id),
            }))
    }

    /// The request back when its CSRF token is right for who sends it (the
    /// login form's own token on `/ui/login`); `None` otherwise.
    pub async fn check_csrf(&self, req: Request) -> Option<Request> {
        let st = self.state.get()?.clone();
        let expected = if req.uri().path() == "/ui/login" {
            cookie(req.headers(), LOGIN_COOKIE)?
        } else {
            self.viewer(&st, req.headers()).await.ok()??.csrf
        };
        let (req, sent) = csrf_of(req).await?;
        same(&sent, &expected).then_some(req)
    }
}

/// The value of cookie `name` in `headers`.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The CSRF token a request carries: the `X-CSRF-Token` header, or the
/// `csrf` field of a form body (read, then put back for the handler).
async fn csrf_of(req: Request) -> Option<(Request, String)> {
    if let Some(v) = req
        .headers()
        .get("x-csrf-token")
        .and_then(|v| v.to_str().ok())
    {
        let v = v.to_owned();
        return Some((req, v));
    }
    let is_form = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !is_form {
        return None;
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES).await.ok()?;
    let token = form_field(&bytes, CSRF_FIELD);
    let req = Request::from_parts(parts, Body::from(bytes));
    Some((req, token?))
}

/// One field of an `application/x-www-form-urlencoded` body.
pub fn form_field(body: &[u8], name: &str) -> Option<String> {
    url_pairs(body)
        .into_iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
}

/// The pairs of a urlencoded string (`+` is a space, `%XX` a byte).
pub fn url_pairs(body: &[u8]) -> Vec<(String, String)> {
    body.split(|b| *b == b'&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut it = p.splitn(2, |b| *b == b'=');
            let k = decode(it.next().unwrap_or_default());
            let v = decode(it.next().unwrap_or_default());
            (k, v)
        })
        .collect()
}

/// A percent-encoded path segment, decoded (`+` stays a plus sign in a
/// path; bad escapes are kept as they are).
pub fn percent_decode(s: &str) -> String {
    decode(s.replace('+', "%2B").as_bytes())
}

fn decode(s: &[u8]) -> String {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < s.len() => {
                let hex = std::str::from_utf8(&s[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes `s` for a query value or a path segment.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The door's check of `Origin: null` requests: the dashboard's CSRF token.
pub struct UiCsrf(pub Arc<Sessions>);

impl CsrfValidator for UiCsrf {
    fn validate(&self, req: Request) -> BoxFuture<'static, Option<Request>> {
        let sessions = self.0.clone();
        Box::pin(async move {
            if !req.uri().path().starts_with("/ui/") {
                // No other route takes a CSRF token.
                return None;
            }
            sessions.check_csrf(req).await
        })
    }
}

/// A path inside the dashboard to go back to (`next`), or `/ui`.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n)
            if (n == "/ui" || n.starts_with("/ui/") || n.starts_with("/ui?"))
                && !n.contains("//")
                && !n.contains('\\')
                && !n.bytes().any(|b| b.is_ascii_control()) =>
        {
            n.to_owned()
        }
        _ => "/ui".to_owned(),
    }
}

/// The gate on every `/ui` route but the login page and the assets: a
/// viewer or a redirect to the login; a state-changing request also needs
/// its CSRF token.
pub async fn gate(
    State((st, sessions)): State<(AppState, Arc<Sessions>)>,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path();
    if path == "/ui/login" || path.starts_with("/ui/assets/") {
        return next.run(req).await;
    }
    let viewer = match sessions.viewer(&st, req.headers()).await {
        Ok(v) => v,
        Err(e) => return super::layout::error_page(&e).into_response(),
    };
    let Some(viewer) = viewer else {
        if req.method() == Method::GET || req.method() == Method::HEAD {
            let here = req
                .uri()
                .path_and_query()
                .map_or("/ui", |p| p.as_str())
                .to_owned();
            return Redirect::to(&format!("/ui/login?next={}", encode(&here))).into_response();
        }
        return super::layout::status_page(
            axum::http::StatusCode::UNAUTHORIZED,
            "Not logged in",
            "Log in again: your session ended.",
        )
        .into_response();
    };
    if viewer.member().is_some() && !member_page(req.method(), req.uri().path()) {
        return super::layout::status_page(
            axum::http::StatusCode::FORBIDDEN,
            "Forbidden",
            "This page needs an operator token; yours shows only your own runs and confirmations.",
        );
    }
    if viewer.member().is_some() && req.uri().path() == "/ui" {
        return Redirect::to("/ui/runs").into_response();
    }
    if !matches!(*req.method(), Method::GET | Method::HEAD) {
        let expected = viewer.csrf.clone();
        match csrf_of(req).await {
            Some((r, sent)) if same(&sent, &expected) => req = r,
            _ => {
                return super::layout::status_page(
                    axum::http::StatusCode::FORBIDDEN,
                    "Refused",
                    "This form is out of date or did not come from this dashboard; reload the page and try again.",
                )
                .into_response();
            }
        }
    }
    req.extensions_mut().insert(viewer);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded() {
        let body = b"token=hth_a%2Bb&csrf=x+y&next=%2Fui%2Fruns";
        assert_eq!(form_field(body, "token").as_deref(), Some("hth_a+b"));
        assert_eq!(form_field(body, "csrf").as_deref(), Some("x y"));
        assert_eq!(form_field(body, "next").as_deref(), Some("/ui/runs"));
        assert_eq!(form_field(b"a=%zz%4", "a").as_deref(), Some("%zz%4"));
        assert_eq!(form_field(b"", "a"), None);
    }

    #[test]
    fn next_stays_inside_the_dashboard() {
        assert_eq!(
            safe_next(Some("/ui/runs?status=failed")),
            "/ui/runs?status=failed"
        );
        for bad in [
            "//evil.example/ui",
            "https://evil.example",
            "/ui//x",
            "/uix",
            "/ui/\\x",
            "/v1/runs",
        ] {
            assert_eq!(safe_next(Some(bad)), "/ui", "{bad}");
        }
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut h = HeaderMap::new();
        h.insert(COOKIE, "a=1; hearth_session=abc; b=2".parse().unwrap());
        assert_eq!(cookie(&h, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(cookie(&h, "c"), None);
    }
}

#[cfg(test)]
mod member_tests {
    use super::*;

    #[test]
    fn a_member_opens_runs_and_confirmations_only() {
        for (m, p) in [
            (Method::GET, "/ui/runs"),
            (Method::GET, "/ui/runs/run_1"),
            (Method::POST, "/ui/runs/run_1/cancel"),
            (Method::GET, "/ui/confirmations"),
            (Method::POST, "/ui/confirmations/run_1"),
            (Method::POST, "/ui/logout"),
        ] {
            assert!(member_page(&m, p), "{m} {p}");
        }
        for (m, p) in [
            (Method::GET, "/ui/settings"),
            (Method::GET, "/ui/events"),
            (Method::POST, "/ui/threads/k/settings"),
            (Method::POST, "/ui/jobs/j/run"),
            (Method::GET, "/ui/usage.csv"),
            (Method::POST, "/ui/runs"),
        ] {
            assert!(!member_page(&m, p), "{m} {p}");
        }
    }
}
