//! Telegram: long polling (or a webhook), private chats and group mentions,
//! pairing for strangers, commands with inline-keyboard pickers,
//! confirmation buttons, a throttled progress message, and delivery of the
//! outbox as HTML that Telegram accepts (plain text when it does not).

pub mod api;
mod commands;
mod deliver;
pub mod format;
mod inbound;
mod presses;
pub mod types;
mod webhook;

use std::sync::{Arc, Mutex};

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::Runtime;
use hearth_runtime::config::{TelegramConfig, TelegramMode};
use hearth_runtime::surfaces::{AccessStore, OutboxStore, Webhook};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use self::api::Api;
use crate::access::Access;
use crate::channel::{Delivery, Ingress, Live, Undelivered};
use crate::error::ChannelError;
use crate::hub::Enabled;
use crate::kit::Kit;
use crate::payload::Payload;

/// Thread keys of Telegram chats start with this.
const THREAD_PREFIX: &str = "telegram:chat:";

/// The thread of a chat.
pub fn thread_key(chat_id: i64) -> String {
    format!("{THREAD_PREFIX}{chat_id}")
}

/// The user key of a Telegram user.
pub fn user_key(user_id: i64) -> String {
    format!("telegram:user:{user_id}")
}

/// The permission scope of a group (`telegram:chat:<id>`): grants made there
/// apply to runs asked there. Groups have negative chat ids; a private chat
/// is the user's own and keeps the global scope (`None`).
pub fn group_scope(chat_id: i64) -> Option<String> {
    (chat_id < 0).then(|| format!("telegram:chat:{chat_id}"))
}

/// Who the bot is, from `getMe`.
#[derive(Debug, Clone)]
struct Identity {
    id: i64,
    /// Lower-case, without `@`.
    username: String,
}

/// The Telegram channel's inbound side: the channel and the runtime.
type Tg = Live<Telegram>;

/// The Telegram channel.
pub struct Telegram {
    config: TelegramConfig,
    kit: Kit<Api, Identity>,
    webhook_secret: Option<String>,
    /// Where the token came from (a variable or a sealed secret's name),
    /// for what a refusal tells the operator to check.
    token_source: String,
    /// Button presses answered at a failure, not to be answered again.
    answered: Mutex<presses::Answered>,
}

impl Telegram {
    /// The channel for `config`, with its token (or why it is missing) and
    /// the webhook's secret in webhook mode.
    pub fn new(
        config: TelegramConfig,
        token: Result<String, ChannelError>,
        webhook_secret: Option<String>,
        client: reqwest::Client,
        store: Arc<dyn OutboxStore>,
        access: Arc<dyn AccessStore>,
    ) -> Arc<Self> {
        let access = Access::new(
            "telegram",
            config.allowed_users.iter().map(|id| user_key(*id)),
            config.open_dms,
            access,
        );
        let api = token
            .map(|t| Api::new(client, &config.api_base, t))
            .map_err(|e| e.to_string());
        Arc::new(Self {
            kit: Kit::new("telegram", api, store, access),
            token_source: crate::advice::token_source(
                config.token_env.as_deref(),
                config.token_secret.as_deref(),
            ),
            config,
            webhook_secret,
            answered: Mutex::default(),
        })
    }

    /// The channel as the hub holds it.
    pub(crate) fn enabled(self: &Arc<Self>) -> Enabled {
        self.kit.enable(self.clone(), self.clone())
    }

    /// Queues a reply outside a run (notices, command answers) to chat
    /// `chat_id` and wakes the sender.
    async fn notify(&self, chat_id: i64, text: impl Into<String>) -> Result<(), ChannelError> {
        let notice = Payload::notice(text);
        self.kit.notify(&chat_id.to_string(), &notice).await
    }
}

#[async_trait::async_trait]
impl Delivery for Telegram {
    fn name(&self) -> &'static str {
        self.kit.name()
    }

    fn target_of(&self, thread_key: &str) -> Option<String> {
        let id = thread_key.strip_prefix(THREAD_PREFIX)?;
        id.parse::<i64>().ok().map(|n| n.to_string())
    }

    fn scope_of(&self, thread_key: &str) -> Option<String> {
        // Runs are stored with their scope; this answers for runs stored
        // before they were.
        group_scope(thread_key.strip_prefix(THREAD_PREFIX)?.parse().ok()?)
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        deliver::deliver(self, item, payload).await
    }

    fn take_progress(&self, run_id: &str) -> Option<String> {
        self.kit.progress.take(run_id)
    }

    async fn restore(&self, runtime: &Runtime) {
        self.kit.progress.restore(runtime).await;
    }

    async fn check(&self) -> Result<String, ChannelError> {
        let me: types::Me = self
            .kit
            .api_or_why()?
            .call("getMe", &json!({}))
            .await
            .map_err(|e| ChannelError::Platform {
                channel: "telegram",
                method: "getMe".into(),
                detail: e.to_string(),
            })?;
        Ok(format!(
            "token accepted: bot @{} (id {})",
            me.username.unwrap_or_default(),
            me.id
        ))
    }
}

#[async_trait::async_trait]
impl Ingress for Telegram {
    async fn run(self: Arc<Self>, runtime: Runtime, stop: CancellationToken) {
        inbound::run(Live::new(self, runtime), stop).await;
    }

    fn holds_connection(&self) -> bool {
        self.config.mode != TelegramMode::Webhook
    }

    fn webhook(self: Arc<Self>) -> Option<Arc<dyn Webhook>> {
        (self.config.mode == TelegramMode::Webhook)
            .then(|| Arc::new(webhook::TelegramWebhook(self)) as Arc<dyn Webhook>)
    }
}
