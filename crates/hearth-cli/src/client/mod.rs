//! Client commands: talk to a running server over its HTTP API, reading its
//! answers as the server's own response types. One module per command group.

mod apps;
mod budget;
mod channels;
mod cluster;
mod config;
mod credentials;
mod health;
mod jobs;
mod listings;
pub(crate) mod mcp;
pub(crate) mod modes;
mod permissions;
mod router;
mod runs;
mod skills;
mod threads;
mod usage;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use futures_util::StreamExt;
use hearth_core::RunEventKind;
use hearth_llm::sse::SseDecoder;
use hearth_server::dto::ErrorBody;
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Exit;
use crate::cli::{Command, Global};

/// How much of a body that is not what was expected is quoted in an error.
const QUOTE_CHARS: usize = 200;

/// A thin HTTP client of the API.
pub(crate) struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    pub(crate) fn new(g: &Global) -> Result<Self, Exit> {
        let http = hearth_http::client_builder()
            .build()
            .map_err(|e| Exit::from(anyhow::anyhow!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base: base_url(&server_url(g))?,
            token: g.token.clone(),
        })
    }

    /// The server's base URL.
    pub(crate) fn base(&self) -> &str {
        &self.base
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        rb
    }

    pub(crate) async fn send(
        &self,
        rb: reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Exit> {
        rb.send().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot reach hearth at {}: {} (is `hearth serve` running? set --url or HEARTH_URL)",
                self.base,
                e.without_url()
            )
            .into()
        })
    }

    /// Sends the request and reads a success answer as `T`; an error answer
    /// becomes an error that quotes the API's code and message.
    pub(crate) async fn call<T: DeserializeOwned>(
        &self,
        rb: reqwest::RequestBuilder,
    ) -> Result<T, Exit> {
        let resp = self.send(rb).await?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| {
            anyhow::anyhow!("the answer from hearth broke off: {}", e.without_url())
        })?;
        if !status.is_success() {
            return Err(self.api_error(status, &text));
        }
        serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "hearth answered HTTP {} with a body this CLI does not understand ({e}): {} \
                 (are the CLI and the server the same version?)",
                status.as_u16(),
                quote(&text)
            )
            .into()
        })
    }

    /// The error for an unsuccessful answer, with what to do about a 401.
    pub(crate) fn api_error(&self, status: StatusCode, text: &str) -> Exit {
        let Ok(body) = serde_json::from_str::<ErrorBody>(text) else {
            return anyhow::anyhow!(
                "hearth answered HTTP {} without an error body: {}",
                status.as_u16(),
                quote(text)
            )
            .into();
        };
        let mut message = format!(
            "{} ({}, HTTP {})",
            body.error.message,
            body.error.code,
            status.as_u16()
        );
        let code = body.error.code.clone();
        if status == StatusCode::UNAUTHORIZED {
            message.push_str(match self.token {
                None => {
                    "; the CLI sends the token given by --token or the HEARTH_TOKEN \
                     variable (`export HEARTH_TOKEN=<secret>`), and none was given"
                }
                Some(_) => {
                    "; the token given by --token or HEARTH_TOKEN was refused: is it \
                     revoked or mistyped? (`hearth token list` shows the active ones)"
                }
            });
        }
        // A 400 is the server refusing what was asked (an unknown model, a
        // bad level, an empty text): a usage error, exit 2 as clap's own.
        let exit = if status == StatusCode::BAD_REQUEST {
            Exit::config(anyhow::anyhow!(message))
        } else {
            Exit::from(anyhow::anyhow!(message))
        };
        exit.api_code(code)
    }

    /// Sends the request and expects a success without a body (204).
    async fn call_empty(&self, rb: reqwest::RequestBuilder) -> Result<(), Exit> {
        let resp = self.send(rb).await?;
        let status = resp.status();
        if status.is_success() {
            return Ok(());
        }
        let text = resp.text().await.map_err(|e| {
            anyhow::anyhow!("the answer from hearth broke off: {}", e.without_url())
        })?;
        Err(self.api_error(status, &text))
    }

    pub(crate) async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Exit> {
        self.call(self.request(Method::GET, path)).await
    }

    pub(crate) async fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, Exit> {
        self.call(self.request(Method::PUT, path).json(body)).await
    }

    pub(crate) async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, Exit> {
        self.call(self.request(Method::POST, path).json(body)).await
    }

    /// Follows a run's events until `stop` says so or the stream ends.
    /// `stop` sees each event's kind and its data.
    async fn follow(
        &self,
        run_id: &str,
        mut stop: impl FnMut(RunEventKind, &serde_json::Value) -> bool,
    ) -> Result<(), Exit> {
        let resp = self
            .send(self.request(Method::GET, &format!("/v1/runs/{}/events", enc(run_id))))
            .await?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            return Err(self.api_error(status, &text));
        }
        let mut stream = resp.bytes_stream();
        let mut dec = SseDecoder::new();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| anyhow::anyhow!("event stream broke: {}", e.without_url()))?;
            dec.push(&chunk);
            while let Some(ev) = dec
                .next_event()
                .map_err(|e| anyhow::anyhow!("bad event stream: {e}"))?
            {
                let Some(name) = ev.event else { continue };
                // Kinds this CLI does not know (a newer server) are skipped.
                let Ok(kind) = serde_json::from_value::<RunEventKind>(name.into()) else {
                    continue;
                };
                let data = serde_json::from_str(&ev.data).map_err(|e| {
                    anyhow::anyhow!("bad event data from hearth ({e}): {}", quote(&ev.data))
                })?;
                if stop(kind, &data) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// The server's URL when neither `--url` nor `HEARTH_URL` gives one and
/// the configuration names no address to ask.
pub(crate) const DEFAULT_URL: &str = "http://127.0.0.1:7777";

/// The server's URL: `--url`/`HEARTH_URL` when given, else the address the
/// home's configuration binds (`[server] bind` with its environment
/// override, as `hearth serve` reads it), else the default. A replica with
/// its own home and port is then reached with `--home` alone. A
/// configuration that does not load leaves the default: the command's error
/// then names the URL it tried.
pub(crate) fn server_url(g: &Global) -> String {
    if let Some(url) = &g.url {
        return url.clone();
    }
    let bind = crate::serve::home_dir(g)
        .ok()
        .and_then(|home| crate::serve::load_config(g, &home).ok())
        .and_then(|config| config.server.bind.parse().ok());
    given_or_bind(None, bind)
}

/// `given` when there is one, else `bind` as a URL (a wildcard address asked
/// on loopback; port 0 says nothing of where the server listens), else the
/// default.
pub(crate) fn given_or_bind(given: Option<&str>, bind: Option<SocketAddr>) -> String {
    if let Some(url) = given {
        return url.to_owned();
    }
    match bind {
        Some(addr) if addr.port() != 0 => {
            let ip = match addr.ip() {
                IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
                ip => ip,
            };
            format!("http://{}", SocketAddr::new(ip, addr.port()))
        }
        _ => DEFAULT_URL.to_owned(),
    }
}

/// The server's base URL, checked: `--url` must carry its http:// or
/// https:// scheme (without one, `localhost:7777` parses as a URL whose
/// scheme is `localhost`, and requests fail with an opaque builder error).
pub(crate) fn base_url(raw: &str) -> Result<String, Exit> {
    let ok = reqwest::Url::parse(raw)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    if !ok {
        let hint = if raw.contains("://") {
            "use http://HOST:PORT or https://HOST:PORT".to_owned()
        } else {
            format!("add the scheme: http://{raw}")
        };
        return Err(Exit::config(anyhow::anyhow!(
            "the server URL {raw:?} (from --url or HEARTH_URL) is not an http:// or https:// \
             URL; {hint}"
        )));
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

/// Percent-encodes a path segment.
pub(crate) fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The start of an unexpected body, for an error message.
fn quote(text: &str) -> String {
    let mut q: String = text.chars().take(QUOTE_CHARS).collect();
    if text.chars().count() > QUOTE_CHARS {
        q.push_str("...");
    }
    if q.trim().is_empty() {
        "(empty)".to_owned()
    } else {
        q
    }
}

/// Runs a client command.
pub async fn run(g: &Global, command: Command) -> Result<(), Exit> {
    let api = Api::new(g)?;
    match command {
        Command::Message {
            text,
            no_stream,
            stream,
            cancel_on_interrupt,
            thread,
            user,
            wait,
            timeout,
            idempotency_key,
        } => {
            let msg = runs::Message {
                text: runs::message_text(text)?,
                thread_key: thread,
                user_key: user,
                wait,
                timeout,
                idempotency_key,
                // In a terminal the answer is streamed unless asked not to;
                // elsewhere only when asked (scripts keep the final text).
                stream: !no_stream
                    && !g.json
                    && (stream || std::io::IsTerminal::is_terminal(&std::io::stdout())),
                cancel_on_interrupt,
            };
            runs::message(&api, msg, g.json).await
        }
        Command::Runs { command } => listings::runs(&api, command, g.json).await,
        Command::Threads { command } => listings::threads(&api, command, g.json).await,
        Command::Whoami { user, scope } => permissions::whoami(&api, &user, &scope, g.json).await,
        Command::Skills { command } => skills::skills(&api, command, g.json).await,
        Command::Run { command } => runs::run(&api, command, g.json).await,
        Command::Confirm {
            confirmation,
            user,
            wait,
        } => runs::answer(&api, &confirmation, &user, true, wait, g.json).await,
        Command::Deny {
            confirmation,
            user,
            wait,
        } => runs::answer(&api, &confirmation, &user, false, wait, g.json).await,
        Command::Model { command } => threads::model(&api, command, g.json).await,
        Command::Thinking { command } => threads::thinking(&api, command, g.json).await,
        Command::Mode { command } => modes::mode(&api, command, g.json).await,
        Command::Incognito { state, thread } => {
            threads::incognito(&api, &state, &thread, g.json).await
        }
        Command::New { thread } => threads::new_session(&api, &thread, g.json).await,
        Command::Health => health::health(&api, g.json).await,
        Command::Cluster => cluster::cluster(&api, g.json).await,
        Command::Usage { since, until, by } => {
            usage::usage(&api, &since, until.as_deref(), &by, g.json).await
        }
        Command::Budget => budget::budget(&api, g.json).await,
        Command::Permissions { command } => permissions::permissions(&api, command, g.json).await,
        Command::Apps { command } => apps::apps(&api, command, g.json).await,
        Command::Credentials { command } => credentials::credentials(&api, command, g.json).await,
        Command::Audit { limit } => permissions::audit(&api, limit, g.json).await,
        Command::Channels => channels::channels(&api, g.json).await,
        Command::Pair { command } => channels::pair(&api, command, g.json).await,
        Command::Outbox { command } => channels::outbox(&api, command, g.json).await,
        Command::Jobs { command } => jobs::jobs(&api, command, g.json).await,
        Command::Feedback {
            run_id,
            rating,
            user,
        } => router::feedback(&api, &run_id, &rating, user, g.json).await,
        Command::Router => router::router(&api, g.json).await,
        Command::Config { command } => config::config(&api, command, g.json).await,
        Command::Serve { .. }
        | Command::Doctor
        | Command::Service { .. }
        | Command::Init(_)
        | Command::Token { .. }
        | Command::Secrets { .. }
        | Command::Memory { .. }
        | Command::Store { .. }
        | Command::Completions { .. }
        | Command::Man
        | Command::Mcp { .. }
        | Command::Chat { .. } => Err(anyhow::anyhow!(
            "internal: a local command reached the HTTP client; please report this"
        )
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_given_wins_else_the_bind_address_on_loopback() {
        let bind = |s: &str| Some(s.parse::<SocketAddr>().unwrap());
        assert_eq!(
            given_or_bind(Some("http://10.0.0.2:9000"), bind("127.0.0.1:7000")),
            "http://10.0.0.2:9000"
        );
        assert_eq!(
            given_or_bind(None, bind("0.0.0.0:7000")),
            "http://127.0.0.1:7000"
        );
        assert_eq!(given_or_bind(None, bind("[::]:7000")), "http://[::1]:7000");
        assert_eq!(
            given_or_bind(None, bind("10.1.2.3:7000")),
            "http://10.1.2.3:7000"
        );
        assert_eq!(given_or_bind(None, bind("127.0.0.1:0")), DEFAULT_URL);
        assert_eq!(given_or_bind(None, None), DEFAULT_URL);
    }

    #[test]
    fn a_url_without_a_scheme_is_a_usage_error_that_shows_the_fix() {
        for (raw, fix) in [
            ("127.0.0.1:7777", "http://127.0.0.1:7777"),
            ("localhost:7777", "http://localhost:7777"),
            ("ftp://example.org", "http://HOST:PORT"),
        ] {
            let Err(exit) = base_url(raw) else {
                panic!("{raw} was accepted");
            };
            assert_eq!(exit.code, crate::EXIT_CONFIG);
            let msg = format!("{:#}", exit.error);
            assert!(msg.contains(fix) && msg.contains("--url"), "{msg}");
        }
        assert_eq!(
            base_url("http://127.0.0.1:7777/").ok().as_deref(),
            Some("http://127.0.0.1:7777")
        );
        assert!(base_url("https://hearth.example.org").is_ok());
    }

    #[test]
    fn a_401_says_where_the_cli_takes_the_token_from() {
        let body =
            r#"{"error":{"code":"unauthorized","message":"a valid bearer token is required"}}"#;
        let mut api = Api {
            http: reqwest::Client::new(),
            base: "http://127.0.0.1:1".into(),
            token: None,
        };
        let msg = format!("{:#}", api.api_error(StatusCode::UNAUTHORIZED, body).error);
        assert!(
            msg.contains("--token") && msg.contains("HEARTH_TOKEN"),
            "{msg}"
        );
        api.token = Some("hth_x".into());
        let msg = format!("{:#}", api.api_error(StatusCode::UNAUTHORIZED, body).error);
        assert!(
            msg.contains("refused") && msg.contains("HEARTH_TOKEN"),
            "{msg}"
        );
        let msg = format!("{:#}", api.api_error(StatusCode::NOT_FOUND, body).error);
        assert!(!msg.contains("HEARTH_TOKEN"), "{msg}");
        let msg = format!(
            "{:#}",
            api.api_error(StatusCode::BAD_GATEWAY, "<html>").error
        );
        assert!(msg.contains("HTTP 502") && msg.contains("<html>"), "{msg}");
    }
}
