//! `hearth skills ...` and the skills `serve` loads: options from `[skills]`
//! and this process (working folder, `PATH`, environment), reload on SIGHUP.
//!
//! `list`, `show` and `check` read the folders themselves, with the same
//! loader as the server, so they work without a running hearth.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use hearth_config::Config;
use hearth_skills::{
    Catalog, Host, PrivateKey, Root, Skill, Skills, SkillsOptions, Trust, manifest,
};
use serde_json::json;

use crate::Exit;
use crate::cli::{Global, SkillsCommand};
use crate::output::{print_json, table};

/// `path`, relative to the home when relative.
fn under_home(home: &Path, path: &str) -> PathBuf {
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { home.join(p) }
}

/// The load options for `config`, with this process's facts.
pub fn options(config: &Config, home: &Path) -> Result<SkillsOptions, Exit> {
    let c = &config.skills;
    let extra: Vec<PathBuf> = c.extra_dirs.iter().map(|d| under_home(home, d)).collect();
    let workspace = std::env::current_dir().ok();
    let user_home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let keys = SkillsOptions::trusted_keys(&c.trusted_keys)
        .map_err(|e| Exit::config(anyhow::anyhow!("skills.trusted_keys: {e}")))?;
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

/// The skills `serve` offers, loaded once; SIGHUP reloads them.
pub fn load(config: &Config, home: &Path) -> Result<Arc<Skills>, Exit> {
    let t0 = std::time::Instant::now();
    let skills = Arc::new(Skills::load(options(config, home)?));
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
    tokio::spawn(reload_on_sighup(skills.clone()));
    Ok(skills)
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

/// Runs the verified executable skills as MCP servers through `mcp`, now
/// and after every reload (HTTP or SIGHUP): new skills start, removed or
/// refused ones stop, changed ones (a new version, files or signature)
/// restart. Each writes only to `<home>/skills-state/<name>`.
pub fn run_executables(
    skills: &Arc<Skills>,
    mcp: &hearth_mcp::McpManager,
    config: &Config,
    home: &Path,
) {
    let timeout_secs = config.skills.timeout_secs.max(1);
    let settings = config.skills.executable.clone();
    let state = home.join("skills-state");
    let servers = move |c: &Catalog| -> Vec<hearth_mcp::SkillServer> {
        c.executables()
            .map(|e| {
                let own = settings.get(&e.name).cloned().unwrap_or_default();
                hearth_mcp::SkillServer {
                    skill: e.clone(),
                    timeout_secs,
                    state_dir: state.join(&e.name),
                    read_tools: own.read_tools,
                    trust_annotations: own.trust_annotations,
                }
            })
            .collect()
    };
    let synced = mcp.sync_skills(servers(&skills.catalog()));
    if !synced.started.is_empty() {
        tracing::info!(skills = ?synced.started, "executable skills starting");
    }
    let mcp = mcp.clone();
    skills.on_reload(move |c| {
        let synced = mcp.sync_skills(servers(c));
        tracing::info!(started = ?synced.started, stopped = ?synced.stopped, "executable skills synced");
    });
}

/// The engine's prompt hook over `skills`.
pub fn prompt_hook(skills: &Arc<Skills>) -> hearth_agent::context::PromptHook {
    let skills = skills.clone();
    Arc::new(move |text: &str| skills.prompt_for(text))
}

/// Runs `hearth skills ...`.
pub async fn run(g: &Global, command: SkillsCommand) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    let loaded = || options(&crate::serve::load_config(g, &home)?, &home);
    match command {
        SkillsCommand::Keygen { out } => keygen(&out.unwrap_or_else(|| home.join("keys"))),
        SkillsCommand::Sign { dir, key } => {
            let text = std::fs::read_to_string(&key)
                .with_context(|| format!("reading the key {}", key.display()))?;
            let key = PrivateKey::parse(&text).map_err(anyhow::Error::new)?;
            let key_id = manifest::sign(&dir, &key).map_err(anyhow::Error::new)?;
            println!("signed {} with key {key_id}", dir.display());
            Ok(())
        }
        SkillsCommand::Verify { dir } => verify(g, &dir, &loaded()?.trust),
        SkillsCommand::List => {
            list(g, &Catalog::load(&loaded()?));
            Ok(())
        }
        SkillsCommand::Show { name } => show(g, &Catalog::load(&loaded()?), &name),
        SkillsCommand::Check => check(g, &Catalog::load(&loaded()?)),
    }
}

fn keygen(out: &Path) -> Result<(), Exit> {
    let key = PrivateKey::generate().map_err(anyhow::Error::new)?;
    // Only the owner may list the keys, as with the home itself.
    let mut dir = std::fs::DirBuilder::new();
    dir.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut dir, 0o700);
    dir.create(out)
        .with_context(|| format!("creating {}", out.display()))?;
    let path = out.join(format!("{}.key", key.key_id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut file = opts
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::io::Write::write_all(&mut file, key.to_file_text().as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    eprintln!(
        "private key written to {} (keep it secret); add the public key below to \
         [skills] trusted_keys where the skills it signs should load:",
        path.display()
    );
    println!("{}", key.public());
    Ok(())
}

fn verify(g: &Global, dir: &Path, trust: &Trust) -> Result<(), Exit> {
    match manifest::verify(dir, trust) {
        Ok(v) => {
            if g.json {
                print_json(
                    &json!({"ok": true, "name": v.manifest.name, "version": v.manifest.version,
                    "signed": v.signed, "key_id": v.manifest.key_id}),
                );
            } else if v.signed {
                println!(
                    "ok: {} {} signed by trusted key {}",
                    v.manifest.name,
                    v.manifest.version,
                    v.manifest.key_id.as_deref().unwrap_or("")
                );
            } else {
                println!(
                    "ok: {} {} unsigned, allowed by [skills] allowed_unsigned_dirs",
                    v.manifest.name, v.manifest.version
                );
            }
            Ok(())
        }
        Err(e) => {
            if g.json {
                print_json(&json!({"ok": false, "reason": e.to_string()}));
            }
            Err(Exit::from(anyhow::anyhow!("refused: {e}")))
        }
    }
}

fn view(s: &Skill) -> serde_json::Value {
    json!({"name": s.name, "description": s.description, "path": s.path.display().to_string(),
        "source": s.source.as_str(), "eligible": s.eligible, "reason": s.reason, "signed": s.signed})
}

fn list(g: &Global, c: &Catalog) {
    if g.json {
        print_json(&json!({"skills": c.skills.iter().map(view).collect::<Vec<_>>()}));
        return;
    }
    if c.skills.is_empty() {
        println!("no skills found");
        return;
    }
    let rows: Vec<Vec<String>> = c
        .skills
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                if s.eligible {
                    "yes".into()
                } else {
                    "no".into()
                },
                s.source.as_str().into(),
                s.reason.clone().unwrap_or_else(|| s.description.clone()),
            ]
        })
        .collect();
    println!(
        "{}",
        table(
            &["NAME", "ELIGIBLE", "SOURCE", "DESCRIPTION / REASON"],
            &[],
            &rows
        )
    );
}

fn show(g: &Global, c: &Catalog, name: &str) -> Result<(), Exit> {
    let Some(s) = c.get(name) else {
        return Err(Exit::from(anyhow::anyhow!(
            "no skill named {name:?}; `hearth skills list` shows them"
        )));
    };
    let body = if s.has_md() { s.body().ok() } else { None };
    if g.json {
        let mut v = view(s);
        v["instructions"] = json!(body);
        print_json(&v);
        return Ok(());
    }
    println!("name:        {}", s.name);
    println!("description: {}", s.description);
    println!("path:        {}", s.path.display());
    println!("source:      {}", s.source.as_str());
    match &s.reason {
        None => println!("eligible:    yes"),
        Some(r) => println!("eligible:    no ({r})"),
    }
    if let Some(signed) = s.signed {
        println!("signed:      {}", if signed { "yes" } else { "no" });
    }
    if let Some(body) = body {
        println!("\n{body}");
    }
    Ok(())
}

/// One line per problem, naming the skill and the field; exit 1 when any
/// skill is invalid (not when it only lacks something on this machine).
fn check(g: &Global, c: &Catalog) -> Result<(), Exit> {
    let mut lines = Vec::new();
    for r in &c.refused {
        lines.push(format!("{}: {}", r.path.display(), r.reason));
    }
    for s in &c.skills {
        for p in &s.problems {
            lines.push(format!("{}: {}: {}", s.name, p.field, p.message));
        }
        if s.problems.is_empty()
            && s.signed == Some(false)
            && let Some(reason) = s.reason.as_deref().filter(|_| !s.eligible)
        {
            lines.push(format!("{}: hearth-skill.json: {reason}", s.name));
        }
    }
    let invalid = !lines.is_empty();
    if g.json {
        print_json(&json!({"ok": !invalid, "skills": c.skills.len(), "problems": lines}));
    } else {
        for l in &lines {
            println!("{l}");
        }
        for s in c
            .skills
            .iter()
            .filter(|s| !s.eligible && s.problems.is_empty() && s.signed.is_none())
        {
            println!(
                "{}: not eligible here: {}",
                s.name,
                s.reason.as_deref().unwrap_or("")
            );
        }
    }
    if invalid {
        return Err(Exit::from(anyhow::anyhow!(
            "{} problem(s) in {} skill(s) checked",
            lines.len(),
            c.skills.len()
        )));
    }
    if !g.json {
        println!("{} skill(s) checked, no problem", c.skills.len());
    }
    Ok(())
}
