//! The one HTTP provider every streaming adapter is: [`HttpProvider`] over a
//! [`WireFormat`]. The provider owns what all vendors share (the config and
//! its redacting `Debug`, validation, the key and extra headers, sending,
//! error bodies, the stream driver); a wire format owns only what differs
//! (where a call goes, how the key is sent, the request body, the stream's
//! events). A new vendor is a new `WireFormat` in its own module, never a
//! copy of this file.
//!
//! A trait rather than an enum of wire formats (codex's `WireApi`): each
//! vendor's request and event types stay private to its module, the driver
//! is monomorphised per format (no dispatch on the hot path of decoding),
//! and adding a format touches no shared `match`.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_core::ChatRequest;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};

use crate::classify::ErrorFacts;
use crate::decoder::{EventDecoder, EventFormat};
use crate::transport::{self, CallContext, ErrorBody};
use crate::{Capabilities, ErrorKind, EventStream, LlmError, Provider};

/// Where a wire format's calls go, after the base URL.
pub enum Route {
    /// The same path for every call, e.g. `/v1/messages`.
    Fixed(&'static str),
    /// A path naming the model, or why the model name cannot be one.
    PerModel(fn(&str) -> Result<String, String>),
}

/// How a wire format sends the API key: header `name`, value `prefix` + key.
pub struct KeyHeader {
    /// Built with `HeaderName::from_static` in a constant, so a name that is
    /// not a valid lowercase header name fails the build, not a call.
    pub name: HeaderName,
    /// What goes before the key, e.g. `Bearer `.
    pub prefix: &'static str,
}

impl KeyHeader {
    /// `Authorization: Bearer <key>`.
    pub const BEARER: Self = Self {
        name: AUTHORIZATION,
        prefix: "Bearer ",
    };
}

/// One vendor's API as [`HttpProvider`] speaks it. The value holds the
/// vendor's own settings (e.g. Anthropic's `max_tokens`); everything else a
/// call needs is the provider's. Implemented by the vendor modules of this
/// crate only: its items name crate-private types.
pub trait WireFormat: Clone + fmt::Debug + Send + Sync + 'static {
    /// The per-answer state of the stream decoder.
    type Events: EventFormat;
    /// Where calls go.
    const ROUTE: Route;
    /// How the key is sent.
    const KEY: KeyHeader;
    /// The row of the capability matrix, before config overrides.
    const CAPABILITIES: Capabilities;
    /// The base URL an empty `base_url` stands for, if the vendor has one.
    const DEFAULT_BASE_URL: Option<&'static str>;
    /// The vendor's embeddings API, if it has one hearth speaks.
    const EMBEDDINGS: Option<crate::embeddings::EmbeddingsApi> = None;

    /// Checks the vendor's settings against the parsed base or endpoint URL;
    /// the error says what is wrong.
    fn validate(&self, _url: &Url) -> Result<(), String> {
        Ok(())
    }

    /// Adds the vendor's own fixed headers (after the key, before the
    /// configured extra headers).
    fn headers(&self, _headers: &mut HeaderMap) -> Result<(), String> {
        Ok(())
    }

    /// The JSON body of a call, from `request`; `provider` is the configured
    /// name, which decides whose signed reasoning may go back.
    fn body(&self, request: &ChatRequest, provider: &str) -> Result<Vec<u8>, String>;
}

/// Settings of one endpoint of wire format `W`: what every vendor has, plus
/// the vendor's own in `wire`.
#[derive(Clone)]
pub struct HttpConfig<W> {
    /// The provider's configured name, used in errors and to recognise its
    /// own signed reasoning in history.
    pub name: String,
    /// The base URL; the wire format's path is appended (a trailing slash
    /// is tolerated).
    pub base_url: String,
    /// Sent in the wire format's key header when set.
    pub api_key: Option<String>,
    /// Where the key came from (the environment variable named by
    /// `api_key_env`, or `secret <name>`), named in errors so a failed call
    /// says which key it used; never the key itself.
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Longest gap between two chunks of a streamed answer.
    pub idle_timeout: Duration,
    /// The vendor's own settings.
    pub wire: W,
}

impl<W: WireFormat + Default> HttpConfig<W> {
    /// A config without key or extra headers, with the vendor's default
    /// settings and 60 s request and idle timeouts. An empty `base_url`
    /// means the vendor's default, where it has one.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        let mut base_url = base_url.into();
        if let (true, Some(default)) = (base_url.is_empty(), W::DEFAULT_BASE_URL) {
            default.clone_into(&mut base_url);
        }
        Self {
            name: name.into(),
            base_url,
            api_key: None,
            api_key_env: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            wire: W::default(),
        }
    }
}

// Hand-written so the key and header values (often secrets too) never reach logs.
impl<W: fmt::Debug> fmt::Debug for HttpConfig<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.headers.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("HttpConfig")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("api_key_env", &self.api_key_env)
            .field("headers", &header_names)
            .field("request_timeout", &self.request_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("wire", &self.wire)
            .finish()
    }
}

/// A `Provider` speaking wire format `W` over HTTP with SSE answers.
#[derive(Clone)]
pub struct HttpProvider<W> {
    name: Arc<str>,
    /// The endpoint for a fixed route; the base URL for a per-model one.
    url: Url,
    headers: HeaderMap,
    client: reqwest::Client,
    request_timeout: Duration,
    idle_timeout: Duration,
    /// Appended to the errors of a call: the URL and the key's source.
    call_context: Arc<CallContext>,
    wire: W,
}

// Hand-written: the header map holds the key.
impl<W: fmt::Debug> fmt::Debug for HttpProvider<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpProvider")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .field("wire", &self.wire)
            .finish_non_exhaustive()
    }
}

impl<W: WireFormat> HttpProvider<W> {
    /// Validates `config` (an http(s) base URL, well-formed header names and
    /// values, the wire format's own settings) and builds the provider on
    /// `client`.
    pub fn new(config: HttpConfig<W>, client: reqwest::Client) -> Result<Self, LlmError> {
        let HttpConfig {
            name,
            base_url,
            api_key,
            api_key_env,
            headers: extra,
            request_timeout,
            idle_timeout,
            wire,
        } = config;
        let invalid = |msg: String| LlmError::new(name.as_str(), ErrorKind::InvalidRequest, msg);
        let base = base_url.trim_end_matches('/');
        let endpoint = match W::ROUTE {
            Route::Fixed(path) => Cow::Owned(format!("{base}{path}")),
            Route::PerModel(_) => Cow::Borrowed(base),
        };
        let url = Url::parse(&endpoint)
            .map_err(|e| invalid(format!("base_url {base_url:?} is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "base_url {base_url:?} must use http or https"
            )));
        }
        wire.validate(&url).map_err(invalid)?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &api_key {
            // Sensitive, so it never shows in logs or debug output.
            let mut value = HeaderValue::from_str(&format!("{}{key}", W::KEY.prefix))
                .map_err(|_| invalid("api_key holds characters not allowed in a header".into()))?;
            value.set_sensitive(true);
            headers.insert(W::KEY.name, value);
        }
        wire.headers(&mut headers).map_err(invalid)?;
        for (k, v) in &extra {
            let hname = HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| invalid(format!("invalid header name {k:?}")))?;
            // Neither echoed nor shown: the value may be a credential too.
            let mut value = HeaderValue::from_str(v)
                .map_err(|_| invalid(format!("invalid value for header {k:?}")))?;
            value.set_sensitive(true);
            headers.append(hname, value);
        }
        let call_context = Arc::new(CallContext::new(
            &url,
            api_key.is_some(),
            api_key_env.as_deref(),
        ));
        Ok(Self {
            name: Arc::from(name),
            url,
            headers,
            client,
            request_timeout,
            idle_timeout,
            call_context,
            wire,
        })
    }

    /// The configured name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The endpoint for a fixed route, the base URL for a per-model one.
    pub(crate) fn endpoint(&self) -> &Url {
        &self.url
    }

    /// The key, vendor and configured headers every call sends.
    pub(crate) fn header_map(&self) -> &HeaderMap {
        &self.headers
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        &self.client
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    pub(crate) fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    /// The error context of a call to `url`.
    pub(crate) fn context_for(&self, url: &Url) -> CallContext {
        self.call_context.with_url(url)
    }

    fn invalid(&self, message: String) -> LlmError {
        LlmError::new(&*self.name, ErrorKind::InvalidRequest, message)
    }

    /// The URL a call for `model` goes to, and the context its errors carry.
    pub(crate) fn target(&self, model: &str) -> Result<(Url, Arc<CallContext>), LlmError> {
        match W::ROUTE {
            Route::Fixed(_) => Ok((self.url.clone(), Arc::clone(&self.call_context))),
            Route::PerModel(path) => {
                let path = path(model).map_err(|m| self.invalid(m))?;
                let base = self.url.as_str().trim_end_matches('/');
                let url = Url::parse(&format!("{base}{path}"))
                    .map_err(|e| self.invalid(format!("cannot build the request URL: {e}")))?;
                let context = Arc::new(self.call_context.with_url(&url));
                Ok((url, context))
            }
        }
    }

    /// Turns a non-2xx response into an error, reading at most 64 KiB of
    /// body for the provider's own code, message and retry delay.
    pub(crate) async fn status_error(&self, resp: reqwest::Response) -> LlmError {
        let body = ErrorBody::read(resp, self.idle_timeout).await;
        let parsed = body.json();
        let facts = parsed
            .as_ref()
            .map(ErrorFacts::from_json)
            .unwrap_or_default()
            .with_status(body.status.as_u16());
        let mut message = format!("HTTP {}", body.status);
        facts.describe(&mut message);
        let mut err = body.error(&self.name, facts.kind(), message);
        // A Google-style body says how long to wait in its details, whichever
        // server relays it, when no `retry-after` header did.
        err.retry_after = err.retry_after.or_else(|| facts.retry_after());
        err
    }
}

#[async_trait::async_trait]
impl<W: WireFormat> Provider for HttpProvider<W> {
    fn capabilities(&self) -> Capabilities {
        W::CAPABILITIES
    }

    fn embeds(&self) -> bool {
        W::EMBEDDINGS.is_some()
    }

    async fn embed(
        &self,
        model: &str,
        inputs: &[String],
    ) -> Result<crate::embeddings::Embeddings, LlmError> {
        match W::EMBEDDINGS {
            Some(api) => {
                let mut all = crate::embeddings::Embeddings {
                    vectors: Vec::with_capacity(inputs.len()),
                    usage: hearth_core::Usage::default(),
                };
                for batch in inputs.chunks(crate::embeddings::MAX_BATCH) {
                    let part = match api {
                        crate::embeddings::EmbeddingsApi::OpenAi => {
                            self.embed_openai(model, batch).await?
                        }
                        crate::embeddings::EmbeddingsApi::Gemini => {
                            self.embed_gemini(model, batch).await?
                        }
                    };
                    all.vectors.extend(part.vectors);
                    if let Some(n) = part.usage.input_tokens {
                        all.usage.input_tokens = Some(all.usage.input_tokens.unwrap_or(0) + n);
                    }
                }
                Ok(all)
            }
            None => Err(crate::embeddings::unsupported(&self.name)),
        }
    }

    async fn stream(&self, request: &ChatRequest) -> Result<EventStream, LlmError> {
        let (url, context) = self.target(&request.model)?;
        let body = self
            .wire
            .body(request, &self.name)
            .map_err(|m| self.invalid(m))?;
        let started = Instant::now();
        let resp = transport::send(
            &self.name,
            &self.client,
            url,
            &self.headers,
            body,
            self.request_timeout,
            started,
        )
        .await
        .map_err(|e| e.at(&context))?;
        if !resp.status().is_success() {
            return Err(self.status_error(resp).await.at(&context));
        }
        transport::check_event_stream(&self.name, &resp).map_err(|e| e.at(&context))?;
        Ok(transport::event_stream(
            EventDecoder::<W::Events>::new(Arc::clone(&self.name)),
            resp.bytes_stream(),
            self.idle_timeout,
            started,
            context,
        ))
    }
}

/// `value` as a JSON request body; the error is the message of an
/// `InvalidRequest`.
pub(crate) fn encode(value: &impl serde::Serialize) -> Result<Vec<u8>, String> {
    serde_json::to_vec(value).map_err(|e| format!("cannot encode request: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::AnthropicWire;
    use crate::gemini::GeminiWire;
    use crate::openai::OpenAiWire;
    use crate::openai_compat::OpenAiCompatWire;

    /// What every wire format's provider refuses or redacts alike; `base`
    /// is a valid base URL with a trailing slash, `url` the endpoint a call
    /// for model `m` then goes to.
    fn check_config<W: WireFormat + Default>(base: &str, url: &str) {
        let client = reqwest::Client::new();
        let build = |cfg: &HttpConfig<W>| HttpProvider::new(cfg.clone(), client.clone());
        let mut cfg = HttpConfig::<W>::new("p", "ftp://x/v1");
        assert_eq!(build(&cfg).unwrap_err().kind, ErrorKind::InvalidRequest);
        cfg.base_url = "not a url".into();
        assert!(build(&cfg).is_err());
        cfg.base_url = base.into();
        let (got, _) = build(&cfg).unwrap().target("m").unwrap();
        assert_eq!(got.as_str(), url);
        cfg.headers = vec![("bad name".into(), "v".into())];
        assert!(build(&cfg).is_err());
        cfg.headers = vec![("x-ok".into(), "line\nbreak".into())];
        let err = build(&cfg).unwrap_err();
        assert!(!err.message.contains("break"), "{err}");
        cfg.headers.clear();
        cfg.api_key = Some("sk-secret\n".into());
        let err = build(&cfg).unwrap_err();
        assert!(!err.message.contains("sk-secret"), "{err}");
        assert!(!format!("{cfg:?}").contains("sk-secret"));
        cfg.api_key = Some("sk-secret".into());
        cfg.headers = vec![("x-token".into(), "hdr-secret".into())];
        let p = build(&cfg).unwrap();
        for shown in [format!("{cfg:?}"), format!("{p:?}")] {
            assert!(
                !shown.contains("sk-secret") && !shown.contains("hdr-secret"),
                "{shown}"
            );
        }
    }

    #[test]
    fn every_wire_format_validates_and_redacts_its_config() {
        check_config::<AnthropicWire>("http://127.0.0.1:1/", "http://127.0.0.1:1/v1/messages");
        check_config::<OpenAiWire>("http://127.0.0.1:1/v1/", "http://127.0.0.1:1/v1/responses");
        check_config::<OpenAiCompatWire>(
            "http://127.0.0.1:1/v1/",
            "http://127.0.0.1:1/v1/chat/completions",
        );
        check_config::<GeminiWire>(
            "http://127.0.0.1:1/v1beta/",
            "http://127.0.0.1:1/v1beta/models/m:streamGenerateContent?alt=sse",
        );
    }
}
