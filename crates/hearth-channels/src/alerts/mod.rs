//! Alerts: process-wide events (`run.failed`, `budget.threshold`,
//! `channel.degraded`, ...) matched against `[[alerts.rules]]` and queued in
//! the outbox for a chat or a signed webhook, at most one per rule per
//! `min_interval`, with a count of what was held back.
//!
//! The rate limits live in memory: after a restart each rule may send at
//! once again. Alerts go through the outbox, so one queued before a crash is
//! still delivered.

mod limiter;
mod render;
pub mod webhook;

use std::sync::Arc;
use std::time::Duration;

use hearth_runtime::Notice;
use hearth_runtime::config::{AlertTarget, AlertsConfig, alerts::glob_match};
use hearth_runtime::surfaces::OutboxStore;
use serde_json::Value;
use tokio::sync::broadcast;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::hub::Channels;
use crate::outbox::{queue_notice, run_sender};
use crate::payload::Payload;
use limiter::Limiter;
use webhook::Webhooks;

/// One rule, with its rate-limit state.
struct Rule {
    on: String,
    matches: Option<String>,
    target: AlertTarget,
    interval: Duration,
    limiter: Limiter<Notice>,
}

impl Rule {
    fn wants(&self, n: &Notice) -> bool {
        if !glob_match(&self.on, &n.event) {
            return false;
        }
        let Some(glob) = &self.matches else {
            return true;
        };
        ["thread_key", "channel", "target"]
            .iter()
            .filter_map(|k| n.data.get(*k).and_then(Value::as_str))
            .any(|v| glob_match(glob, v))
    }
}

/// The configured alert rules and where they send. Start with [`Alerts::start`].
pub struct Alerts {
    rules: Vec<Rule>,
    store: Arc<dyn OutboxStore>,
    channels: Channels,
    webhooks: Option<Arc<Webhooks>>,
    max_age: Duration,
    stop: CancellationToken,
}

/// Why alerts cannot start.
#[derive(Debug, thiserror::Error)]
pub enum AlertsError {
    /// A rule sends to a webhook and the signing key is missing.
    #[error(
        "[alerts] webhook_secret_env names {var}, which is not set or empty: export the \
         key webhook receivers check X-Hearth-Signature with"
    )]
    NoSecret {
        /// The variable's name.
        var: String,
    },
    /// A rule's target does not parse (the config loader checks this first).
    #[error("alerts.rules[{index}].to: {message}")]
    BadTarget {
        /// The rule's position.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

impl Alerts {
    /// The rules of `config`; `None` when there are none. `secret` is the
    /// value of `webhook_secret_env`, needed when a rule sends to a webhook.
    pub fn new(
        config: &AlertsConfig,
        secret: Option<String>,
        client: reqwest::Client,
        store: Arc<dyn OutboxStore>,
        channels: Channels,
        max_age: Duration,
    ) -> Result<Option<Self>, AlertsError> {
        if config.rules.is_empty() {
            return Ok(None);
        }
        let mut rules = Vec::with_capacity(config.rules.len());
        for (index, r) in config.rules.iter().enumerate() {
            let target = AlertTarget::parse(&r.to)
                .map_err(|message| AlertsError::BadTarget { index, message })?;
            let interval = config.min_interval_of(r);
            rules.push(Rule {
                on: r.on.clone(),
                matches: r.matches.clone(),
                target,
                interval,
                limiter: Limiter::new(interval),
            });
        }
        let webhooks = if config.has_webhooks() {
            let var = config.webhook_secret_env.clone().unwrap_or_default();
            let secret = secret
                .filter(|s| !s.trim().is_empty())
                .ok_or(AlertsError::NoSecret { var })?;
            let urls = rules.iter().filter_map(|r| match &r.target {
                AlertTarget::Webhook(url) => Some(url.clone()),
                AlertTarget::Chat { .. } => None,
            });
            Some(Webhooks::new(client, secret, urls))
        } else {
            None
        };
        Ok(Some(Self {
            rules,
            store,
            channels,
            webhooks,
            max_age,
            stop: CancellationToken::new(),
        }))
    }

    /// Starts matching `notices` and the webhook sender (claiming the
    /// webhooks' queues as `claimer`); returns the token that stops both.
    pub fn start(
        self,
        notices: broadcast::Receiver<Notice>,
        claimer: crate::outbox::Claimer,
    ) -> CancellationToken {
        let stop = self.stop.clone();
        if let Some(w) = &self.webhooks {
            tokio::spawn(run_sender(
                w.clone(),
                self.store.clone(),
                w.wake.clone(),
                self.max_age,
                // Webhook failures are alerts' own: never alerted about.
                hearth_runtime::Notices::default(),
                claimer,
                stop.child_token(),
            ));
        }
        tracing::info!(rules = self.rules.len(), "alerts started");
        tokio::spawn(self.dispatch(notices));
        stop
    }

    async fn dispatch(mut self, mut notices: broadcast::Receiver<Notice>) {
        loop {
            let due = self.rules.iter().filter_map(|r| r.limiter.due()).min();
            let flush_at = due.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep_until(flush_at), if due.is_some() => {
                    let now = Instant::now();
                    for i in 0..self.rules.len() {
                        if let Some((n, suppressed)) = self.rules[i].limiter.flush(now) {
                            self.send(i, &n, suppressed).await;
                        }
                    }
                }
                got = notices.recv() => match got {
                    Ok(n) => {
                        let now = Instant::now();
                        for i in 0..self.rules.len() {
                            if !self.rules[i].wants(&n) {
                                continue;
                            }
                            if let Some((n, suppressed)) = self.rules[i].limiter.offer(n.clone(), now) {
                                self.send(i, &n, suppressed).await;
                            }
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(missed)) => {
                        warn!(missed, "alerts fell behind; some events were not considered");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }

    /// Queues the alert for rule `i`'s target.
    async fn send(&self, i: usize, n: &Notice, suppressed: u64) {
        let rule = &self.rules[i];
        metrics::counter!("hearth_alerts_total", "event" => n.event.clone()).increment(1);
        let queued = match &rule.target {
            AlertTarget::Chat { thread_key, .. } => {
                let payload = Payload {
                    text: render::chat_text(n, suppressed, rule.interval),
                    alert: true,
                    ..Payload::default()
                };
                self.channels
                    .queue_to_thread(thread_key, payload)
                    .await
                    .map_err(|e| e.to_string())
                    .and_then(|owned| {
                        owned.then_some(()).ok_or_else(|| {
                            format!("no enabled channel owns {thread_key} in this build")
                        })
                    })
            }
            AlertTarget::Webhook(url) => match &self.webhooks {
                Some(w) => {
                    let payload = Payload {
                        text: render::webhook_body(n, suppressed),
                        alert: true,
                        ..Payload::default()
                    };
                    queue_notice(
                        self.store.as_ref(),
                        &w.wake,
                        webhook::WEBHOOK,
                        &w.target_of(url),
                        &payload,
                    )
                    .await
                    .map_err(|e| e.to_string())
                }
                None => Err("no webhook sender".to_owned()),
            },
        };
        match queued {
            Ok(()) => debug!(event = %n.event, rule = i, suppressed, "alert queued"),
            Err(e) => warn!(event = %n.event, rule = i, error = %e, "cannot queue an alert"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(on: &str, matches: Option<&str>) -> Rule {
        Rule {
            on: on.into(),
            matches: matches.map(str::to_owned),
            target: AlertTarget::parse("webhook:https://example.org").unwrap(),
            interval: Duration::from_secs(600),
            limiter: Limiter::new(Duration::from_secs(600)),
        }
    }

    fn notice(event: &str, data: Value) -> Notice {
        Notice {
            event: event.into(),
            at: 0,
            data,
        }
    }

    #[test]
    fn rules_match_the_event_and_the_thread_or_channel() {
        let failed = notice("run.failed", json!({"thread_key": "telegram:chat:9"}));
        let degraded = notice("channel.degraded", json!({"channel": "discord"}));
        let budget = notice("budget.threshold", json!({"pool": "p"}));
        assert!(rule("*", None).wants(&failed));
        assert!(rule("run.failed", None).wants(&failed));
        assert!(!rule("job.failed", None).wants(&failed));
        assert!(rule("run.*", Some("telegram:*")).wants(&failed));
        assert!(!rule("run.*", Some("discord:*")).wants(&failed));
        assert!(rule("*", Some("discord")).wants(&degraded));
        // An event naming no thread or channel never matches a rule with `match`.
        assert!(!rule("*", Some("*")).wants(&budget));
        assert!(rule("*", None).wants(&budget));
    }
}
