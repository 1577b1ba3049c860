//! Safe web access for tools: the SSRF-guarded `web_fetch` tool, and
//! `web_search` ([`search`]) over an operator-configured backend.
//!
//! The model chooses the URL, so every URL is hostile until checked:
//!
//! - only `http`/`https`, ports 80 and 443, no credentials in the URL;
//! - IP-literal hosts (in any spelling the URL parser accepts: decimal,
//!   octal, hex, shortened, IPv6, IPv4-mapped) must be public
//!   ([`guard::is_public`]); public IPv4 literals in obfuscated spellings
//!   are refused too;
//! - names are resolved by [`resolve::GuardedResolver`], which drops every
//!   non-public address, so the connection goes to an address that was
//!   checked and there is no second lookup for DNS rebinding to exploit;
//! - redirects are followed by hand (at most 5), each hop checked again;
//! - the body is capped while it streams and must be text-like; HTML is
//!   reduced to readable text ([`text::html_to_text`]).

pub mod guard;
pub mod resolve;
pub mod search;
pub mod text;

mod fetch;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use hearth_core::ToolSpec;
use serde_json::{Value, json};

use crate::{Tool, ToolClass, ToolContext, ToolError};

/// Characters of text returned when the model does not say.
pub const DEFAULT_MAX_CHARS: usize = 20_000;

/// Upper bound for the `max_chars` argument.
pub const MAX_CHARS_LIMIT: usize = 200_000;

/// Limits and (test-only) allowances for [`WebFetch`].
#[derive(Debug, Clone)]
pub struct WebFetchConfig {
    /// Largest body read, in bytes; larger responses are an error.
    pub max_body_bytes: usize,
    /// Redirects followed before giving up.
    pub max_redirects: usize,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole fetch, redirects included.
    pub timeout: Duration,
    /// `User-Agent` header sent.
    pub user_agent: String,
    /// TEST ONLY. One non-public socket address (IP *and* port) the guard
    /// lets through, so tests can serve a fake on loopback. Never set it in
    /// production: `None` means loopback and private addresses are always
    /// refused.
    pub allow_for_tests: Option<SocketAddr>,
    /// TEST ONLY. Fixed answers for host names (lower case), used instead of
    /// DNS, e.g. `public.test` → the loopback fake. The answers still pass
    /// through the address policy. Empty in production.
    pub resolve_overrides: HashMap<String, Vec<SocketAddr>>,
}

impl Default for WebFetchConfig {
    fn default() -> Self {
        Self {
            max_body_bytes: 2 * 1024 * 1024,
            max_redirects: 5,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
            user_agent: concat!("hearth-web-fetch/", env!("CARGO_PKG_VERSION")).into(),
            allow_for_tests: None,
            resolve_overrides: HashMap::new(),
        }
    }
}

/// `web_fetch`: fetches a public http(s) URL and returns its text.
pub struct WebFetch {
    /// Name, description, argument schema.
    spec: ToolSpec,
    /// The guarded client.
    fetcher: fetch::Fetcher,
    /// Deadline for one whole call.
    timeout: Duration,
}

impl WebFetch {
    /// The tool with `config`. Never fails: should the HTTP client not build
    /// (e.g. no TLS roots), each call reports that as its error instead.
    pub fn new(config: WebFetchConfig) -> Self {
        Self {
            spec: ToolSpec {
                name: "web_fetch".into(),
                description: "Fetch a public web page or document over http(s) and return \
                              its readable text (HTML is reduced to text; JSON, XML and plain \
                              text are returned as is). Private, local and cloud-metadata \
                              addresses are refused."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "url": {
                            "type": "string",
                            "description": "Absolute http:// or https:// URL"
                        },
                        "max_chars": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_CHARS_LIMIT,
                            "description": "Most characters of text to return (default 20000)"
                        }
                    },
                    "required": ["url"],
                    "additionalProperties": false
                }),
            },
            fetcher: fetch::Fetcher::new(&config),
            timeout: config.timeout,
        }
    }
}

impl Default for WebFetch {
    fn default() -> Self {
        Self::new(WebFetchConfig::default())
    }
}

#[async_trait::async_trait]
impl Tool for WebFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn untrusted(&self) -> bool {
        true
    }

    fn capability(&self) -> Option<&'static str> {
        Some("web.fetch")
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        if let Some(obj) = args.as_object()
            && let Some(k) = obj
                .keys()
                .find(|k| !matches!(k.as_str(), "url" | "max_chars"))
        {
            return Err(ToolError(format!("unknown argument {k:?}")));
        }
        let url = match args.get("url") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.as_str(),
            None | Some(Value::Null) => return Err(ToolError("url is required".into())),
            Some(_) => return Err(ToolError("url must be a non-empty string".into())),
        };
        let max_chars = match args.get("max_chars") {
            None | Some(Value::Null) => DEFAULT_MAX_CHARS,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=MAX_CHARS_LIMIT).contains(n))
                .ok_or_else(|| {
                    ToolError(format!(
                        "max_chars must be an integer from 1 to {MAX_CHARS_LIMIT}"
                    ))
                })?,
        };
        // One deadline for the whole fetch: per-request timeouts alone would
        // let a chain of slow redirects take max_redirects times as long.
        let page = tokio::time::timeout(self.timeout, self.fetcher.fetch(url))
            .await
            .map_err(|_| {
                ToolError(format!(
                    "fetching {url} timed out after {} s",
                    self.timeout.as_secs_f32()
                ))
            })??;
        Ok(page.to_json(max_chars))
    }
}

/// Fetches a small document (an app manifest) from `raw` through the same
/// guard as `web_fetch`: HTTPS only, public addresses only, no redirects
/// (give the final address), the body capped at `max_bytes` while it
/// streams. `allow_loopback` (tests only, `[apps] allow_loopback_urls`)
/// lets exactly the URL's own loopback address and port through, over
/// plain HTTP too, so a test can serve the document locally.
pub async fn fetch_document(
    raw: &str,
    max_bytes: usize,
    allow_loopback: bool,
) -> Result<String, ToolError> {
    let url = reqwest::Url::parse(raw.trim())
        .map_err(|e| ToolError(format!("{raw:?} is not a URL: {e}")))?;
    let loopback = url
        .host_str()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
        .and_then(|h| h.parse::<std::net::IpAddr>().ok())
        .filter(std::net::IpAddr::is_loopback);
    let test_addr = loopback
        .filter(|_| allow_loopback)
        .and_then(|ip| Some(SocketAddr::new(ip, url.port_or_known_default()?)));
    if url.scheme() != "https" && test_addr.is_none() {
        return Err(ToolError(format!(
            "refused: only https:// addresses are fetched, not {}://",
            url.scheme()
        )));
    }
    let config = WebFetchConfig {
        max_body_bytes: max_bytes,
        max_redirects: 0,
        timeout: Duration::from_secs(20),
        allow_for_tests: test_addr,
        ..WebFetchConfig::default()
    };
    let page = fetch::Fetcher::new(&config).fetch(url.as_str()).await?;
    if !(200..300).contains(&page.status) {
        return Err(ToolError(format!(
            "{} answered HTTP {} (redirects are not followed: give the final address)",
            page.url, page.status
        )));
    }
    Ok(page.text)
}
