//! Permission modes of threads: the default a thread has, what is in force
//! now (a lapsed mode falls back; `bypass` to `ask`), and setting one, with
//! its checks (`bypass` needs `permissions.bypass` and is never set in a
//! group) and its audit record.

use hearth_agent::policy::{decide, scope_chain, subjects};
use hearth_config::ModeName;
use hearth_core::records::ThreadState;
use hearth_core::{PermissionMode, ThreadKey, Timestamp, now_ms};
use hearth_store::AuditEvent;
use tracing::warn;

use crate::error::{Result, RuntimeError};
use crate::live::Live;
use crate::runtime::Runtime;

/// The capability that lets a user set `bypass`.
pub const BYPASS_CAPABILITY: &str = "permissions.bypass";

/// The longest a mode set with an expiry may last: a year.
const MAX_EXPIRES_IN_SECS: u64 = 365 * 86_400;

/// Who sets a thread's mode, and from where.
#[derive(Debug, Clone, Copy)]
pub enum ModeSetter<'a> {
    /// The API token holder (the CLI, the TUI): holds every capability.
    Operator,
    /// A chat user, in the space they wrote from.
    User {
        /// Their user key.
        user_key: &'a str,
        /// Their platform role ids (grants to `role:<id>` apply).
        roles: &'a [String],
        /// The permission scope they wrote in (`None`: global).
        scope: Option<&'a str>,
        /// The channel knows the chat is a group (a guild channel, a
        /// group chat, a workspace channel).
        in_group: bool,
    },
}

/// A thread's mode in force and when it lapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModeState {
    /// The mode.
    pub mode: PermissionMode,
    /// When it lapses; `None` for a mode without expiry or the default.
    pub expires_at: Option<Timestamp>,
}

pub(crate) fn from_config(m: ModeName) -> PermissionMode {
    match m {
        ModeName::Deny => PermissionMode::Deny,
        ModeName::Plan => PermissionMode::Plan,
        ModeName::Ask => PermissionMode::Ask,
        ModeName::AcceptEdits => PermissionMode::AcceptEdits,
        ModeName::Auto => PermissionMode::Auto,
        ModeName::Bypass => PermissionMode::Bypass,
    }
}

/// The configured mode of a thread nobody set one on: its channel's
/// `default_mode`, else `[permissions] default_mode`.
pub(crate) fn default_mode(live: &Live, thread_key: &str) -> PermissionMode {
    let c = &live.config;
    let channel = match thread_key.split(':').next().unwrap_or_default() {
        "telegram" => c.channels.telegram.default_mode,
        "discord" => c.channels.discord.default_mode,
        "slack" => c.channels.slack.default_mode,
        "sms" => c.channels.sms.default_mode,
        _ => None,
    };
    from_config(channel.unwrap_or(c.permissions.default_mode))
}

/// The mode in force on a thread with settings `state` at `now`: the one
/// set unless it lapsed (a lapsed `bypass` is `ask`, another lapsed mode
/// the default), else the default.
pub(crate) fn in_force(live: &Live, state: &ThreadState, now: Timestamp) -> ModeState {
    let fallback = ModeState {
        mode: default_mode(live, &state.thread_key),
        expires_at: None,
    };
    let Some(mode) = state.mode.as_deref().and_then(PermissionMode::parse) else {
        return fallback;
    };
    match state.mode_expires_at {
        Some(at) if at <= now && mode == PermissionMode::Bypass => ModeState {
            mode: PermissionMode::Ask,
            expires_at: None,
        },
        Some(at) if at <= now => fallback,
        expires_at => ModeState { mode, expires_at },
    }
}

impl Runtime {
    /// The mode in force on a thread now.
    pub async fn thread_mode(&self, thread_key: &ThreadKey) -> Result<ModeState> {
        let state = self.inner.store.thread_settings(thread_key).await?;
        Ok(in_force(&self.inner.live(), &state, now_ms()))
    }

    /// Sets a thread's permission mode, for `expires_in_secs` when given.
    /// `bypass` needs [`BYPASS_CAPABILITY`] (an operator holds it), is
    /// refused in a group, and lapses to `ask` after `[permissions]
    /// bypass_minutes` at the latest. Every change and every refusal is
    /// audited: who, from which mode to which, where.
    pub async fn set_mode(
        &self,
        thread_key: &ThreadKey,
        mode: &str,
        expires_in_secs: Option<u64>,
        who: ModeSetter<'_>,
    ) -> Result<ModeState> {
        let mode = PermissionMode::parse(mode).ok_or_else(|| {
            RuntimeError::InvalidMode(format!(
                "unknown permission mode {mode:?}; one of {}",
                PermissionMode::names()
            ))
        })?;
        if let Some(secs) = expires_in_secs
            && !(1..=MAX_EXPIRES_IN_SECS).contains(&secs)
        {
            return Err(RuntimeError::InvalidInput(format!(
                "expires_in_secs must be from 1 to {MAX_EXPIRES_IN_SECS} (a year); got {secs}"
            )));
        }
        let live = self.inner.live();
        let (actor, scope) = match who {
            ModeSetter::Operator => ("operator".to_owned(), None),
            ModeSetter::User {
                user_key, scope, ..
            } => (user_key.to_owned(), scope.map(str::to_owned)),
        };
        let now = now_ms();
        let before = in_force(
            &live,
            &self.inner.store.thread_settings(thread_key).await?,
            now,
        );
        let audit = |outcome: String, capability: Option<&str>| AuditEvent {
            at: now_ms(),
            actor: actor.clone(),
            action: "mode.set".into(),
            target: thread_key.to_string(),
            outcome,
            capability: capability.map(str::to_owned),
            scope: scope.clone(),
        };
        let mut expires_at = expires_in_secs.map(|s| now.saturating_add(secs_ms(s)));
        if mode == PermissionMode::Bypass {
            let in_group = matches!(who, ModeSetter::User { in_group: true, .. })
                || self.is_group_thread(thread_key).await?;
            if in_group {
                self.audit(audit("denied: in a group".into(), None)).await;
                return Err(RuntimeError::BypassInGroup(format!(
                    "bypass cannot be set on {thread_key}: it is a group chat, where others \
                     would act without being asked; use auto, or set bypass in a direct chat"
                )));
            }
            if !self.may_bypass(&live, who).await? {
                self.audit(audit("denied".into(), Some(BYPASS_CAPABILITY)))
                    .await;
                return Err(RuntimeError::Forbidden(format!(
                    "setting bypass needs capability {BYPASS_CAPABILITY} (in the admin preset), \
                     which this user does not have (missing capability {BYPASS_CAPABILITY}); \
                     an operator can grant it, or choose auto"
                )));
            }
            let most = now.saturating_add(secs_ms(
                live.config.permissions.bypass_minutes.saturating_mul(60),
            ));
            expires_at = Some(expires_at.map_or(most, |at| at.min(most)));
        }
        self.inner
            .store
            .set_thread_mode(thread_key, Some(mode.as_str()), expires_at)
            .await?;
        self.audit(audit(format!("{}->{}", before.mode, mode), None))
            .await;
        Ok(ModeState { mode, expires_at })
    }

    /// Whether `who` holds [`BYPASS_CAPABILITY`] where they are.
    async fn may_bypass(&self, live: &Live, who: ModeSetter<'_>) -> Result<bool> {
        let ModeSetter::User {
            user_key,
            roles,
            scope,
            ..
        } = who
        else {
            return Ok(true);
        };
        let policy = live.engine.policy();
        if decide(policy, user_key, roles, BYPASS_CAPABILITY, &[]).allowed {
            return Ok(true);
        }
        let scopes =
            scope_chain(scope.unwrap_or("global")).unwrap_or_else(|_| vec!["global".to_owned()]);
        let grants = self
            .inner
            .store
            .grants_for(&subjects(user_key, roles), &scopes)
            .await?;
        Ok(decide(policy, user_key, roles, BYPASS_CAPABILITY, &grants).allowed)
    }

    /// Whether a thread is a group chat, as far as its key and its runs
    /// tell: a Telegram group (negative chat id), a Slack channel thread,
    /// or a Discord channel whose last run was asked in a guild.
    async fn is_group_thread(&self, thread_key: &str) -> Result<bool> {
        if let Some(chat) = thread_key.strip_prefix("telegram:chat:") {
            return Ok(chat.starts_with('-'));
        }
        if thread_key.starts_with("slack:thread:") {
            return Ok(true);
        }
        if thread_key.starts_with("discord:channel:") {
            let last = self
                .inner
                .store
                .list_runs(&hearth_store::RunFilter {
                    thread_key: Some(thread_key.to_owned()),
                    status: None,
                    limit: 1,
                    ..hearth_store::RunFilter::default()
                })
                .await?;
            return Ok(last.iter().any(|r| {
                r.scope
                    .as_deref()
                    .is_some_and(|s| s.starts_with("discord:guild:"))
            }));
        }
        Ok(false)
    }

    async fn audit(&self, event: AuditEvent) {
        if let Err(e) = self.inner.store.append_audit(event).await {
            warn!(error = %e, "could not write a mode change to the audit log");
        }
    }
}

fn secs_ms(secs: u64) -> i64 {
    i64::try_from(secs.saturating_mul(1000)).unwrap_or(i64::MAX)
}
