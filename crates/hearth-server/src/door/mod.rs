//! The one door every request passes before anything else looks at it.
//!
//! A loopback hearth without a token trusts whoever can reach it, and a web
//! browser lets any page reach it: a page can send cross-site requests (a
//! form, or `fetch` with a body a CORS preflight does not cover), and a page
//! whose name was rebound to 127.0.0.1 can even read the answers. So, on
//! every route:
//!
//! - **Host** (DNS rebinding): a `Host` that is not a loopback name, the
//!   bind address or a host of `[server] allowed_hosts` gets 403
//!   `forbidden_host`. This holds for the push routes of the chat platforms
//!   too, and for `/healthz`, `/readyz`, `/metrics` and `/openapi.json`
//!   (a rebinding page must not read those either).
//! - **Origin** (cross-site requests): a state-changing request (any method
//!   but GET, HEAD and OPTIONS) whose `Origin` is not this server's own gets
//!   403 `forbidden_origin`; on `/mcp` every request does, as MCP's
//!   transport requires. The push routes of the chat platforms are exempt:
//!   the platform signs each request, and no browser is involved.
//!   `Origin: null` is what Chromium sends for a same-origin form posted
//!   from a page served with `Referrer-Policy: no-referrer` (and what a
//!   sandboxed frame or a `file:` page sends); it passes only with
//!   `Sec-Fetch-Site: same-origin` and a valid CSRF token, checked by a
//!   [`CsrfValidator`] the dashboard plugs in ([`Door::with_csrf`]); only
//!   the dashboard's `/ui` routes take a CSRF token, so elsewhere `null`
//!   is always refused.
//! - **Content-Type**: a JSON body must come as `application/json`
//!   ([`json_content_type`], applied where bodies are parsed), or 415
//!   `unsupported_media_type`; the types a page can send without a
//!   preflight (`text/plain`, forms) never reach a JSON parser.
//!
//! Refusals answer in the surface's own envelope: OpenAI's under `/openai`,
//! the API's everywhere else.

pub mod hosts;

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{CONTENT_TYPE, HOST, ORIGIN};
use axum::http::{HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::future::BoxFuture;

pub use hosts::AllowedHosts;

use crate::error::ApiError;
use crate::openai::OpenAiError;

/// Checks the CSRF token of a browser request that says it is same-origin
/// but carries `Origin: null` (see the module documentation). The
/// dashboard implements it; the door asks it only for such requests.
pub trait CsrfValidator: Send + Sync + 'static {
    /// The request back when its CSRF token is valid (a validator may read
    /// the body to find a form's token, and must then put it back), `None`
    /// to refuse it.
    fn validate(&self, req: Request) -> BoxFuture<'static, Option<Request>>;
}

/// The policy: which names are this server's, and who vouches for a
/// `null` origin.
#[derive(Clone, Default)]
pub struct Door {
    hosts: Arc<AllowedHosts>,
    csrf: Option<Arc<dyn CsrfValidator>>,
}

impl Door {
    /// A door that answers to `hosts` (and takes no `null` origin).
    pub fn new(hosts: AllowedHosts) -> Self {
        Self {
            hosts: Arc::new(hosts),
            csrf: None,
        }
    }

    /// The same door, answering to `hosts` instead.
    pub fn with_hosts(mut self, hosts: AllowedHosts) -> Self {
        self.hosts = Arc::new(hosts);
        self
    }

    /// Lets `Origin: null` requests with `Sec-Fetch-Site: same-origin` pass
    /// when `validator` accepts their CSRF token.
    pub fn with_csrf(mut self, validator: Arc<dyn CsrfValidator>) -> Self {
        self.csrf = Some(validator);
        self
    }

    /// The names this door answers to.
    pub fn hosts(&self) -> &AllowedHosts {
        &self.hosts
    }
}

/// Which part of the server a path belongs to: how it is checked, and in
/// which envelope it is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Surface {
    /// `/v1`, the operational routes, and anything unmatched.
    Api,
    /// `/openai/...`: refused in OpenAI's envelope.
    OpenAi,
    /// `/mcp`: the Origin rule on every method.
    Mcp,
    /// `/channels/...`: webhooks the platform signs; no Origin rule.
    Push,
}

impl Surface {
    fn of(path: &str) -> Self {
        let under = |prefix: &str| {
            path.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        };
        if under("/openai") {
            Self::OpenAi
        } else if under(crate::mcp::PATH) {
            Self::Mcp
        } else if under("/channels") {
            Self::Push
        } else {
            Self::Api
        }
    }
}

/// Why the door refused a request.
enum Refusal {
    Host(String),
    Origin(String),
}

impl Refusal {
    fn respond(self, surface: Surface) -> Response {
        match (surface, self) {
            (Surface::OpenAi, Self::Host(m)) => OpenAiError::ForbiddenHost(m).into_response(),
            (Surface::OpenAi, Self::Origin(m)) => OpenAiError::ForbiddenOrigin(m).into_response(),
            (_, Self::Host(m)) => ApiError::ForbiddenHost(m).into_response(),
            (_, Self::Origin(m)) => ApiError::ForbiddenOrigin(m).into_response(),
        }
    }
}

/// What the door makes of a request.
enum Verdict {
    Pass,
    /// `Origin: null` from a same-origin browser request: the CSRF
    /// validator decides.
    AskCsrf(Arc<dyn CsrfValidator>),
    Refuse(Refusal),
}

/// The request's `Host`: the header, or on HTTP/2 the URI's authority.
fn host_of(req: &Request) -> Option<String> {
    match req.headers().get(HOST) {
        Some(v) => v.to_str().ok().map(str::to_owned),
        None => req.uri().authority().map(|a| a.as_str().to_owned()),
    }
}

fn state_changing(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

impl Door {
    fn decide(&self, req: &Request, surface: Surface) -> Verdict {
        let host = host_of(req);
        let Some(host) = host.filter(|h| self.hosts.allows_host(h)) else {
            tracing::warn!(host = req.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("(none or not text)"), path = %req.uri().path(), "refused a request for another host (DNS rebinding?)");
            return Verdict::Refuse(Refusal::Host(
                "the Host header does not name this server; if hearth is reached under this name, add it to [server] allowed_hosts"
                    .into(),
            ));
        };
        let checked = match surface {
            Surface::Push => false,
            Surface::Mcp => true,
            Surface::Api | Surface::OpenAi => state_changing(req.method()),
        };
        if !checked {
            return Verdict::Pass;
        }
        let mut origins = req.headers().get_all(ORIGIN).iter();
        let (origin, more) = (origins.next(), origins.next().is_some());
        let Some(origin) = origin else {
            // Browsers send Origin with every state-changing request; a
            // client without one is not a browser page.
            return Verdict::Pass;
        };
        let origin = origin.to_str().unwrap_or("").trim();
        if !more && origin != "null" && self.hosts.allows_origin(origin, &host) {
            return Verdict::Pass;
        }
        if !more && origin == "null" {
            let same_origin = req
                .headers()
                .get("sec-fetch-site")
                .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"same-origin"));
            if let (true, Some(csrf)) = (same_origin, &self.csrf) {
                return Verdict::AskCsrf(csrf.clone());
            }
        }
        tracing::warn!(origin, path = %req.uri().path(), "refused a request from another origin (cross-site request?)");
        Verdict::Refuse(Refusal::Origin(format!(
            "a browser page at {origin:?} may not send this request to hearth: only pages of hearth's own origin may; \
             if this is hearth behind a proxy, add the proxy's host name to [server] allowed_hosts"
        )))
    }
}

/// The door as a layer over the whole router.
pub async fn guard(State(door): State<Door>, req: Request, next: Next) -> Response {
    let surface = Surface::of(req.uri().path());
    let route = req.extensions().get::<MatchedPath>().cloned();
    let refusal = match door.decide(&req, surface) {
        Verdict::Pass => return next.run(req).await,
        Verdict::AskCsrf(csrf) => match csrf.validate(req).await {
            Some(req) => return next.run(req).await,
            None => Refusal::Origin(
                "a page with no origin (Origin: null) may send this only with a valid CSRF token"
                    .into(),
            ),
        },
        Verdict::Refuse(r) => r,
    };
    metrics::counter!("hearth_http_refused_total", "reason" => match refusal {
        Refusal::Host(_) => "host",
        Refusal::Origin(_) => "origin",
    })
    .increment(1);
    let mut resp = refusal.respond(surface);
    if let Some(route) = route {
        crate::middleware::label_route(&mut resp, route.as_str());
    }
    resp
}

/// `Ok` when `headers` declare a JSON body: `application/json` (any case),
/// with parameters allowed and a `charset` only of UTF-8, the one JSON
/// allows (RFC 8259). Else the reason, for a 415 `unsupported_media_type`.
pub fn json_content_type(headers: &HeaderMap) -> Result<(), String> {
    let Some(value) = headers.get(CONTENT_TYPE) else {
        return Err("send the body as JSON with Content-Type: application/json".into());
    };
    let value = value.to_str().unwrap_or("");
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(format!(
            "Content-Type {essence:?} is not accepted here; send the body as JSON with Content-Type: application/json"
        ));
    }
    for param in parts {
        let Some((name, v)) = param.split_once('=') else {
            continue;
        };
        let v = v.trim().trim_matches('"');
        if name.trim().eq_ignore_ascii_case("charset")
            && !(v.eq_ignore_ascii_case("utf-8") || v.eq_ignore_ascii_case("utf8"))
        {
            return Err(format!(
                "charset {v:?} is not accepted: JSON is UTF-8; send Content-Type: application/json"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
