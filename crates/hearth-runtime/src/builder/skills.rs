//! The skills a runtime offers: load options from `[skills]` and this
//! process (working folder, `PATH`, environment), the executable ones run
//! as MCP servers, the prompt hook, and reload on SIGHUP.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hearth_config::Config;
use hearth_skills::{Catalog, Host, Root, Skills, SkillsOptions, Trust};

use super::BuildError;

/// `path`, relative to the home when relative.
fn under_home(home: &Path, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { home.join(p) }
}

/// The load options for `config` in `home`, with this process's facts (its
/// working folder, `HOME`, `PATH` and the variables set). `hearth skills
/// list|show|check` read the folders with these too, so they see what a
/// server would.
pub fn options(config: &Config, home: &Path) -> Result<SkillsOptions, BuildError> {
    let c = &config.skills;
    let extra: Vec<PathBuf> = c.extra_dirs.iter().map(|d| under_home(home, d)).collect();
    let workspace = std::env::current_dir().ok();
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let keys = SkillsOptions::trusted_keys(&c.trusted_keys)
        .map_err(|e| BuildError::Config(format!("skills.trusted_keys: {e}")))?;
    let allowed_unsigned_dirs = c
        .allowed_unsigned_dirs
        .iter()
        // A folder that does not exist allows nothing.
        .filter_map(|d| std::fs::canonicalize(under_home(home, d)).ok())
        .collect();
    let env: HashSet<String> = std::env::vars_os()
        .filter(|(_, v)| !v.is_empty())
        .filter_map(|(k, _)| k.into_string().ok())
        .collect();
    let path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    Ok(SkillsOptions {
        roots: Root::standard(workspace.as_deref(), user_home.as_deref(), home, &extra),
        trust: Trust {
            keys,
            allowed_unsigned_dirs,
            config: c.config.clone(),
        },
        prompt_budget_chars: c.prompt_budget_chars,
        host: Host {
            os: Host::os_name(std::env::consts::OS),
            path,
            env,
        },
    })
}

/// The skills of `options`, loaded once (and logged); with `sighup`, a
/// SIGHUP reloads them.
pub(super) fn load(options: SkillsOptions, sighup: bool) -> Arc<Skills> {
    let t0 = std::time::Instant::now();
    let skills = Arc::new(Skills::load(options));
    let catalog = skills.catalog();
    tracing::info!(
        skills = catalog.skills.len(),
        eligible = catalog.skills.iter().filter(|s| s.eligible).count(),
        duration_ms = t0.elapsed().as_millis() as u64,
        "skills loaded"
    );
    for s in catalog.skills.iter().filter(|s| !s.eligible) {
        tracing::info!(skill = %s.name, reason = s.reason.as_deref().unwrap_or(""), "skill not offered");
    }
    #[cfg(unix)]
    if sighup {
        tokio::spawn(reload_on_sighup(skills.clone()));
    }
    #[cfg(not(unix))]
    let _ = sighup;
    skills
}

#[cfg(unix)]
async fn reload_on_sighup(skills: Arc<Skills>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::warn!("cannot listen for SIGHUP; reload skills with POST /v1/skills/reload");
        return;
    };
    while hup.recv().await.is_some() {
        let s = skills.clone();
        match tokio::task::spawn_blocking(move || s.reload().skills.len()).await {
            Ok(n) => tracing::info!(skills = n, "skills reloaded on SIGHUP"),
            Err(e) => tracing::warn!(error = %e, "reloading skills failed"),
        }
    }
}

/// `[skills]`'s settings of executable skills, which a configuration
/// reload replaces: the next sync restarts the skills whose settings
/// changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExecSettings {
    timeout_secs: u64,
    executable: std::collections::BTreeMap<String, hearth_config::ExecutableSkillConfig>,
}

impl ExecSettings {
    pub(crate) fn of(config: &Config) -> Self {
        Self {
            timeout_secs: config.skills.timeout_secs.max(1),
            executable: config.skills.executable.clone(),
        }
    }
}

/// Shared between the skills' reload listener and the runtime's reload.
pub(crate) type SharedExecSettings = Arc<std::sync::RwLock<ExecSettings>>;

/// Runs the verified executable skills as MCP servers through `mcp`, now
/// and after every reload (HTTP, SIGHUP or a configuration reload): new
/// skills start, removed or refused ones stop, changed ones (a new version,
/// files, signature or settings) restart. Each writes only to
/// `<home>/skills-state/<name>`. The settings returned are the ones the
/// syncs read.
pub(super) fn run_executables(
    skills: &Arc<Skills>,
    mcp: &hearth_mcp::McpManager,
    config: &Config,
    home: &Path,
) -> SharedExecSettings {
    let shared: SharedExecSettings = Arc::new(std::sync::RwLock::new(ExecSettings::of(config)));
    let settings = shared.clone();
    let state = home.join("skills-state");
    let servers = move |c: &Catalog| -> Vec<hearth_mcp::SkillServer> {
        let settings = settings
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        c.executables()
            .map(|e| {
                let own = settings
                    .executable
                    .get(&e.name)
                    .cloned()
                    .unwrap_or_default();
                hearth_mcp::SkillServer {
                    skill: e.clone(),
                    timeout_secs: settings.timeout_secs,
                    state_dir: state.join(&e.name),
                    read_tools: own.read_tools,
                    trust_annotations: own.trust_annotations,
                }
            })
            .collect()
    };
    let synced = mcp.sync_skills(servers(&skills.catalog()));
    if !synced.started.is_empty() {
        tracing::info!(skills = %synced.started.join(", "), "executable skills starting");
    }
    let mcp = mcp.clone();
    skills.on_reload(move |c| {
        let synced = mcp.sync_skills(servers(c));
        tracing::info!(started = %synced.started.join(", "), stopped = %synced.stopped.join(", "), "executable skills synced");
    });
    shared
}

/// The engine's prompt hook over `skills`.
pub(super) fn prompt_hook(skills: &Arc<Skills>) -> hearth_agent::context::PromptHook {
    let skills = skills.clone();
    Arc::new(move |text: &str| skills.prompt_for(text))
}
