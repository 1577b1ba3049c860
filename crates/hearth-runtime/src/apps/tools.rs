//! Enabled apps' actions as tools: `app__<app>__<action>`, offered to runs
//! asked in a guild that enabled a version of the app, with the action's
//! description and arguments. A call is write-class, so the thread's
//! permission mode judges it like any other write (asked first, refused in
//! `plan`, ...); calling it sends the command or dry-runs it (see
//! [`super::dispatch`]), after checking again that the run's guild has the
//! app enabled and its bot present.
//!
//! The list offered is a snapshot refreshed whenever an app is approved,
//! enabled or disabled in this process, and at start; the call itself
//! always reads the store.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::time::Duration;

use hearth_core::ToolSpec;
use hearth_core::apps::{AppManifest, Reply, parse_tool_name, render_command, tool_name};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolSource};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::dispatch::{AppCommand, Dispatched};
use crate::runtime::{Inner, Runtime};

/// Tools offered only on Discord.
const DISCORD: [&str; 1] = ["discord"];

/// The source of apps' tools.
#[derive(Default)]
pub(crate) struct AppTools {
    tools: RwLock<Arc<BTreeMap<String, Arc<dyn Tool>>>>,
    /// Calls of `reply: "read"` actions waiting for their bot's answer.
    waiters: Mutex<Vec<Waiter>>,
    next_waiter: std::sync::atomic::AtomicU64,
    /// The enablements (guild, app, version) the offered list was built
    /// from; `None` before the first build.
    built_from: Mutex<Option<Vec<(String, String, String)>>>,
}

/// A call waiting for the reply of an app's bot in a channel.
struct Waiter {
    id: u64,
    channel_id: String,
    bot_ids: Vec<String>,
    tx: oneshot::Sender<String>,
}

/// How long a `reply: "read"` call waits for the bot's answer.
const REPLY_WAIT: Duration = Duration::from_secs(10);
/// Longest reply read back, in characters (Discord's message limit).
const MAX_REPLY: usize = 2000;

impl AppTools {
    fn replace(
        &self,
        tools: BTreeMap<String, Arc<dyn Tool>>,
        built_from: Vec<(String, String, String)>,
    ) {
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tools);
        *self
            .built_from
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(built_from);
    }

    fn built_from(&self, enablements: &[(String, String, String)]) -> bool {
        self.built_from
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
            == Some(enablements)
    }

    fn current(&self) -> Arc<BTreeMap<String, Arc<dyn Tool>>> {
        self.tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl AppTools {
    /// Waits for the next message of one of `bot_ids` in `channel_id`;
    /// registered before the command is sent, so the answer cannot slip by.
    fn wait_reply(
        &self,
        channel_id: &str,
        bot_ids: Vec<String>,
    ) -> (u64, oneshot::Receiver<String>) {
        let (tx, rx) = oneshot::channel();
        let id = self
            .next_waiter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Waiter {
                id,
                channel_id: channel_id.to_owned(),
                bot_ids,
                tx,
            });
        (id, rx)
    }

    fn forget(&self, id: u64) {
        self.waiters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|w| w.id != id);
    }

    /// Hands a bot's message to the first call waiting for it; false when
    /// none waits.
    fn bot_message(&self, channel_id: &str, author_id: &str, text: &str) -> bool {
        let mut waiters = self.waiters.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = waiters
            .iter()
            .position(|w| w.channel_id == channel_id && w.bot_ids.iter().any(|b| b == author_id))
        else {
            return false;
        };
        let w = waiters.remove(at);
        w.tx.send(text.chars().take(MAX_REPLY).collect()).is_ok()
    }
}

impl ToolSource for AppTools {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.current().values().cloned().collect()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.current().get(name).cloned()
    }
}

/// One action as a tool, offered in the guilds that enabled its app.
struct AppTool {
    spec: ToolSpec,
    guilds: BTreeSet<String>,
    runtime: Weak<Inner>,
}

/// The JSON Schema of an action's arguments: each is text.
fn parameters(manifest: &AppManifest, action: &str) -> Value {
    let Some(action) = manifest.action(action) else {
        return json!({"type": "object"});
    };
    let properties: serde_json::Map<String, Value> = action
        .args
        .iter()
        .map(|a| {
            let mut p =
                json!({"type": "string", "maxLength": hearth_core::apps::command::MAX_ARG_VALUE});
            if let Some(d) = &a.description {
                p["description"] = json!(d);
            }
            (a.name.clone(), p)
        })
        .collect();
    let required: Vec<&str> = action
        .args
        .iter()
        .filter(|a| a.required)
        .map(|a| a.name.as_str())
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[async_trait::async_trait]
impl Tool for AppTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Write
    }

    fn channels(&self) -> Option<&[&'static str]> {
        Some(&DISCORD)
    }

    fn offered_in(&self, scope: &str) -> bool {
        scope
            .strip_prefix("discord:guild:")
            .is_some_and(|g| self.guilds.contains(g))
    }

    /// What another bot says comes back in the result.
    fn untrusted(&self) -> bool {
        true
    }

    fn timeout(&self) -> Option<Duration> {
        Some(REPLY_WAIT + Duration::from_secs(20))
    }

    fn summary(&self, args: &Value) -> String {
        format!("send the app command {} {}", self.spec.name, args)
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let runtime = self
            .runtime
            .upgrade()
            .map(|inner| Runtime { inner })
            .ok_or_else(|| ToolError("apps are not available in this process".into()))?;
        let (app_name, action_name) = parse_tool_name(&self.spec.name)
            .ok_or_else(|| ToolError(format!("{} is not an app's tool", self.spec.name)))?;
        let guild = ctx.scope.strip_prefix("discord:guild:").ok_or_else(|| {
            ToolError("app commands can be sent only from a Discord server's channel".into())
        })?;
        let apps = runtime
            .guild_apps(guild)
            .await
            .map_err(|e| ToolError(e.to_string()))?;
        let app = apps
            .iter()
            .find(|a| a.record.app == app_name)
            .ok_or_else(|| {
                ToolError(format!(
                    "the app {app_name} is not enabled in this server (or its bot is not here)"
                ))
            })?;
        let action = app.manifest.action(action_name).ok_or_else(|| {
            ToolError(format!(
                "the enabled version of {app_name} has no action {action_name}"
            ))
        })?;
        let empty = serde_json::Map::new();
        let command =
            render_command(action, args.as_object().unwrap_or(&empty)).map_err(ToolError)?;
        // A reply that may be read is awaited from the bot the manifest names.
        let reads = action.reply == Some(Reply::Read) && action.is_public();
        let channel_id = ctx.thread_key.rsplit(':').next().unwrap_or_default();
        let waiting = reads.then(|| {
            let bots = [
                &app.manifest.app.discord_bot_user_id,
                &app.manifest.app.discord_application_id,
            ]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
            runtime.inner.app_tools.wait_reply(channel_id, bots)
        });
        let done = runtime
            .dispatch_app(
                app,
                action,
                AppCommand {
                    guild_id: guild.to_owned(),
                    thread_key: ctx.thread_key.clone(),
                    run_id: Some(ctx.run_id.clone()),
                    user_key: ctx.user_key.clone(),
                    command,
                },
            )
            .await
            .map_err(|e| ToolError(e.to_string()));
        let reply = match (&done, waiting) {
            (Ok(Dispatched::Sent { .. }), Some((id, rx))) => {
                let got = tokio::time::timeout(REPLY_WAIT, rx).await;
                runtime.inner.app_tools.forget(id);
                Some(got.ok().and_then(Result::ok))
            }
            (_, Some((id, _))) => {
                runtime.inner.app_tools.forget(id);
                None
            }
            _ => None,
        };
        Ok(match done? {
            Dispatched::Sent { command, .. } => match reply {
                Some(reply) => json!({
                    "sent": true,
                    "command": command,
                    "reply": reply,
                    "note": if reply.is_some() { "the app's bot answered this in the channel" }
                            else { "the app's bot did not answer within 10 s" },
                }),
                None => json!({
                    "sent": true,
                    "command": command,
                    "note": "sent into this channel as hearth; the app's bot answers there",
                }),
            },
            Dispatched::DryRun {
                command, reason, ..
            } => json!({
                "sent": false,
                "dry_run": true,
                "planned_command": command,
                "reason": reason,
                "note": "tell the user the planned command; hearth did not send it",
            }),
            Dispatched::Repeated => json!({"sent": false}),
        })
    }
}

impl Runtime {
    /// A message another bot posted in a guild channel: when a call of a
    /// `reply: "read"` action waits for this bot there, it is that call's
    /// answer (true). Other bots' messages are otherwise ignored.
    pub fn app_bot_message(&self, channel_id: &str, author_id: &str, text: &str) -> bool {
        self.inner
            .app_tools
            .bot_message(channel_id, author_id, text)
    }

    /// Rebuilds the offered app tools when the store's enablements differ
    /// from those they were built from (another replica sharing the store
    /// enabled or disabled an app). One small read per guild mention.
    pub(crate) async fn refresh_app_tools_if_changed(&self) {
        match self.enablement_keys().await {
            Ok(keys) if self.inner.app_tools.built_from(&keys) => {}
            Ok(_) => self.refresh_app_tools().await,
            Err(e) => tracing::warn!(error = %e, "could not read the enabled apps"),
        }
    }

    async fn enablement_keys(&self) -> crate::Result<Vec<(String, String, String)>> {
        Ok(self
            .inner
            .store
            .list_app_enablements(None)
            .await?
            .into_iter()
            .map(|e| (e.guild_id, e.app, e.version))
            .collect())
    }

    /// Rebuilds the offered app tools from the store (after a change).
    pub(crate) async fn refresh_app_tools(&self) {
        let source = &self.inner.app_tools;
        match self.app_tool_list().await {
            Ok((tools, built_from)) => source.replace(tools, built_from),
            Err(e) => tracing::warn!(error = %e, "could not list the enabled apps' tools"),
        }
    }

    async fn app_tool_list(
        &self,
    ) -> crate::Result<(
        BTreeMap<String, Arc<dyn Tool>>,
        Vec<(String, String, String)>,
    )> {
        let mut specs: BTreeMap<String, (ToolSpec, BTreeSet<String>)> = BTreeMap::new();
        let enablements = self.inner.store.list_app_enablements(None).await?;
        let built_from = enablements
            .iter()
            .map(|e| (e.guild_id.clone(), e.app.clone(), e.version.clone()))
            .collect();
        for enabled in enablements {
            let Some(record) = self
                .inner
                .store
                .app_version(&enabled.app, &enabled.version)
                .await?
            else {
                continue;
            };
            let Ok(manifest) = AppManifest::parse(record.manifest.as_bytes()) else {
                continue;
            };
            for action in &manifest.actions {
                let name = tool_name(&manifest.app.name, &action.name);
                let entry = specs.entry(name.clone()).or_insert_with(|| {
                    let spec = ToolSpec {
                        name,
                        description: format!(
                            "{} (a command of the app {} in this Discord server; restricted \
                             ones are only planned, never sent)",
                            action.description, manifest.app.name
                        ),
                        parameters: parameters(&manifest, &action.name),
                    };
                    (spec, BTreeSet::new())
                });
                entry.1.insert(enabled.guild_id.clone());
            }
        }
        let tools = specs
            .into_iter()
            .map(|(name, (spec, guilds))| {
                let tool: Arc<dyn Tool> = Arc::new(AppTool {
                    spec,
                    guilds,
                    runtime: Arc::downgrade(&self.inner),
                });
                (name, tool)
            })
            .collect();
        Ok((tools, built_from))
    }
}
