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

use std::sync::{Arc, Mutex, OnceLock};

use hearth_core::records::outbox::OutboxItem;
use hearth_runtime::Runtime;
use hearth_runtime::config::{TelegramConfig, TelegramMode};
use hearth_runtime::surfaces::{AccessStore, OutboxStore, Webhook};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use self::api::Api;
use crate::access::Access;
use crate::channel::{Channel, Live, Undelivered};
use crate::error::{ChannelError, DeliveryError};
use crate::health::Health;
use crate::payload::Payload;
use crate::progress::Progress;

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
    /// `Err` when the token could not be read: the channel stays degraded.
    api: Result<Api, String>,
    webhook_secret: Option<String>,
    store: Arc<dyn OutboxStore>,
    access: Access,
    health: Health,
    progress: Arc<Progress>,
    me: OnceLock<Identity>,
    wake: Arc<tokio::sync::Notify>,
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
        let progress = Arc::new(Progress::durable(store.clone(), "telegram"));
        Arc::new(Self {
            config,
            api,
            webhook_secret,
            store,
            access,
            health: Health::default(),
            progress,
            me: OnceLock::new(),
            wake: Arc::new(tokio::sync::Notify::new()),
            answered: Mutex::default(),
        })
    }

    /// The access rules (for the hub).
    pub fn access(&self) -> Access {
        self.access.clone()
    }

    /// Queues replies outside a run (notices, command answers) and wakes
    /// the sender.
    async fn notify(&self, chat_id: i64, payload: Payload) -> Result<(), ChannelError> {
        let target = chat_id.to_string();
        crate::outbox::queue_notice(
            self.store.as_ref(),
            &self.wake,
            "telegram",
            &target,
            &payload,
        )
        .await
    }

    fn api(&self) -> Result<&Api, DeliveryError> {
        self.api
            .as_ref()
            .map_err(|e| DeliveryError::Transient(e.clone()))
    }
}

#[async_trait::async_trait]
impl Channel for Telegram {
    fn name(&self) -> &'static str {
        "telegram"
    }

    fn target_of(&self, thread_key: &str) -> Option<String> {
        let id = thread_key.strip_prefix(THREAD_PREFIX)?;
        id.parse::<i64>().ok().map(|n| n.to_string())
    }

    fn health(&self) -> &Health {
        &self.health
    }

    fn outbox_wake(&self) -> Arc<tokio::sync::Notify> {
        self.wake.clone()
    }

    async fn run(self: Arc<Self>, runtime: Runtime, stop: CancellationToken) {
        inbound::run(Live::new(self, runtime), stop).await;
    }

    async fn deliver(&self, item: &OutboxItem, payload: &Payload) -> Result<(), Undelivered> {
        deliver::deliver(self, item, payload).await
    }

    fn take_progress(&self, run_id: &str) -> Option<String> {
        self.progress.take(run_id)
    }

    async fn restore(&self, runtime: &Runtime) {
        self.progress.restore(runtime).await;
    }

    fn scope_of(&self, thread_key: &str) -> Option<String> {
        // Runs are stored with their scope; this answers for runs stored
        // before they were.
        group_scope(thread_key.strip_prefix(THREAD_PREFIX)?.parse().ok()?)
    }

    async fn check(&self) -> Result<String, ChannelError> {
        let api = self.api.as_ref().map_err(|e| ChannelError::NoToken {
            channel: "telegram",
            detail: e.clone(),
        })?;
        let me: types::Me =
            api.call("getMe", &json!({}))
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

    fn webhook(self: Arc<Self>) -> Option<Arc<dyn Webhook>> {
        (self.config.mode == TelegramMode::Webhook)
            .then(|| Arc::new(webhook::TelegramWebhook(self)) as Arc<dyn Webhook>)
    }
}
