//! The guarded fetch: redirects by hand, a capped body, text only.

use std::collections::HashSet;
use std::error::Error as StdError;

use reqwest::{Client, Response, StatusCode, Url, header};
use serde_json::{Value, json};

use super::WebFetchConfig;
use super::guard::{self, Allowance, Refusal};
use super::resolve::{GuardedResolver, LookupFailed};
use super::text;
use crate::ToolError;

/// A client whose every connection goes through the guard, plus the limits.
pub(crate) struct Fetcher {
    /// The client, or why it could not be built (reported per call).
    client: Result<Client, String>,
    /// Public addresses plus the test-only allowance.
    allow: Allowance,
    /// Body cap in bytes.
    max_body_bytes: usize,
    /// Redirects followed at most.
    max_redirects: usize,
}

/// A fetched text document.
pub(crate) struct Page {
    /// The final URL, after redirects.
    pub url: Url,
    /// The final HTTP status.
    pub status: u16,
    /// The content type's essence, e.g. `text/html`.
    pub content_type: String,
    /// The HTML title, for HTML.
    pub title: Option<String>,
    /// The whole text (HTML already reduced).
    pub text: String,
}

impl Fetcher {
    /// A fetcher with `config`'s limits and allowances.
    pub(crate) fn new(config: &WebFetchConfig) -> Self {
        let allow = Allowance {
            for_tests: config.allow_for_tests,
        };
        let resolver = GuardedResolver::new(allow, &config.resolve_overrides);
        // No automatic redirects (each hop must be re-checked), no proxy (a
        // proxy would resolve and connect on our behalf, unchecked).
        let client = hearth_http::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .referer(false)
            .connect_timeout(config.connect_timeout)
            .timeout(config.timeout)
            .user_agent(config.user_agent.clone())
            .dns_resolver(resolver)
            .build()
            .map_err(|e| error_chain(&e));
        Self {
            client,
            allow,
            max_body_bytes: config.max_body_bytes,
            max_redirects: config.max_redirects,
        }
    }

    /// Fetches `raw`, following at most `max_redirects` redirects, each
    /// re-checked.
    pub(crate) async fn fetch(&self, raw: &str) -> Result<Page, ToolError> {
        let client = self
            .client
            .as_ref()
            .map_err(|e| ToolError(format!("web_fetch is unavailable: {e}")))?;
        let mut url = guard::check_url(raw, &self.allow).map_err(|r| refused(&r, None))?;
        let mut seen: HashSet<String> = HashSet::new();
        seen.insert(without_fragment(&url));
        let mut redirects = 0usize;
        loop {
            let hop = (redirects > 0).then_some(&url);
            let response = client
                .get(url.clone())
                .header(
                    header::ACCEPT,
                    "text/html, application/xhtml+xml, application/json, \
                     application/xml;q=0.9, text/*;q=0.8",
                )
                .send()
                .await
                .map_err(|e| send_error(&e, &url, hop))?;
            // Belt and braces: the resolver and the literal check already
            // decided, but the peer is what was actually reached.
            if let Some(peer) = response.remote_addr()
                && let Err(why) = self.allow.allows(peer)
            {
                return Err(refused(&Refusal::Peer(peer, why), hop));
            }
            let status = response.status();
            let location = response
                .headers()
                .get(header::LOCATION)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            let Some(location) = location.filter(|_| is_redirect(status)) else {
                return self.read(url, response).await;
            };
            if redirects >= self.max_redirects {
                return Err(ToolError(format!(
                    "refused: too many redirects ({})",
                    self.max_redirects
                )));
            }
            let next = url.join(location.trim()).map_err(|e| {
                ToolError(format!(
                    "refused: redirect to {location:?} (not a valid URL: {e})"
                ))
            })?;
            guard::check_parsed(&next, absolute(&location), &self.allow)
                .map_err(|r| refused(&r, Some(&next)))?;
            if !seen.insert(without_fragment(&next)) {
                return Err(ToolError(format!("refused: redirect loop at {next}")));
            }
            tracing::debug!(from = %url, to = %next, "web_fetch: following redirect");
            redirects += 1;
            url = next;
        }
    }

    /// Reads a final response: text-like types only, body capped while it
    /// streams.
    async fn read(&self, url: Url, mut response: Response) -> Result<Page, ToolError> {
        let status = response.status().as_u16();
        let declared = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| essence(&String::from_utf8_lossy(v.as_bytes())));
        if let Some(ct) = declared.as_deref().filter(|ct| !is_text_like(ct)) {
            return Err(ToolError(format!(
                "refused: content type {ct} is not text (web_fetch reads HTML, text, JSON and XML)"
            )));
        }
        let too_large = || {
            ToolError(format!(
                "response larger than {} bytes",
                self.max_body_bytes
            ))
        };
        if response
            .content_length()
            .is_some_and(|n| n > self.max_body_bytes as u64)
        {
            return Err(too_large());
        }
        // Counted while streaming: Content-Length may be absent or a lie.
        let mut body: Vec<u8> = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| ToolError(format!("reading {url} failed: {}", error_chain(&e))))?
        {
            if body.len() + chunk.len() > self.max_body_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        let content_type = match declared {
            Some(ct) => ct,
            // Undeclared: accept only what does not look binary.
            None if body.iter().take(4096).any(|&b| b == 0) => {
                return Err(ToolError(
                    "refused: response has no content type and looks binary".into(),
                ));
            }
            None => "text/plain".into(),
        };
        let decoded = String::from_utf8_lossy(&body);
        let (title, text) =
            if content_type == "text/html" || content_type == "application/xhtml+xml" {
                let e = text::html_to_text(&decoded);
                (e.title, e.text)
            } else {
                (None, decoded.into_owned())
            };
        Ok(Page {
            url,
            status,
            content_type,
            title,
            text,
        })
    }
}

impl Page {
    /// The tool's JSON result, text cut to `max_chars` characters.
    pub(crate) fn to_json(&self, max_chars: usize) -> Value {
        let total = self.text.chars().count();
        let truncated = total > max_chars;
        let text = if truncated {
            let cut: String = self.text.chars().take(max_chars).collect();
            format!(
                "{cut}\n\n[truncated: showing the first {max_chars} of {total} characters; \
                 ask with a larger max_chars for more]"
            )
        } else {
            self.text.clone()
        };
        json!({
            "url": self.url.as_str(),
            "status": self.status,
            "content_type": self.content_type,
            "title": self.title,
            "text": text,
            "truncated": truncated,
        })
    }
}

/// Statuses followed as redirects (all re-issued as GET).
fn is_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// A `Location` value may name a host by itself when it has a scheme or
/// starts with `//`; only then is its host text worth comparing.
fn absolute(location: &str) -> Option<&str> {
    let l = location.trim();
    let has_scheme = l.split_once(':').is_some_and(|(s, _)| {
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    if has_scheme || l.starts_with("//") || l.starts_with("\\\\") {
        Some(l)
    } else {
        None
    }
}

/// The loop-detection key: fragments never reach the server.
fn without_fragment(url: &Url) -> String {
    let mut u = url.clone();
    u.set_fragment(None);
    u.into()
}

/// `text/HTML; charset=x` → `text/html`.
fn essence(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// text/*, JSON, XML, XHTML and the +json/+xml families.
fn is_text_like(essence: &str) -> bool {
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json" | "application/xml" | "application/xhtml+xml"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

/// A refusal as the model sees it; `hop` is the redirect target, if any.
fn refused(r: &Refusal, hop: Option<&Url>) -> ToolError {
    ToolError(match hop {
        None => format!("refused: {}", r.long()),
        Some(url) => format!("refused: redirect to {url} ({})", r.short()),
    })
}

/// Maps a send error, surfacing the guard's own refusal from deep in the
/// connector's error chain.
fn send_error(e: &reqwest::Error, url: &Url, hop: Option<&Url>) -> ToolError {
    let mut cur: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<Refusal>() {
            return refused(r, hop);
        }
        if let Some(l) = err.downcast_ref::<LookupFailed>() {
            return ToolError(l.to_string());
        }
        cur = err.source();
    }
    if e.is_timeout() {
        return ToolError(format!("fetching {url} timed out"));
    }
    ToolError(format!("fetching {url} failed: {}", error_chain(e)))
}

/// An error and its sources, joined with ": ".
fn error_chain(e: &(dyn StdError + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cur = e.source();
    while let Some(err) = cur {
        let s = err.to_string();
        if parts.last() != Some(&s) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}
