//! `web_search`: the model's questions to a search backend the operator
//! configured, SearXNG (`/search?format=json`) or the Brave Search API.
//!
//! The backend's address is operator configuration, so unlike `web_fetch`
//! there is no SSRF guard here: a self-hosted SearXNG on loopback is the
//! normal case. What comes back is still the web's text: the tool is
//! untrusted, so the registry delimits its output for the model. Redirects
//! are not followed, so the Brave key never travels to a host it was not
//! configured for.

use std::fmt;
use std::time::Duration;

use hearth_core::ToolSpec;
use reqwest::{Client, Response, StatusCode, Url, header};
use serde::Deserialize;
use serde_json::{Value, json};

use super::text;
use crate::{Tool, ToolClass, ToolContext, ToolError};

/// Results returned when the model does not give a count.
pub const DEFAULT_COUNT: usize = 5;

/// Most results one call returns, whatever the configuration says.
pub const MAX_COUNT: usize = 10;

/// Longest query sent, in characters.
pub const MAX_QUERY_CHARS: usize = 400;

/// Longest snippet returned, in characters: search snippets are teasers,
/// and long ones only spend the model's context.
pub const MAX_SNIPPET_CHARS: usize = 400;

/// Where the Brave Search API lives unless configured otherwise.
pub const BRAVE_BASE_URL: &str = "https://api.search.brave.com";

/// The service queries go to.
#[derive(Clone)]
pub enum SearchBackend {
    /// A SearXNG instance with the JSON format enabled.
    Searxng {
        /// E.g. `http://127.0.0.1:8888`; a path prefix is kept.
        base_url: String,
    },
    /// The Brave Search API.
    Brave {
        /// [`BRAVE_BASE_URL`] unless a test or proxy says otherwise.
        base_url: String,
        /// The `X-Subscription-Token`.
        api_key: String,
    },
}

impl SearchBackend {
    /// The backend's name in errors the model and the operator read.
    fn label(&self) -> &'static str {
        match self {
            Self::Searxng { .. } => "SearXNG",
            Self::Brave { .. } => "Brave Search",
        }
    }
}

impl fmt::Debug for SearchBackend {
    /// The key is a credential: never printed.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Searxng { base_url } => f
                .debug_struct("Searxng")
                .field("base_url", base_url)
                .finish(),
            Self::Brave { base_url, .. } => f
                .debug_struct("Brave")
                .field("base_url", base_url)
                .field("api_key", &"[redacted]")
                .finish_non_exhaustive(),
        }
    }
}

/// The backend and limits of [`WebSearch`].
#[derive(Debug, Clone)]
pub struct WebSearchConfig {
    /// Where queries go.
    pub backend: SearchBackend,
    /// Most results one call returns (at most [`MAX_COUNT`]).
    pub max_results: usize,
    /// Time allowed for one search, connection included.
    pub timeout: Duration,
    /// Largest response body read, in bytes; larger is an error.
    pub max_body_bytes: usize,
    /// `User-Agent` header sent.
    pub user_agent: String,
}

impl WebSearchConfig {
    /// `backend` with the default limits.
    pub fn new(backend: SearchBackend) -> Self {
        Self {
            backend,
            max_results: MAX_COUNT,
            timeout: Duration::from_secs(15),
            max_body_bytes: 1024 * 1024,
            user_agent: concat!("hearth-web-search/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

/// `web_search`: searches the web and returns titles, URLs and snippets.
pub struct WebSearch {
    /// Name, description, argument schema.
    spec: ToolSpec,
    /// The client, or why it could not be built (reported per call).
    client: Result<Client, String>,
    /// Backend and limits.
    config: WebSearchConfig,
}

impl WebSearch {
    /// The tool for `config`. Never fails: should the HTTP client not build
    /// (e.g. no TLS roots), each call reports that as its error instead.
    pub fn new(mut config: WebSearchConfig) -> Self {
        config.max_results = config.max_results.clamp(1, MAX_COUNT);
        let client = hearth_http::client_builder()
            .redirect(reqwest::redirect::Policy::none())
            .referer(false)
            .connect_timeout(config.timeout)
            .timeout(config.timeout)
            .user_agent(config.user_agent.clone())
            .build()
            .map_err(|e| e.to_string());
        Self {
            spec: ToolSpec {
                name: "web_search".into(),
                description: "Search the web. Returns the title, URL and a short snippet of \
                              each result; use web_fetch to read a page."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "query": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_QUERY_CHARS,
                            "description": "What to search for"
                        },
                        "count": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": config.max_results,
                            "description": format!(
                                "How many results to return (default {})",
                                DEFAULT_COUNT.min(config.max_results)
                            )
                        }
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            },
            client,
            config,
        }
    }

    /// The query and result count from the model's arguments (the registry
    /// checked them against the schema; this guards direct callers).
    fn arguments<'a>(&self, args: &'a Value) -> Result<(&'a str, usize), ToolError> {
        if let Some(obj) = args.as_object()
            && let Some(k) = obj
                .keys()
                .find(|k| !matches!(k.as_str(), "query" | "count"))
        {
            return Err(ToolError(format!("unknown argument {k:?}")));
        }
        let query = match args.get("query") {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim(),
            None | Some(Value::Null) => return Err(ToolError("query is required".into())),
            Some(_) => return Err(ToolError("query must be a non-empty string".into())),
        };
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolError(format!(
                "query is longer than {MAX_QUERY_CHARS} characters"
            )));
        }
        let max = self.config.max_results;
        let count = match args.get("count") {
            None | Some(Value::Null) => DEFAULT_COUNT.min(max),
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| ToolError(format!("count must be an integer from 1 to {max}")))?,
        };
        Ok((query, count))
    }

    /// Asks the backend and returns at most `count` results.
    async fn search(
        &self,
        client: &Client,
        query: &str,
        count: usize,
    ) -> Result<Vec<Hit>, ToolError> {
        let backend = &self.config.backend;
        let label = backend.label();
        let request = match backend {
            SearchBackend::Searxng { base_url } => {
                let mut url = endpoint(base_url, "search")?;
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("format", "json");
                client.get(url)
            }
            SearchBackend::Brave { base_url, api_key } => {
                let mut url = endpoint(base_url, "res/v1/web/search")?;
                url.query_pairs_mut()
                    .append_pair("q", query)
                    .append_pair("count", &count.to_string());
                // Built here rather than with `.header(name, &str)` so the
                // value is marked sensitive and a bad key never reaches an
                // error message.
                let mut token = header::HeaderValue::from_str(api_key).map_err(|_| {
                    ToolError(
                        "the Brave Search API key contains characters not allowed in an \
                         HTTP header; check the configured key"
                            .into(),
                    )
                })?;
                token.set_sensitive(true);
                client.get(url).header("X-Subscription-Token", token)
            }
        };
        let response = request
            .header(header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| send_error(label, &e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(status_error(backend, status));
        }
        let body = read_capped(response, self.config.max_body_bytes, label).await?;
        let hits = match backend {
            SearchBackend::Searxng { .. } => parse_searxng(&body),
            SearchBackend::Brave { .. } => parse_brave(&body),
        }
        .map_err(|e| {
            ToolError(format!(
                "{label} sent a response that is not the expected JSON: {e}"
            ))
        })?;
        Ok(hits
            .into_iter()
            .filter(|h| !h.url.is_empty())
            .take(count)
            .collect())
    }
}

#[async_trait::async_trait]
impl Tool for WebSearch {
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
        Some("web.search")
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let (query, count) = self.arguments(&args)?;
        let client = self
            .client
            .as_ref()
            .map_err(|e| ToolError(format!("web_search is unavailable: {e}")))?;
        // The client's timeout covers each request; this one also bounds a
        // body that trickles in slowly.
        let hits = tokio::time::timeout(self.config.timeout, self.search(client, query, count))
            .await
            .map_err(|_| {
                ToolError(format!(
                    "{} did not answer within {} s",
                    self.config.backend.label(),
                    self.config.timeout.as_secs_f32()
                ))
            })??;
        let results: Vec<Value> = hits
            .into_iter()
            .map(|h| json!({ "title": h.title, "url": h.url, "snippet": h.snippet }))
            .collect();
        Ok(json!({ "results": results }))
    }
}

/// One result, cleaned.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Hit {
    title: String,
    url: String,
    snippet: String,
}

/// `{base_url}/{path}`, keeping any path prefix of the base (a SearXNG
/// served under `/searx` is common).
fn endpoint(base_url: &str, path: &str) -> Result<Url, ToolError> {
    let raw = format!("{}/{path}", base_url.trim_end_matches('/'));
    Url::parse(&raw).map_err(|e| {
        ToolError(format!(
            "the search backend's base_url {base_url:?} is not a valid URL: {e}"
        ))
    })
}

/// A failed send, said plainly.
fn send_error(label: &str, e: &reqwest::Error) -> ToolError {
    if e.is_timeout() {
        return ToolError(format!("{label} did not answer in time"));
    }
    let mut why = e.to_string();
    let mut cur = std::error::Error::source(e);
    while let Some(err) = cur {
        let s = err.to_string();
        if !why.ends_with(&s) {
            why.push_str(": ");
            why.push_str(&s);
        }
        cur = err.source();
    }
    ToolError(format!("could not reach {label}: {why}"))
}

/// A non-2xx answer, with the likely fix where there is one.
fn status_error(backend: &SearchBackend, status: StatusCode) -> ToolError {
    let label = backend.label();
    let code = status.as_u16();
    ToolError(match (backend, code) {
        (SearchBackend::Brave { .. }, 401 | 403) => format!(
            "{label} rejected the API key (HTTP {code}); check the key configured in \
             [tools.web_search]"
        ),
        (SearchBackend::Searxng { .. }, 403) => format!(
            "{label} refused the request (HTTP 403); is the json format enabled in its \
             settings.yml (search.formats)?"
        ),
        (_, 429) => format!("{label} is rate limiting searches (HTTP 429); try again later"),
        (_, 300..=399) => format!(
            "{label} answered with a redirect (HTTP {code}); set base_url to the address \
             it redirects to"
        ),
        _ => format!("{label} answered HTTP {code}"),
    })
}

/// The body, refused once it passes `max` bytes (counted while it streams:
/// Content-Length may be absent or a lie).
async fn read_capped(
    mut response: Response,
    max: usize,
    label: &str,
) -> Result<Vec<u8>, ToolError> {
    let too_large = || ToolError(format!("{label} sent a response larger than {max} bytes"));
    if response.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| ToolError(format!("reading the answer of {label} failed: {e}")))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// SearXNG's `/search?format=json`: `results[].title/url/content`, plain text.
fn parse_searxng(body: &[u8]) -> Result<Vec<Hit>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Page {
        results: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        title: Option<String>,
        url: Option<String>,
        content: Option<String>,
    }
    let page: Page = serde_json::from_slice(body)?;
    Ok(page
        .results
        .into_iter()
        .map(|r| Hit {
            title: clean(r.title.as_deref().unwrap_or_default()),
            url: r.url.unwrap_or_default().trim().to_owned(),
            snippet: clean(r.content.as_deref().unwrap_or_default()),
        })
        .collect())
}

/// Brave's web search: `web.results[].title/url/description`. Titles and
/// descriptions carry highlighting markup (`<strong>`) and entities; `web`
/// is absent when there are no web results.
fn parse_brave(body: &[u8]) -> Result<Vec<Hit>, serde_json::Error> {
    #[derive(Deserialize)]
    struct Page {
        web: Option<Web>,
    }
    #[derive(Deserialize)]
    struct Web {
        #[serde(default)]
        results: Vec<Item>,
    }
    #[derive(Deserialize)]
    struct Item {
        title: Option<String>,
        url: Option<String>,
        description: Option<String>,
    }
    let page: Page = serde_json::from_slice(body)?;
    let from_html =
        |s: Option<String>| clean(&text::html_to_text(s.as_deref().unwrap_or_default()).text);
    Ok(page
        .web
        .map(|w| w.results)
        .unwrap_or_default()
        .into_iter()
        .map(|r| Hit {
            title: from_html(r.title),
            url: r.url.unwrap_or_default().trim().to_owned(),
            snippet: from_html(r.description),
        })
        .collect())
}

/// Whitespace collapsed, cut to [`MAX_SNIPPET_CHARS`] characters.
fn clean(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_SNIPPET_CHARS * 4));
    for (i, word) in s.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(word);
    }
    match out.char_indices().nth(MAX_SNIPPET_CHARS) {
        Some((at, _)) => {
            out.truncate(at);
            out.truncate(out.trim_end().len());
            out.push('…');
            out
        }
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_collapses_and_cuts_at_a_character() {
        assert_eq!(clean("  a\n\tb   c "), "a b c");
        let long = "é".repeat(MAX_SNIPPET_CHARS + 5);
        let cut = clean(&long);
        assert_eq!(cut.chars().count(), MAX_SNIPPET_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(
            clean(&"x".repeat(MAX_SNIPPET_CHARS)).len(),
            MAX_SNIPPET_CHARS
        );
    }

    #[test]
    fn brave_markup_is_reduced_to_text() {
        let hits = parse_brave(
            br#"{"type":"search","web":{"results":[{"title":"Rust &amp; <strong>you</strong>",
                "url":"https://r.example/","description":"The <strong>Rust</strong> book"}]}}"#,
        )
        .unwrap();
        assert_eq!(
            hits,
            vec![Hit {
                title: "Rust & you".into(),
                url: "https://r.example/".into(),
                snippet: "The Rust book".into()
            }]
        );
        assert!(parse_brave(br#"{"type":"search"}"#).unwrap().is_empty());
        assert!(parse_brave(b"[]").is_err());
    }

    #[test]
    fn searxng_needs_results_and_tolerates_nulls() {
        let hits = parse_searxng(
            br#"{"results":[{"title":null,"url":"https://a.example/","content":"a < b"}]}"#,
        )
        .unwrap();
        assert_eq!(hits[0].snippet, "a < b");
        assert_eq!(hits[0].title, "");
        assert!(parse_searxng(br#"{"answers":[]}"#).is_err());
    }

    #[test]
    fn the_key_is_not_in_debug_output() {
        let b = SearchBackend::Brave {
            base_url: BRAVE_BASE_URL.into(),
            api_key: "BSA-very-secret".into(),
        };
        let shown = format!("{:?}", WebSearchConfig::new(b));
        assert!(!shown.contains("very-secret"), "{shown}");
    }

    #[test]
    fn endpoints_keep_a_path_prefix() {
        assert_eq!(
            endpoint("http://127.0.0.1:8888/searx/", "search")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8888/searx/search"
        );
        assert!(endpoint("not a url", "search").is_err());
    }
}
