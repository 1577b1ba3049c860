//! Sending an app's command, or only planning it. A public `send_message`
//! action (no permissions) of an approved, enabled version whose approver
//! consented is posted into the Discord channel as hearth's bot, through
//! the outbox (so once, and in order with the run's other replies); any
//! other action is a dry run: hearth says what it would send and sends
//! nothing. Both are audited with app, version, action, guild, channel and
//! who asked, never the text.
//!
//! An app applies only where its bot is: before anything is sent or
//! planned, the guild must have a member whose id is the manifest's bot
//! user id or application id (exact match; asked of Discord).

use hearth_core::apps::{AppAction, AppManifest, Dispatch, match_trigger};
use hearth_core::now_ms;
use hearth_store::{AppVersionRecord, AppVersionStatus};

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

/// A mention in a guild that may trigger an app's command.
#[derive(Debug, Clone)]
pub struct TriggerRequest {
    /// The Discord guild.
    pub guild_id: String,
    /// The conversation (`discord:channel:<id>`).
    pub thread_key: String,
    /// Who wrote it.
    pub user_key: String,
    /// The text after hearth's mention.
    pub text: String,
    /// The platform's id of the message, so a redelivered one acts once.
    pub event_id: String,
}

/// One command to send or plan.
#[derive(Debug, Clone)]
pub struct AppCommand {
    /// The guild it is for.
    pub guild_id: String,
    /// The conversation it goes to.
    pub thread_key: String,
    /// The run that asked, if a run did (a tool call).
    pub run_id: Option<String>,
    /// Who asked.
    pub user_key: String,
    /// The command text (the action's prefix and arguments).
    pub command: String,
}

/// What became of a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatched {
    /// Queued for the channel, as hearth's bot.
    Sent {
        /// The app.
        app: String,
        /// The action.
        action: String,
        /// The command sent.
        command: String,
    },
    /// Only planned.
    DryRun {
        /// The app.
        app: String,
        /// The action.
        action: String,
        /// The command hearth would send.
        command: String,
        /// Why it is not sent.
        reason: String,
    },
    /// The message was handled already (a redelivered event).
    Repeated,
}

impl Dispatched {
    /// What hearth tells the channel about a dry run (`None` for the
    /// others: a sent command speaks for itself).
    pub fn notice(&self) -> Option<String> {
        match self {
            Self::DryRun {
                app,
                action,
                command,
                reason,
            } => Some(format!(
                "Dry run of {app} {action}: I would send `{command}` — not sent: {reason}."
            )),
            _ => None,
        }
    }
}

/// An app enabled in a guild, as it applies there.
#[derive(Debug, Clone)]
pub(crate) struct GuildApp {
    pub(crate) record: AppVersionRecord,
    pub(crate) manifest: AppManifest,
}

impl Runtime {
    /// The apps enabled in `guild_id` whose version is approved and whose
    /// bot is in the guild (others are ignored).
    pub(crate) async fn guild_apps(&self, guild_id: &str) -> Result<Vec<GuildApp>> {
        let mut out = Vec::new();
        for enabled in self
            .inner
            .store
            .list_app_enablements(Some(guild_id))
            .await?
        {
            let Some(record) = self
                .inner
                .store
                .app_version(&enabled.app, &enabled.version)
                .await?
            else {
                continue;
            };
            if record.status != AppVersionStatus::Approved {
                continue;
            }
            let manifest = match AppManifest::parse(record.manifest.as_bytes()) {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(app = %record.app, version = %record.version, error = %e,
                        "a stored app manifest no longer parses; ignored");
                    continue;
                }
            };
            if !self.bot_is_in(guild_id, &manifest).await {
                tracing::info!(app = %record.app, guild_id,
                    "the app's bot is not in this server; its manifest is ignored here");
                continue;
            }
            out.push(GuildApp { record, manifest });
        }
        Ok(out)
    }

    /// Whether the manifest's bot is a member of the guild. Unknown (no
    /// Discord channel) counts as absent: nothing could be sent anyway.
    async fn bot_is_in(&self, guild_id: &str, manifest: &AppManifest) -> bool {
        let ids: Vec<String> = [
            &manifest.app.discord_bot_user_id,
            &manifest.app.discord_application_id,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
        let Some(admin) = self.channels() else {
            return false;
        };
        match admin.discord_member(guild_id, &ids).await {
            Ok(Some(present)) => present,
            Ok(None) => false,
            Err(e) => {
                tracing::warn!(error = %e, guild_id, "could not ask Discord whether an app's bot is in the server");
                false
            }
        }
    }

    /// Sends `cmd` for `action` of `app`, or plans it; audited either way.
    pub(crate) async fn dispatch_app(
        &self,
        app: &GuildApp,
        action: &AppAction,
        cmd: AppCommand,
    ) -> Result<Dispatched> {
        let (name, version) = (&app.record.app, &app.record.version);
        let channel_id = cmd
            .thread_key
            .rsplit(':')
            .next()
            .unwrap_or_default()
            .to_owned();
        let target = format!(
            "app:{name} version:{version} action:{} channel:{channel_id}",
            action.name
        );
        let scope = Some(format!("discord:guild:{}", cmd.guild_id));
        let refusal = if !action.permissions.is_empty() {
            Some(format!(
                "it is restricted (it needs the Discord permissions {}), so hearth only plans it",
                action.permissions.join(", ")
            ))
        } else if action.dispatch == Dispatch::None {
            Some("the manifest says hearth never sends this action".to_owned())
        } else if !app.record.public_dispatch_consent {
            Some("no consent to send it was recorded when its version was approved".to_owned())
        } else {
            None
        };
        if let Some(reason) = refusal {
            tracing::info!(app = %name, version = %version, action = %action.name,
                guild_id = %cmd.guild_id, channel_id = %channel_id, "app command dry run");
            self.audit_app(&cmd.user_key, "app.dry_run", target, scope)
                .await;
            return Ok(Dispatched::DryRun {
                app: name.clone(),
                action: action.name.clone(),
                command: cmd.command,
                reason,
            });
        }
        self.post_to_channel(&cmd.thread_key, cmd.run_id.as_deref(), &cmd.command)
            .await?;
        tracing::info!(app = %name, version = %version, action = %action.name,
            guild_id = %cmd.guild_id, channel_id = %channel_id, "app command sent");
        self.audit_app(&cmd.user_key, "app.dispatch", target, scope)
            .await;
        Ok(Dispatched::Sent {
            app: name.clone(),
            action: action.name.clone(),
            command: cmd.command,
        })
    }

    /// Queues `text` as a plain message of its own in the conversation.
    async fn post_to_channel(
        &self,
        thread_key: &str,
        run_id: Option<&str>,
        text: &str,
    ) -> Result<()> {
        let item = self
            .inner
            .replies
            .as_ref()
            .and_then(|r| r.on_app_message(thread_key, run_id, text))
            .ok_or_else(|| {
                RuntimeError::InvalidInput(format!(
                    "{thread_key} is not a Discord channel hearth can post in; app commands go \
                     only to Discord"
                ))
            })?;
        let channel = item.channel.clone();
        self.inner
            .store
            .enqueue_outbox(vec![item], now_ms())
            .await?;
        if let Some(r) = &self.inner.replies {
            r.committed(&channel);
        }
        Ok(())
    }

    /// A mention whose text starts with the prefix of an action of an app
    /// enabled in the guild: sent or planned at once, without a model
    /// call; a dry run is answered with the planned command. `None` when
    /// no enabled app's prefix matches (the text goes to the model).
    pub async fn app_trigger(&self, req: TriggerRequest) -> Result<Option<Dispatched>> {
        crate::apps::check_guild_id(&req.guild_id)?;
        // The run this mention may start is offered the apps in force.
        self.refresh_app_tools_if_changed().await;
        let apps = self.guild_apps(&req.guild_id).await?;
        let found = apps.iter().find_map(|app| {
            match_trigger(&app.manifest, &req.text).map(|hit| (app, hit.action, hit.command))
        });
        let Some((app, action, command)) = found else {
            return Ok(None);
        };
        let event = format!("app-trigger:{}", req.event_id);
        if !self
            .inner
            .store
            .first_sight("discord", &event, now_ms())
            .await?
        {
            return Ok(Some(Dispatched::Repeated));
        }
        let cmd = AppCommand {
            guild_id: req.guild_id.clone(),
            thread_key: req.thread_key.clone(),
            run_id: None,
            user_key: req.user_key,
            command,
        };
        let done = self.dispatch_app(app, action, cmd).await?;
        if let Some(notice) = done.notice() {
            self.post_to_channel(&req.thread_key, None, &notice).await?;
        }
        Ok(Some(done))
    }
}
