//! The manager: one supervisor task per configured server.
//!
//! Every enabled server is started when hearth starts. A server that fails
//! to start, or whose connection ends, is started again after a backoff that
//! doubles from 1 s up to 60 s (reset once a connection has stayed up for a
//! minute). Its tools stay listed while it is down, marked unavailable, and
//! a call to one answers why; a server that never came up lists no tools.
//! `notifications/tools/list_changed` makes the supervisor list the tools
//! again. Nothing here can take hearth down: every failure is a state and a
//! `last_error`.

mod reconfigure;
mod restart;
pub use reconfigure::ServersSynced;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use hearth_config::{McpConfig, McpServerConfig, PresetName};
use serde_json::{Map, Value};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::child::{STDIN_GRACE, TERM_GRACE};
use crate::client::{McpClient, SESSION_GRACE, Target, connect_within};
use crate::error::{McpError, Result};
use crate::skills::SkillServer;
use crate::tool::McpTool;

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A connection that lasted this long resets the backoff.
const STABLE: Duration = Duration::from_secs(60);

/// Where a server is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// Being started for the first time.
    Starting,
    /// Connected; its tools can be called.
    Ready,
    /// Its connection ended, or an attempt after that is under way.
    Restarting,
    /// The last attempt to start it failed; another follows after a backoff
    /// (never, when its configuration cannot work).
    Failed,
    /// `enabled = false`.
    Disabled,
}

impl ServerState {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Restarting => "restarting",
            Self::Failed => "failed",
            Self::Disabled => "disabled",
        }
    }
}

/// One server as `GET /v1/mcp/servers` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its name in `[mcp.servers.<name>]`, or the executable skill's name.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Where it is in its life.
    pub state: ServerState,
    /// Why it last failed, if it did.
    pub last_error: Option<String>,
    /// How many tools it offers (as last listed).
    pub tools: usize,
}

/// What the supervisor knows now.
pub(crate) struct Live {
    pub(crate) state: ServerState,
    pub(crate) last_error: Option<String>,
    pub(crate) client: Option<Arc<dyn McpClient>>,
    /// By wire name.
    pub(crate) tools: Arc<BTreeMap<String, Arc<McpTool>>>,
}

/// One configured server, or one executable skill.
pub(crate) struct Server {
    pub(crate) name: String,
    transport: &'static str,
    config: McpServerConfig,
    /// `mcp.<name>`, leaked once per name (`Tool::capability` hands out
    /// `&'static str`; see `capability_of`); `skills.use` for a skill.
    pub(crate) capability: &'static str,
    /// The least preset holding `capability` (`[mcp.servers.<name>]
    /// preset`); `None` for a skill, whose `skills.use` the permission model
    /// knows.
    pub(crate) preset: Option<&'static str>,
    /// `mcp:<name>` or `skill:<name>`.
    pub(crate) source: String,
    /// What the skill was started from (`None` for a configured server).
    pub(crate) skill: Option<SkillServer>,
    pub(crate) max_result_bytes: usize,
    /// `None` when the configuration cannot work here (a header variable is
    /// not set): the server stays failed with the reason.
    target: std::result::Result<Target, String>,
    live: RwLock<Live>,
    /// Bumped after every change of `live`, for waiters.
    changed: tokio::sync::watch::Sender<()>,
    /// Cancelled to stop the supervisor, which then closes the connection.
    stop: CancellationToken,
}

impl Server {
    pub(crate) fn read(&self) -> std::sync::RwLockReadGuard<'_, Live> {
        self.live.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Live> {
        self.live.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes `live` and wakes the waiters.
    fn update(&self, f: impl FnOnce(&mut Live)) {
        f(&mut self.write());
        self.changed.send_replace(());
    }

    fn set(&self, state: ServerState, error: Option<String>) {
        self.update(|live| {
            live.state = state;
            if error.is_some() {
                live.last_error = error;
            }
        });
    }

    /// The client, or why there is none.
    pub(crate) fn client(&self) -> Result<Arc<dyn McpClient>> {
        let live = self.read();
        match (&live.client, live.state) {
            (Some(c), ServerState::Ready) => Ok(c.clone()),
            _ => Err(self.unavailable(&live)),
        }
    }

    /// Why its tools cannot be called in the state `live` says.
    pub(crate) fn unavailable(&self, live: &Live) -> McpError {
        McpError::Unavailable {
            server: self.name.clone(),
            state: live.state.as_str(),
            last_error: live.last_error.clone(),
        }
    }

    /// Waits, up to its start timeout, until it is ready and lists `wire`:
    /// `Err` with its own error when it failed to start, or does not list
    /// the tool once up.
    pub(crate) async fn wait_offering(
        self: Arc<Self>,
        wire: String,
    ) -> std::result::Result<(), String> {
        let mut changed = self.changed.subscribe();
        let wait = async {
            loop {
                if let Some(done) = self.offering(&wire) {
                    return done;
                }
                if changed.changed().await.is_err() {
                    return Err(format!("MCP server {} is gone", self.name));
                }
            }
        };
        match tokio::time::timeout(self.timeout(), wait).await {
            Ok(done) => done,
            Err(_) => Err(format!(
                "{} (waited {} s for it to start)",
                self.unavailable(&self.read()),
                self.config.timeout_secs
            )),
        }
    }

    /// Whether waiting for `wire` is over, and how it ended.
    fn offering(&self, wire: &str) -> Option<std::result::Result<(), String>> {
        let live = self.read();
        match live.state {
            ServerState::Ready if live.client.is_some() => Some(if live.tools.contains_key(wire) {
                Ok(())
            } else {
                Err(format!("MCP server {} has no tool {wire}", self.name))
            }),
            ServerState::Failed | ServerState::Disabled => {
                Some(Err(self.unavailable(&live).to_string()))
            }
            _ => None,
        }
    }

    /// True while its tools can be called.
    pub(crate) fn ready(&self) -> bool {
        let live = self.read();
        live.state == ServerState::Ready && live.client.is_some()
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.timeout_secs)
    }

    fn status(&self) -> ServerStatus {
        let live = self.read();
        ServerStatus {
            name: self.name.clone(),
            transport: self.transport,
            state: live.state,
            last_error: live.last_error.clone(),
            tools: live.tools.len(),
        }
    }

    /// Lists the tools and installs them as hearth tools.
    async fn refresh(self: &Arc<Self>, client: &Arc<dyn McpClient>) -> Result<usize> {
        let listed = tokio::time::timeout(self.timeout(), client.list_tools())
            .await
            .map_err(|_| McpError::Timeout(self.config.timeout_secs))??;
        let mut taken = BTreeSet::new();
        let mut tools = BTreeMap::new();
        for t in &listed {
            let Some(remote) = t.get("name").and_then(Value::as_str) else {
                tracing::warn!(server = %self.name, "an MCP tool without a name was skipped");
                continue;
            };
            // The MCP specification calls annotations untrusted: a server's
            // readOnlyHint counts only when the operator said to trust it.
            let hinted = t
                .pointer("/annotations/readOnlyHint")
                .and_then(Value::as_bool)
                == Some(true);
            let read = (self.config.trust_annotations && hinted)
                || self.config.read_tools.iter().any(|r| r == remote);
            let wire = crate::names::tool_name(&self.name, remote, &mut taken);
            let tool = McpTool::new(Arc::downgrade(self), wire.clone(), remote, t, read);
            tools.insert(wire, Arc::new(tool));
        }
        for r in &self.config.read_tools {
            if !listed
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some(r))
            {
                tracing::warn!(server = %self.name, tool = %r, "read_tools names a tool this server does not list");
            }
        }
        let n = tools.len();
        self.update(|live| live.tools = Arc::new(tools));
        Ok(n)
    }

    /// Keeps the server running until hearth stops or [`Server::stop`] is
    /// cancelled; then closes its connection (a child by the stdio shutdown
    /// sequence) before returning.
    async fn supervise(self: Arc<Self>) {
        let target = match &self.target {
            Ok(t) => t.clone(),
            Err(why) => {
                tracing::warn!(server = %self.name, error = %why, "MCP server cannot start");
                self.set(ServerState::Failed, Some(why.clone()));
                return;
            }
        };
        let mut backoff = FIRST_BACKOFF;
        while !self.stop.is_cancelled() {
            match self.run_once(&target).await {
                Ok(up) if up >= STABLE => backoff = FIRST_BACKOFF,
                Ok(_) => {}
                Err(_) if self.stop.is_cancelled() => return,
                Err(e) => {
                    tracing::warn!(server = %self.name, error = %e, retry_in_ms = backoff.as_millis() as u64, "MCP server failed");
                    self.set(ServerState::Failed, Some(e.to_string()));
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            let again = if self.read().state == ServerState::Starting {
                ServerState::Starting
            } else {
                ServerState::Restarting
            };
            self.set(again, None);
        }
    }

    /// One connection, from start to end: how long it was up, or why it
    /// could not start. Stopping closes it and answers how long it was up.
    async fn run_once(self: &Arc<Self>, target: &Target) -> Result<Duration> {
        if let Some(skill) = &self.skill {
            skill.check_before_start().await?;
        }
        let mut conn =
            connect_within(&self.name, target, self.timeout(), self.stop.cancelled()).await?;
        let client = conn.client.clone();
        let tools_changed = conn.tools_changed.clone();
        let n = match self.refresh(&client).await {
            Ok(n) => n,
            Err(e) => {
                conn.close().await;
                return Err(e);
            }
        };
        let since = Instant::now();
        self.update(|live| {
            live.client = Some(client.clone());
            live.state = ServerState::Ready;
            live.last_error = None;
        });
        tracing::info!(server = %self.name, tools = n, "MCP server ready");
        let reason = loop {
            tokio::select! {
                reason = conn.ended() => break Some(reason),
                () = self.stop.cancelled() => break None,
                () = tools_changed.notified() => match self.refresh(&client).await {
                    Ok(n) => tracing::info!(server = %self.name, tools = n, "MCP tool list refreshed"),
                    Err(e) => tracing::warn!(server = %self.name, error = %e, "MCP tool list refresh failed"),
                },
            }
        };
        self.update(|live| live.client = None);
        // Also after the server ended by itself: its process is reaped, and
        // what it started is stopped with it.
        conn.close().await;
        let Some(reason) = reason else {
            tracing::info!(server = %self.name, "MCP server closed");
            return Ok(since.elapsed());
        };
        tracing::warn!(server = %self.name, reason = %reason, "MCP server connection ended");
        self.update(|live| {
            live.state = ServerState::Restarting;
            live.last_error = Some(reason);
        });
        Ok(since.elapsed())
    }
}

impl Server {
    /// A server of `[mcp.servers.<name>]`.
    fn configured(
        name: &str,
        sc: &McpServerConfig,
        max_result_bytes: usize,
        env: &BTreeMap<String, String>,
        http: &reqwest::Client,
    ) -> Self {
        Self::with(
            name,
            sc.clone(),
            capability_of(name),
            Some(match sc.preset {
                PresetName::None => "none",
                PresetName::Member => "member",
                PresetName::Trusted => "trusted",
                PresetName::Admin => "admin",
            }),
            format!("mcp:{name}"),
            max_result_bytes,
            target(name, sc, env, http),
        )
    }

    /// A verified executable skill's server.
    pub(crate) fn skill(
        skill: SkillServer,
        max_result_bytes: usize,
        env: &BTreeMap<String, String>,
    ) -> Self {
        let config = McpServerConfig {
            command: Some(skill.skill.entry.display().to_string()),
            args: skill.skill.args.clone(),
            timeout_secs: skill.timeout_secs,
            read_tools: skill.read_tools.clone(),
            trust_annotations: skill.trust_annotations,
            ..McpServerConfig::default()
        };
        let target = Ok(skill.target(env));
        let mut server = Self::with(
            skill.name(),
            config,
            crate::skills::CAPABILITY,
            None,
            format!("skill:{}", skill.name()),
            max_result_bytes,
            target,
        );
        server.skill = Some(skill);
        server
    }

    fn with(
        name: &str,
        config: McpServerConfig,
        capability: &'static str,
        preset: Option<&'static str>,
        source: String,
        max_result_bytes: usize,
        target: std::result::Result<Target, String>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            transport: if config.url.is_some() {
                "http"
            } else {
                "stdio"
            },
            live: RwLock::new(Live {
                state: if config.enabled {
                    ServerState::Starting
                } else {
                    ServerState::Disabled
                },
                last_error: None,
                client: None,
                tools: Arc::default(),
            }),
            config,
            capability,
            preset,
            source,
            skill: None,
            max_result_bytes,
            target,
            changed: tokio::sync::watch::channel(()).0,
            stop: CancellationToken::new(),
        }
    }
}

/// The configured MCP servers and the executable skills, their supervisors,
/// and their tools as a [`hearth_tools::ToolSource`] for the registry.
#[derive(Clone, Default)]
pub struct McpManager {
    /// By name; configured servers are fixed, skills come and go on reload.
    pub(crate) servers: Arc<RwLock<BTreeMap<String, Arc<Server>>>>,
    /// Each running supervisor, by server name.
    pub(crate) tasks: Arc<Mutex<BTreeMap<String, JoinHandle<()>>>>,
    /// Supervisors told to stop (a skill removed on reload) that may still
    /// be closing their child; [`McpManager::shutdown`] waits for them too.
    pub(crate) closing: Arc<Mutex<Vec<JoinHandle<()>>>>,
    /// Set by [`McpManager::start`]: servers added later start at once.
    pub(crate) started: Arc<AtomicBool>,
    /// hearth's environment, which skills' declared variables come from.
    pub(crate) env: Arc<BTreeMap<String, String>>,
    pub(crate) max_result_bytes: usize,
    /// Per configured server, the environment its entry read, so a reload
    /// restarts it when that changed.
    pub(crate) env_seen: Arc<Mutex<BTreeMap<String, reconfigure::EnvSeen>>>,
}

impl McpManager {
    /// The servers of `config`, not started yet. `env` is hearth's own
    /// environment (the children's `PATH`, `HOME`, `env_pass` and the HTTP
    /// `headers_env` values come from it); `http` is the shared HTTP client.
    pub fn new(config: &McpConfig, env: &BTreeMap<String, String>, http: &reqwest::Client) -> Self {
        let servers = config
            .servers
            .iter()
            .map(|(name, sc)| {
                let server = Server::configured(name, sc, config.max_result_bytes, env, http);
                (name.clone(), Arc::new(server))
            })
            .collect();
        let env_seen = config
            .servers
            .iter()
            .map(|(name, sc)| (name.clone(), reconfigure::env_seen(sc, env)))
            .collect();
        Self {
            servers: Arc::new(RwLock::new(servers)),
            tasks: Arc::default(),
            closing: Arc::default(),
            started: Arc::default(),
            env: Arc::new(env.clone()),
            max_result_bytes: config.max_result_bytes,
            env_seen: Arc::new(Mutex::new(env_seen)),
        }
    }

    pub(crate) fn servers(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Server>>> {
        self.servers.read().unwrap_or_else(|p| p.into_inner())
    }

    fn server(&self, name: &str) -> Option<Arc<Server>> {
        self.servers().get(name).cloned()
    }

    /// Starts a supervisor for every enabled server (inside a Tokio
    /// runtime); servers added afterwards (skills) start as they are added.
    pub fn start(&self) {
        self.started.store(true, Ordering::SeqCst);
        let servers: Vec<Arc<Server>> = self.servers().values().cloned().collect();
        for server in servers {
            self.spawn(server);
        }
    }

    /// Starts `server`'s supervisor unless it is disabled or already has one.
    pub(crate) fn spawn(&self, server: Arc<Server>) {
        if !server.config.enabled {
            return;
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        if !tasks.contains_key(&server.name) {
            let name = server.name.clone();
            tasks.insert(name, tokio::spawn(server.supervise()));
        }
    }

    /// Stops `server`'s supervisor, which closes its connection (a child by
    /// the stdio shutdown sequence) in the background.
    pub(crate) fn stop(&self, server: &Server) {
        server.stop.cancel();
        let task = self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&server.name);
        if let Some(task) = task {
            let mut closing = self.closing.lock().unwrap_or_else(|p| p.into_inner());
            closing.retain(|t| !t.is_finished());
            closing.push(task);
        }
    }

    /// Stops every supervisor and waits until each has closed its
    /// connection: a child gets its stdin closed, then SIGTERM, then SIGKILL
    /// to its process group, so none outlives hearth. Bounded by the
    /// sequence's own waits; a supervisor still busy after that is aborted
    /// (its child is then killed as it is dropped).
    pub async fn shutdown(&self) {
        for server in self.servers().values() {
            server.stop.cancel();
        }
        let mut tasks: Vec<JoinHandle<()>> =
            std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()))
                .into_values()
                .collect();
        tasks.append(&mut std::mem::take(
            &mut *self.closing.lock().unwrap_or_else(|p| p.into_inner()),
        ));
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        let bound = SESSION_GRACE + STDIN_GRACE + TERM_GRACE * 2 + Duration::from_secs(1);
        // They close side by side (each is its own task); waiting for them
        // in turn takes as long as the slowest.
        let all = async {
            for t in tasks {
                let _ = t.await;
            }
        };
        if tokio::time::timeout(bound, all).await.is_err() {
            tracing::warn!(
                "MCP servers still closing after {} s; killing them",
                bound.as_secs()
            );
            for a in aborts {
                a.abort();
            }
        }
    }

    /// True when no server is configured and no skill runs.
    pub fn is_empty(&self) -> bool {
        self.servers().is_empty()
    }

    /// Every configured server and executable skill, by name.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers().values().map(|s| s.status()).collect()
    }

    /// Calls `server`'s tool by its own name (not the `<server>__` one); the
    /// raw MCP result. No permission, confirmation or audit applies here: a
    /// person's call goes through `Runtime::call_tool` (with
    /// [`McpManager::tool_name`]), this is for tests and tools that speak to
    /// a server themselves.
    pub async fn call(&self, server: &str, tool: &str, args: Map<String, Value>) -> Result<Value> {
        let s = self
            .server(server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))?;
        let client = s.client()?;
        tokio::time::timeout(s.timeout(), client.call_tool(tool, args))
            .await
            .map_err(|_| McpError::Timeout(s.config.timeout_secs))?
    }

    /// The registry's name (`<server>__<tool>`, shortened when long) of
    /// `server`'s tool `tool` (the server's own name for it), as last
    /// listed: `Ok(None)` when the server is up and lists no such tool;
    /// `UnknownServer`, or why the server is down when it never listed it.
    pub fn tool_name(&self, server: &str, tool: &str) -> Result<Option<String>> {
        let s = self
            .server(server)
            .ok_or_else(|| McpError::UnknownServer(server.to_owned()))?;
        let tools = s.read().tools.clone();
        if let Some(t) = tools.values().find(|t| t.remote() == tool) {
            return Ok(Some(hearth_tools::Tool::spec(t.as_ref()).name.clone()));
        }
        s.client()?;
        Ok(None)
    }

    /// Waits until `server`'s status satisfies `done` (tests, and callers
    /// that need a server up); false when the server is unknown or `within`
    /// passed first.
    pub async fn wait_for(
        &self,
        server: &str,
        within: Duration,
        done: impl Fn(&ServerStatus) -> bool,
    ) -> bool {
        let Some(s) = self.server(server) else {
            return false;
        };
        let mut rx = s.changed.subscribe();
        let wait = async {
            loop {
                if done(&s.status()) {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::time::timeout(within, wait).await.is_ok()
    }
}

/// `mcp.<name>`, leaked once per name for the process: a reload that
/// restarts or adds a server asks again for the same names.
fn capability_of(name: &str) -> &'static str {
    static LEAKED: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());
    let wanted = format!("mcp.{name}");
    let mut leaked = LEAKED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(known) = leaked.get(wanted.as_str()) {
        return known;
    }
    let new: &'static str = Box::leak(wanted.into_boxed_str());
    leaked.insert(new);
    new
}

/// How to reach server `name`, or why it cannot be reached with this
/// environment.
fn target(
    name: &str,
    sc: &McpServerConfig,
    env: &BTreeMap<String, String>,
    http: &reqwest::Client,
) -> std::result::Result<Target, String> {
    if let Some(url) = &sc.url {
        let mut headers = BTreeMap::new();
        for (header, var) in &sc.headers_env {
            let value = env.get(var).filter(|v| !v.is_empty()).ok_or_else(|| {
                format!("mcp.servers.{name}.headers_env.{header} names {var}, which is not set")
            })?;
            headers.insert(header.clone(), value.clone());
        }
        return Ok(Target::Http {
            url: url.clone(),
            headers,
            client: http.clone(),
        });
    }
    // Only what the entry names, plus PATH and HOME: a server must not see
    // hearth's provider keys.
    let mut child = BTreeMap::new();
    for var in ["PATH", "HOME"] {
        if let Some(v) = env.get(var) {
            child.insert(var.to_owned(), v.clone());
        }
    }
    for var in &sc.env_pass {
        match env.get(var) {
            Some(v) => {
                child.insert(var.clone(), v.clone());
            }
            None => {
                tracing::warn!(server = %name, variable = %var, "env_pass names a variable that is not set")
            }
        }
    }
    child.extend(sc.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    Ok(Target::Stdio {
        command: sc.command.clone().unwrap_or_default(),
        args: sc.args.clone(),
        env: child,
        cwd: None,
    })
}
