//! SMS through Twilio: Twilio posts each incoming text to
//! `POST /channels/sms/twilio` (form-encoded, signed with
//! `X-Twilio-Signature`), answered at once with an empty TwiML response;
//! the answer goes out through the outbox with the Messages API. A
//! conversation is one phone number (`sms:<E.164>`), private by nature:
//! access follows the channels' rules (listed numbers, pairing by code,
//! `open_dms`). Carriers' keywords are honoured: `STOP` blocks every reply
//! to that number until `START` (recorded in the store), `HELP` says what
//! this number is. Confirmations are answered by texting `YES <code>` or
//! `NO <code>`, the code bound to that question and that number.

mod api;
mod deliver;
pub mod segments;
mod signature;
mod state;
mod webhook;

use std::sync::Arc;
use std::time::Duration;

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::Runtime;
use hearth_runtime::config::SmsConfig;
use hearth_runtime::surfaces::{AccessStore, OutboxStore, Webhook};
use tokio_util::sync::CancellationToken;

pub use self::api::{Api, ApiError, Sender};
pub use self::signature::{HEADER as SIGNATURE_HEADER, sign, verify};
pub use self::webhook::PATH;
use crate::access::Access;
use crate::backoff::Backoff;
use crate::channel::{Delivery, Ingress, Undelivered};
use crate::error::ChannelError;
use crate::hub::Enabled;
use crate::kit::Kit;
use crate::payload::Payload;

/// Thread keys (and user keys) of SMS conversations start with this.
const PREFIX: &str = "sms:";

/// The thread of a phone number (E.164).
pub fn thread_key(number: &str) -> String {
    format!("{PREFIX}{number}")
}

/// The user key of a phone number: the same as its thread, as a number is
/// one person's own conversation.
pub fn user_key(number: &str) -> String {
    format!("{PREFIX}{number}")
}

/// The SMS channel.
pub struct Sms {
    config: SmsConfig,
    kit: Kit<Api, ()>,
    sender: Sender,
    /// Where the auth token came from, for what a refusal tells the
    /// operator to check.
    token_source: String,
}

impl Sms {
    /// The channel for `config`, with its auth token (or why it is missing).
    pub fn new(
        config: SmsConfig,
        token: Result<String, ChannelError>,
        client: reqwest::Client,
        store: Arc<dyn OutboxStore>,
        access: Arc<dyn AccessStore>,
    ) -> Arc<Self> {
        let access = Access::new(
            "sms",
            config.allowed_users.iter().map(|n| user_key(n)),
            config.open_dms,
            access,
        );
        let api = token
            .map(|t| Api::new(client, &config.api_base, &config.account_sid, t))
            .map_err(|e| e.to_string());
        // Validated at load: one of the two is set.
        let sender = match (&config.messaging_service_sid, &config.from) {
            (Some(mg), _) => Sender::Service(mg.clone()),
            (None, from) => Sender::From(from.clone().unwrap_or_default()),
        };
        Arc::new(Self {
            kit: Kit::new("sms", api, store, access),
            token_source: crate::advice::token_source(
                config.auth_token_env.as_deref(),
                config.auth_token_secret.as_deref(),
            ),
            sender,
            config,
        })
    }

    /// The channel as the hub holds it.
    pub(crate) fn enabled(self: &Arc<Self>) -> Enabled {
        self.kit.enable(self.clone(), self.clone())
    }

    /// Queues a notice to `number` and wakes the sender.
    async fn notify(&self, number: &str, text: impl Into<String>) -> Result<(), ChannelError> {
        self.kit.notify(number, &Payload::notice(text)).await
    }

    /// Where the dashboard is, as a shortened answer's note names it: the
    /// origin of `public_url` and `/ui`.
    fn ui_url(&self) -> String {
        let Some(url) = self.config.public_url.as_deref() else {
            return "/ui".to_owned();
        };
        let origin_end = url
            .find("://")
            .and_then(|i| url[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(url.len());
        format!("{}/ui", &url[..origin_end])
    }

    /// The account as Twilio shows it: `credentials accepted: ...`.
    async fn account_line(&self, timeout: Duration) -> Result<String, ChannelError> {
        let account =
            self.kit
                .api_or_why()?
                .account(timeout)
                .await
                .map_err(|e| ChannelError::Platform {
                    channel: "sms",
                    method: "GET Accounts".into(),
                    detail: explain(&e, &self.token_source),
                })?;
        Ok(format!(
            "credentials accepted: account {} ({})",
            account.friendly_name, account.status
        ))
    }
}

/// What to do about a refusal of the credentials, naming where the token
/// came from; other failures as they are.
pub fn explain(e: &ApiError, token_source: &str) -> String {
    match e {
        ApiError::Refused {
            status: 401 | 403 | 404,
            ..
        } => crate::advice::token_refused(
            "Twilio",
            "account SID and auth token",
            &e.to_string(),
            token_source,
            crate::advice::TWILIO_FIX,
        ),
        other => other.to_string(),
    }
}

#[async_trait::async_trait]
impl Delivery for Sms {
    fn name(&self) -> &'static str {
        self.kit.name()
    }

    fn target_of(&self, thread_key: &str) -> Option<String> {
        let number = thread_key.strip_prefix(PREFIX)?;
        hearth_runtime::config::is_e164(number).then(|| number.to_owned())
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        deliver::deliver(self, item, payload).await
    }

    async fn check(&self) -> Result<String, ChannelError> {
        self.account_line(Duration::from_secs(5)).await
    }
}

#[async_trait::async_trait]
impl Ingress for Sms {
    /// Twilio posts to the webhook; this only checks the credentials once
    /// (with backoff), so the channel shows connected or why not.
    async fn run(self: Arc<Self>, _runtime: Runtime, stop: CancellationToken) {
        let api = match &self.kit.api {
            Ok(api) => api.clone(),
            Err(why) => return self.kit.cannot_start(why),
        };
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(60));
        loop {
            let delay = match api.account(Duration::from_secs(15)).await {
                Ok(account) => {
                    tracing::info!(channel = "sms", account = %account.friendly_name, "Twilio credentials accepted");
                    self.kit.health.ok();
                    return;
                }
                Err(
                    e @ ApiError::Refused {
                        status: 401 | 403 | 404,
                        ..
                    },
                ) => {
                    // Refused credentials will not pass until someone
                    // changes them: after a few tries, only every few minutes.
                    let delay = backoff.refused();
                    let why = crate::advice::with_retry(
                        explain(&e, &self.token_source),
                        backoff.slow_pace(),
                    );
                    tracing::error!(channel = "sms", error = %why, "Twilio refused the credentials");
                    self.kit.health.failed(why);
                    delay
                }
                Err(e) => {
                    tracing::warn!(channel = "sms", error = %e, "Twilio account check failed; retrying with backoff");
                    self.kit.health.failed(e.to_string());
                    backoff.next_delay()
                }
            };
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(delay) => {}
            }
        }
    }

    fn webhook(self: Arc<Self>) -> Option<Arc<dyn Webhook>> {
        Some(Arc::new(webhook::TwilioWebhook(self)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threads_are_numbers() {
        assert_eq!(thread_key("+15551234567"), "sms:+15551234567");
        assert_eq!(user_key("+15551234567"), "sms:+15551234567");
    }
}
