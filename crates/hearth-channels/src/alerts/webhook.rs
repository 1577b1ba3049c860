//! Alert webhooks: an outbox "channel" whose conversations are the
//! configured webhooks. Each body is POSTed as JSON with
//! `X-Hearth-Signature: sha256=<hex>`, the HMAC-SHA256 of the body keyed by
//! `[alerts] webhook_secret_env`'s value, and retried through the outbox
//! like any reply.
//!
//! A webhook URL often carries credentials, so the outbox never holds it:
//! an item's target is the URL's scheme and host and a reference to the
//! rule's URL (`https://hooks.example.org#<16 hex>`, keyed by the signing
//! key), resolved against the configured rules when the item is sent. That
//! target is all `GET /v1/outbox` and the logs show.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::config::alerts::WebhookUrl;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::sync::Notify;

use crate::channel::{Delivery, Undelivered};
use crate::error::{ChannelError, DeliveryError};
use crate::payload::Payload;

/// The outbox channel name of alert webhooks.
pub const WEBHOOK: &str = "webhook";

/// How long one POST may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The wait after a 429 without `Retry-After`.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Delivers alert bodies to the configured webhooks.
pub struct Webhooks {
    client: reqwest::Client,
    secret: String,
    /// Wakes the alerts' sender.
    pub(crate) wake: Arc<Notify>,
    /// The configured webhooks by their outbox target, and by the whole
    /// URL for items queued before targets were references.
    urls: HashMap<String, WebhookUrl>,
}

impl Webhooks {
    /// A sender signing with `secret` to the webhooks `urls` (the rules').
    pub fn new(
        client: reqwest::Client,
        secret: String,
        urls: impl IntoIterator<Item = WebhookUrl>,
    ) -> Arc<Self> {
        let mut by_target = HashMap::new();
        for url in urls {
            by_target.insert(target(&secret, &url), url.clone());
            by_target.insert(url.expose().to_owned(), url);
        }
        Arc::new(Self {
            client,
            secret,
            wake: Arc::new(Notify::new()),
            urls: by_target,
        })
    }

    /// The outbox target of alerts to `url` (see the module's doc).
    pub fn target_of(&self, url: &WebhookUrl) -> String {
        target(&self.secret, url)
    }
}

/// `<scheme>://<host>#<reference>`: the reference is the first 8 bytes, in
/// hex, of the HMAC-SHA256 of the URL keyed by `secret`, so the stored
/// target tells nothing of the URL's path, query or credentials.
fn target(secret: &str, url: &WebhookUrl) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        // HMAC takes keys of any length; this cannot happen.
        return url.origin().to_owned();
    };
    mac.update(b"hearth alert webhook\0");
    mac.update(url.expose().as_bytes());
    let digest = mac.finalize().into_bytes();
    let reference: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{}#{reference}", url.origin())
}

/// `sha256=` and the hex HMAC-SHA256 of `body` keyed by `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        // HMAC takes keys of any length; this cannot happen.
        return String::new();
    };
    mac.update(body);
    let digest = mac.finalize().into_bytes();
    let mut out = String::with_capacity(7 + digest.len() * 2);
    out.push_str("sha256=");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// What a webhook's answer means for the item.
fn classify(status: reqwest::StatusCode, retry_after: Option<&str>) -> Result<(), DeliveryError> {
    if status.is_success() {
        return Ok(());
    }
    let what = format!("the webhook answered HTTP {}", status.as_u16());
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS {
        let wait = retry_after
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(DEFAULT_RETRY_AFTER, Duration::from_secs);
        return Err(DeliveryError::RateLimited {
            retry_after_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            message: what,
        });
    }
    if status.is_server_error() || status == reqwest::StatusCode::REQUEST_TIMEOUT {
        Err(DeliveryError::Transient(what))
    } else {
        // Another 4xx: the URL or the receiver's checks are wrong; sending
        // the same body again will not help.
        Err(DeliveryError::Permanent(what))
    }
}

#[async_trait::async_trait]
impl Delivery for Webhooks {
    fn name(&self) -> &'static str {
        WEBHOOK
    }

    fn target_of(&self, _thread_key: &str) -> Option<String> {
        None
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        let undelivered = |error| Undelivered {
            parts_done: item.progress,
            error,
        };
        let Some(url) = self.urls.get(&item.target) else {
            return Err(undelivered(DeliveryError::Permanent(
                "no alert rule sends to this webhook any more (its URL or the signing key \
                 changed since the alert was queued); the alert is dropped"
                    .into(),
            )));
        };
        let body = payload.text.clone().into_bytes();
        let sent = self
            .client
            .post(url.expose())
            .timeout(TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("X-Hearth-Signature", signature(&self.secret, &body))
            .body(body)
            .send()
            .await;
        match sent {
            Ok(resp) => {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                classify(resp.status(), retry_after.as_deref()).map_err(undelivered)
            }
            // Without the URL: a webhook URL often carries its own secret.
            Err(e) => Err(undelivered(DeliveryError::Transient(format!(
                "the webhook could not be reached: {}",
                hearth_core::error_text(&e.without_url())
            )))),
        }
    }

    async fn check(&self) -> Result<String, ChannelError> {
        Ok("alert webhooks (checked when an alert is sent)".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::StatusCode;

    #[test]
    fn the_signature_is_the_hex_hmac_of_the_body() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    fn webhook(url: &str) -> WebhookUrl {
        match hearth_runtime::config::AlertTarget::parse(&format!("webhook:{url}")) {
            Ok(hearth_runtime::config::AlertTarget::Webhook(url)) => url,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn an_items_target_is_the_webhooks_scheme_and_host_and_a_reference() {
        let secret_url = "https://user:hunter2@hooks.example.org/services/XXXXSECRET";
        let url = webhook(secret_url);
        let other = webhook("https://hooks.example.org/services/OTHER");
        let hooks = Webhooks::new(reqwest::Client::new(), "key".into(), [url.clone()]);
        let t = hooks.target_of(&url);
        let (origin, reference) = t.split_once('#').unwrap();
        assert_eq!(origin, "https://hooks.example.org");
        assert_eq!(reference.len(), 16);
        assert!(!t.contains("hunter2") && !t.contains("XXXXSECRET"), "{t}");
        assert_ne!(t, hooks.target_of(&other), "each rule's URL has its own");
        assert_eq!(hooks.urls.get(&t).map(WebhookUrl::expose), Some(secret_url));
        // Items queued when targets were the whole URL are still sent.
        assert!(hooks.urls.contains_key(secret_url));
        let rekeyed = Webhooks::new(reqwest::Client::new(), "new key".into(), [url.clone()]);
        assert!(!rekeyed.urls.contains_key(&t));
    }

    #[test]
    fn answers_are_sorted_into_done_retry_and_give_up() {
        assert_eq!(classify(StatusCode::NO_CONTENT, None), Ok(()));
        assert!(matches!(
            classify(StatusCode::SERVICE_UNAVAILABLE, None),
            Err(DeliveryError::Transient(_))
        ));
        assert!(matches!(
            classify(StatusCode::NOT_FOUND, None),
            Err(DeliveryError::Permanent(_))
        ));
        assert_eq!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("7")),
            Err(DeliveryError::RateLimited {
                retry_after_ms: 7000,
                message: "the webhook answered HTTP 429".into()
            })
        );
        assert!(matches!(
            classify(StatusCode::TOO_MANY_REQUESTS, Some("soon")),
            Err(DeliveryError::RateLimited {
                retry_after_ms: 30_000,
                ..
            })
        ));
    }
}
