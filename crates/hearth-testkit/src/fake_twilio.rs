//! `FakeTwilio`: Twilio's REST API for messaging on 127.0.0.1, written from
//! Twilio's API reference, for the SMS channel's tests.
//!
//! `POST /2010-04-01/Accounts/{AccountSid}/Messages.json` checks every
//! request: HTTP Basic auth with the account SID and auth token (else 401,
//! code 20003), the path's account, a form-encoded body with `To` (E.164),
//! exactly one of `From` and `MessagingServiceSid`, and a `Body` of 1 to
//! 1,600 characters (else 400 with Twilio's code: 21604, 21603, 21602,
//! 21617). It answers 201 with the message resource, or 429 with
//! `Retry-After` on demand ([`FakeTwilio::rate_limit`]); a send before that
//! `Retry-After` has passed is a violation. `GET
//! /2010-04-01/Accounts/{AccountSid}.json` answers the account to the right
//! credentials. [`FakeTwilio::sign`] signs the posts a test makes to
//! hearth's webhook as Twilio does (`X-Twilio-Signature`).

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha1::Sha1;
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The account the fake serves.
pub const ACCOUNT_SID: &str = "AC0123456789abcdef0123456789abcdef";
/// Its auth token.
pub const AUTH_TOKEN: &str = "f1a2k3e4t5w6i7l8i9o0a1u2t3h4t5o6";
/// The Twilio number answers come from.
pub const FROM: &str = "+15005550006";

/// One message hearth sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Sent {
    /// Its SID.
    pub sid: String,
    /// `To`.
    pub to: String,
    /// `From`, if given.
    pub from: Option<String>,
    /// `MessagingServiceSid`, if given.
    pub service: Option<String>,
    /// `Body`.
    pub body: String,
    /// When it arrived.
    pub at: Instant,
}

#[derive(Default)]
struct Inner {
    sent: Vec<Sent>,
    violations: Vec<String>,
    checked: usize,
    /// Sends to answer 429, and with which `Retry-After`.
    rate_limits: Vec<u64>,
    /// No send may come before this (the last 429's `Retry-After`).
    limited_until: Option<Instant>,
    /// Sends answered 429.
    limited: usize,
    /// Account reads.
    account_reads: usize,
}

struct Shared {
    inner: Mutex<Inner>,
    changed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A fake Twilio; stops when dropped.
pub struct FakeTwilio {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for FakeTwilio {
    fn drop(&mut self) {
        self.task.abort();
        if std::thread::panicking() {
            return;
        }
        let unchecked = {
            let s = self.shared.lock();
            s.violations[s.checked.min(s.violations.len())..].to_vec()
        };
        assert!(
            unchecked.is_empty(),
            "FakeTwilio dropped with violations the test never read \
             (call violations() and assert on them): {unchecked:#?}"
        );
    }
}

impl FakeTwilio {
    /// Starts on 127.0.0.1 with an OS-chosen port.
    pub async fn start() -> io::Result<Self> {
        let listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner::default()),
            changed: Notify::new(),
        });
        let app = Router::new()
            .route(
                "/2010-04-01/Accounts/{account}/Messages.json",
                post(messages),
            )
            .route("/2010-04-01/Accounts/{account}", get(account))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { shared, addr, task })
    }

    /// `http://<addr>`: the `api_base` to configure.
    pub fn api_base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The next send is answered 429 with `Retry-After: secs`.
    pub fn rate_limit(&self, secs: u64) {
        self.shared.lock().rate_limits.push(secs);
    }

    /// Messages sent so far, in order.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// Sends answered 429.
    pub fn limited(&self) -> usize {
        self.shared.lock().limited
    }

    /// Times the account was read (credential checks).
    pub fn account_reads(&self) -> usize {
        self.shared.lock().account_reads
    }

    /// Broken rules seen so far; reading them marks them checked.
    pub fn violations(&self) -> Vec<String> {
        let mut s = self.shared.lock();
        s.checked = s.violations.len();
        s.violations.clone()
    }

    /// Waits until at least `n` messages were sent (to anyone); them.
    ///
    /// # Panics
    /// After `within` without them.
    pub async fn wait_sent(&self, n: usize, within: Duration) -> Vec<Sent> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let sent = self.sent();
            if sent.len() >= n {
                return sent;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!("waited {within:?} for {n} messages; sent: {sent:#?}");
            }
        }
    }

    /// Waits until a message containing `want` was sent to `to`; it.
    ///
    /// # Panics
    /// After `within` without one.
    pub async fn wait_text(&self, to: &str, want: &str, within: Duration) -> Sent {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let changed = self.shared.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let found = self
                .sent()
                .into_iter()
                .find(|m| m.to == to && m.body.contains(want));
            if let Some(m) = found {
                return m;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                panic!(
                    "waited {within:?} for a message to {to} with {want:?}; sent: {:#?}",
                    self.sent()
                );
            }
        }
    }

    /// `X-Twilio-Signature` of a post of `params` to `url`, as Twilio signs
    /// with this account's auth token.
    pub fn sign(url: &str, params: &[(&str, &str)]) -> String {
        sign_with(AUTH_TOKEN, url, params)
    }

    /// The form of an incoming text Twilio posts: `MessageSid`, `From`,
    /// `Body`, and what else Twilio sends with one.
    pub fn inbound(sid: &str, from: &str, body: &str) -> Vec<(String, String)> {
        [
            ("ToCountry", "US"),
            ("SmsMessageSid", sid),
            ("NumMedia", "0"),
            ("SmsSid", sid),
            ("SmsStatus", "received"),
            ("Body", body),
            ("To", FROM),
            ("NumSegments", "1"),
            ("MessageSid", sid),
            ("AccountSid", ACCOUNT_SID),
            ("From", from),
            ("ApiVersion", "2010-04-01"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
    }
}

/// `params` form-encoded, as Twilio posts them.
pub fn form_body(params: &[(String, String)]) -> String {
    serde_urlencoded::to_string(params).unwrap_or_default()
}

/// The signature of `params` posted to `url` with `token`: the URL, then
/// each parameter's name and value, sorted by name, HMAC-SHA1, base64.
pub fn sign_with(token: &str, url: &str, params: &[(&str, &str)]) -> String {
    let mut sorted = params.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    let mut data = url.to_owned();
    for (k, v) in sorted {
        data.push_str(k);
        data.push_str(v);
    }
    let Ok(mut mac) = Hmac::<Sha1>::new_from_slice(token.as_bytes()) else {
        return String::new();
    };
    mac.update(data.as_bytes());
    data_encoding::BASE64.encode(&mac.finalize().into_bytes())
}

fn error(status: StatusCode, code: u32, message: &str) -> Response {
    let body = json!({ "code": code, "message": message, "more_info": format!("https://www.twilio.com/docs/errors/{code}"), "status": status.as_u16() });
    (status, axum::Json(body)).into_response()
}

/// Checks HTTP Basic credentials and the path's account: Twilio's 401 or
/// 404 when they are wrong.
fn refusal(account: &str, headers: &HeaderMap) -> Option<Response> {
    let expected = format!(
        "Basic {}",
        data_encoding::BASE64.encode(format!("{ACCOUNT_SID}:{AUTH_TOKEN}").as_bytes())
    );
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if given != expected {
        return Some(error(StatusCode::UNAUTHORIZED, 20_003, "Authenticate"));
    }
    (account != ACCOUNT_SID).then(|| {
        error(
            StatusCode::NOT_FOUND,
            20_404,
            "The requested resource was not found",
        )
    })
}

async fn account(
    State(shared): State<Arc<Shared>>,
    Path(account): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(account) = account.strip_suffix(".json") else {
        return error(
            StatusCode::NOT_FOUND,
            20_404,
            "The requested resource was not found",
        );
    };
    if let Some(r) = refusal(account, &headers) {
        return r;
    }
    shared.lock().account_reads += 1;
    shared.changed.notify_waiters();
    axum::Json(json!({ "sid": ACCOUNT_SID, "friendly_name": "Fake account", "status": "active", "type": "Full" })).into_response()
}

fn is_e164(n: &str) -> bool {
    n.strip_prefix('+').is_some_and(|d| {
        (2..=15).contains(&d.len()) && d.bytes().all(|b| b.is_ascii_digit()) && !d.starts_with('0')
    })
}

async fn messages(
    State(shared): State<Arc<Shared>>,
    Path(account): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let violation = |v: String| {
        shared.lock().violations.push(v);
        shared.changed.notify_waiters();
    };
    if let Some(r) = refusal(&account, &headers) {
        violation("a send without the account's Basic credentials".into());
        return r;
    }
    let form_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    let params: Vec<(String, String)> = match serde_urlencoded::from_bytes(&body) {
        Ok(p) if form_type => p,
        _ => {
            violation("a send that is not form-encoded".into());
            return error(StatusCode::BAD_REQUEST, 20_001, "Invalid form body");
        }
    };
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let (to, from, service, text) = (
        get("To"),
        get("From"),
        get("MessagingServiceSid"),
        get("Body"),
    );
    let refusal = match (&to, &from, &service, &text) {
        (None, ..) => Some((21_604, "A 'To' phone number is required.".to_owned())),
        (Some(to), ..) if !is_e164(to) => {
            Some((21_211, format!("Invalid 'To' Phone Number: {to}")))
        }
        (_, None, None, _) => Some((21_603, "A 'From' phone number is required.".to_owned())),
        (_, Some(_), Some(_), _) => Some((
            21_603,
            "Give 'From' or 'MessagingServiceSid', not both (this fake's rule).".to_owned(),
        )),
        (_, _, _, None) => Some((21_602, "Message body is required.".to_owned())),
        (_, _, _, Some(b)) if b.is_empty() => {
            Some((21_602, "Message body is required.".to_owned()))
        }
        (_, _, _, Some(b)) if b.chars().count() > 1600 => Some((
            21_617,
            "The concatenated message body exceeds the 1600 character limit.".to_owned(),
        )),
        _ => None,
    };
    if let Some((code, message)) = refusal {
        violation(format!("send refused ({code}): {message}"));
        return error(StatusCode::BAD_REQUEST, code, &message);
    }
    let now = Instant::now();
    let mut s = shared.lock();
    if let Some(until) = s.limited_until
        && now < until
    {
        s.violations.push(format!(
            "a send {:?} before Retry-After had passed",
            until - now
        ));
    }
    if !s.rate_limits.is_empty() {
        let secs = s.rate_limits.remove(0);
        s.limited_until = Some(now + Duration::from_secs(secs));
        s.limited += 1;
        drop(s);
        shared.changed.notify_waiters();
        let mut r = error(StatusCode::TOO_MANY_REQUESTS, 20_429, "Too Many Requests");
        if let Ok(v) = secs.to_string().parse() {
            r.headers_mut().insert("retry-after", v);
        }
        return r;
    }
    let sid = format!("SM{:032x}", s.sent.len() + 1);
    let (to, text) = (to.unwrap_or_default(), text.unwrap_or_default());
    s.sent.push(Sent {
        sid: sid.clone(),
        to: to.clone(),
        from: from.clone(),
        service: service.clone(),
        body: text.clone(),
        at: now,
    });
    drop(s);
    shared.changed.notify_waiters();
    let resource: Value = json!({
        "sid": sid, "account_sid": ACCOUNT_SID, "to": to, "from": from,
        "messaging_service_sid": service, "body": text, "status": "queued",
        "num_segments": "1", "direction": "outbound-api", "api_version": "2010-04-01",
        "uri": format!("/2010-04-01/Accounts/{ACCOUNT_SID}/Messages/{sid}.json"),
    });
    (StatusCode::CREATED, axum::Json(resource)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_as_twilio_documents() {
        let url = "https://mycompany.com/myapp.php?foo=1&bar=2";
        let params = [
            ("CallSid", "CA1234567890ABCDE"),
            ("Caller", "+14158675310"),
            ("Digits", "1234"),
            ("From", "+14158675310"),
            ("To", "+18005551212"),
        ];
        assert_eq!(
            sign_with("12345", url, &params),
            "GvWf1cFY/Q7PnoempGyD5oXAezc="
        );
    }
}
