//! `hearth doctor`: every check `serve` makes before it listens, run first
//! and in the same words (the config, the bind address, the database (on
//! PostgreSQL: reachable, schema version, clock, replicas alive), the store and its
//! migrations, the sealed secrets, the keys and tokens, the runtime's whole
//! assembly), then what `serve` would start with but not work: each
//! provider answers with its key and has each configured model, each
//! channel's tokens are accepted, MCP servers start and list tools, skills
//! verify, jobs post to threads whose channel is enabled. Last, when a
//! server runs on the home, when it loaded the config in force and whether
//! hearth.toml changed since (`in_force`).
//!
//! Each check is `ok`, `warn` (serve starts, but this part will not work
//! until fixed) or `fail` (serve refuses to start). The exit status is 0
//! when all are ok, 1 with warnings only, 2 when something fails.
//! `--json` prints `{"checks":[{"name","status","message","fix"}]}`.

mod database;
mod in_force;
pub mod providers;
mod runtime;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::Exit;
use crate::cli::Global;

/// How long one network check may take, connecting included: doctor must
/// never hang on a server that does not answer.
const TIMEOUT: Duration = Duration::from_secs(5);

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// `serve` starts, but this part will not work until fixed.
    Warn,
    /// `serve` refuses to start.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked, e.g. `provider openai`.
    pub name: String,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub message: String,
    /// What to do, when something is wrong and there is more to say than
    /// the message does.
    pub fix: Option<String>,
}

/// The checks made so far.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// In the order made.
    pub checks: Vec<Check>,
}

impl Report {
    fn push(&mut self, name: impl Into<String>, status: Status, message: impl Into<String>) {
        self.checks.push(Check {
            name: name.into(),
            status,
            message: message.into(),
            fix: None,
        });
    }

    fn ok(&mut self, name: impl Into<String>, message: impl Into<String>) {
        self.push(name, Status::Ok, message);
    }

    /// A check that found a problem, with what to do about it.
    fn bad(
        &mut self,
        name: impl Into<String>,
        status: Status,
        message: impl Into<String>,
        fix: Option<String>,
    ) {
        self.checks.push(Check {
            name: name.into(),
            status,
            message: message.into(),
            fix,
        });
    }

    /// Ok with `Ok`'s message, else `status` with `Err`'s message (which
    /// says what to do).
    fn result(&mut self, name: impl Into<String>, status: Status, r: Result<String, String>) {
        match r {
            Ok(m) => self.ok(name, m),
            Err(m) => self.bad(name, status, m, None),
        }
    }

    /// The worst status found.
    pub fn worst(&self) -> Status {
        self.checks
            .iter()
            .map(|c| c.status)
            .max()
            .unwrap_or(Status::Ok)
    }

    /// How many checks came out `status`.
    fn count(&self, status: Status) -> usize {
        self.checks.iter().filter(|c| c.status == status).count()
    }
}

/// Runs every check, prints the report, and exits with its status.
pub async fn run(g: &Global) -> Result<(), Exit> {
    let report = checks(g).await?;
    print(g, &report);
    outcome(&report)
}

/// Prints the report: lines for people, or JSON with `--json`.
pub fn print(g: &Global, report: &Report) {
    if g.json {
        crate::output::print_json(report);
    } else {
        print_text(report);
    }
}

/// The exit of a report: 0 all ok, 1 warnings only, 2 a failure.
pub fn outcome(report: &Report) -> Result<(), Exit> {
    let plural = |n: usize| if n == 1 { "" } else { "s" };
    match report.worst() {
        Status::Ok => Ok(()),
        Status::Warn => {
            let n = report.count(Status::Warn);
            Err(anyhow::anyhow!(
                "{n} warning{}: hearth serves, but what is marked WARN will not work until fixed",
                plural(n)
            )
            .into())
        }
        Status::Fail => {
            let n = report.count(Status::Fail);
            Err(Exit::config(anyhow::anyhow!(
                "{n} check{} failed: `hearth serve` would refuse to start",
                plural(n)
            )))
        }
    }
}

fn print_text(report: &Report) {
    for c in &report.checks {
        let tag = match c.status {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        };
        println!("{tag}  {}: {}", c.name, c.message);
        if let Some(fix) = &c.fix {
            println!("      fix: {fix}");
        }
    }
}

/// Makes every check; stops early only where nothing after could be
/// checked (no config, no store).
pub async fn checks(g: &Global) -> Result<Report, Exit> {
    let mut report = Report::default();
    let home = crate::serve::home_dir(g)?;
    let path = g.config.clone().unwrap_or_else(|| home.join("hearth.toml"));
    let config = match crate::serve::load_config(g, &home) {
        Ok(c) => {
            report.ok("config", format!("{} is valid", path.display()));
            c
        }
        Err(e) => {
            report.bad(
                "config",
                Status::Fail,
                format!("{:#}", e.error),
                Some(
                    "edit the file (the message names the key), then run `hearth doctor` again"
                        .into(),
                ),
            );
            return Ok(report);
        }
    };
    // A home that does not exist yet is made by serve: its store is then
    // checked on a scratch one, so the start-up checks still run.
    let scratch = if home.exists() {
        report.result("home", Status::Warn, home_permissions(&home));
        None
    } else {
        report.ok(
            "home",
            format!(
                "{} does not exist yet: `hearth serve` (or `hearth init`) creates it with mode 700",
                home.display()
            ),
        );
        Some(Scratch::new()?)
    };
    let store_home = scratch.as_ref().map_or(home.as_path(), |s| s.0.as_path());
    let bind = std::env::var("HEARTH_BIND")
        .ok()
        .filter(|b| !b.is_empty())
        .unwrap_or_else(|| config.server.bind.clone());
    let addr = match crate::serve::bind_addr(&bind) {
        Ok(a) => {
            report.ok("bind", format!("serve listens on {a}"));
            Some(a)
        }
        Err(e) => {
            report.bad("bind", Status::Fail, format!("{:#}", e.error), None);
            None
        }
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    env_vars(&mut report, &config, &env);
    database::check(&mut report, &home, &config, &env).await;
    let store = match crate::serve::open_store(store_home, &config).await {
        Ok(s) => match s.ping().await {
            Ok(()) => {
                report.ok(
                    "store",
                    if scratch.is_some() {
                        "not created yet; a new one opens and migrates"
                    } else {
                        "opened; its migrations are current"
                    },
                );
                Some(s)
            }
            Err(e) => {
                report.bad(
                    "store",
                    Status::Fail,
                    e.to_string(),
                    Some(
                        "is the disk full or the file damaged? restore hearth.db from a backup, \
                         or use the hearth that wrote it"
                            .into(),
                    ),
                );
                None
            }
        },
        Err(e) => {
            report.bad("store", Status::Fail, format!("{:#}", e.error), None);
            None
        }
    };
    let client = hearth_http::client_builder()
        .connect_timeout(TIMEOUT)
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let sealed = match &store {
        Some(store) => {
            match hearth_runtime::builder::open_secrets(&config, &env, store.as_ref()).await {
                Ok(s) => {
                    if !s.is_empty() {
                        report.ok("secrets", format!("{} sealed secret(s) opened", s.len()));
                    }
                    s
                }
                Err(e) => {
                    report.bad("secrets", Status::Fail, e.to_string(), None);
                    BTreeMap::new()
                }
            }
        }
        None => BTreeMap::new(),
    };
    providers::check(&mut report, &config, &env, &sealed, &client).await;
    let sources = hearth_channels::secrets::TokenSources {
        env: env.clone(),
        sealed: sealed
            .iter()
            .map(|(k, v)| (k.clone(), v.expose().to_owned()))
            .collect(),
    };
    drop(sealed);
    channels(&mut report, &config, &sources, &client).await;
    let mut file_view = None;
    if let Some(store) = &store {
        jobs(&mut report, &config, store.as_ref()).await;
        if let Some(addr) = addr {
            file_view = runtime::check(&mut report, &home, &config, store.clone(), addr).await;
        }
    }
    drop(store);
    drop(scratch);
    let running = in_force::Running {
        home: &home,
        file: &path,
        bind: addr,
    };
    in_force::check(&mut report, g, &running, file_view.as_ref()).await;
    Ok(report)
}

/// A private directory removed when dropped: the store of a home not
/// created yet.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new() -> Result<Self, Exit> {
        use std::os::unix::fs::DirBuilderExt;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("hearth-doctor-{}-{nanos}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn home_permissions(home: &Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(home).map_err(|e| format!("cannot read {}: {e}", home.display()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "{} has mode {mode:o}: other users can read keys and history; run chmod 700 {}",
            home.display(),
            home.display()
        ));
    }
    Ok(format!("{} is private (mode {mode:o})", home.display()))
}

/// A variable the config names, and whether `serve` refuses to start
/// without it.
struct Needed {
    var: String,
    what: String,
    status_if_missing: Status,
}

/// Every environment variable the config names for a key, token or secret
/// is set and not empty (values are never shown).
fn env_vars(report: &mut Report, config: &hearth_config::Config, env: &BTreeMap<String, String>) {
    let mut needed: Vec<Needed> = Vec::new();
    let mut need = |var: &Option<String>, what: String, status: Status| {
        if let Some(var) = var {
            needed.push(Needed {
                var: var.clone(),
                what,
                status_if_missing: status,
            });
        }
    };
    for (name, pc) in &config.llm.providers {
        // The catalog refuses a provider whose key variable is unset.
        need(
            &pc.api_key_env,
            format!("api_key_env of provider {name}"),
            Status::Fail,
        );
    }
    let ch = &config.channels;
    let token = |optional: bool| if optional { Status::Warn } else { Status::Fail };
    if ch.telegram.enabled {
        if ch.telegram.token_secret.is_none() {
            need(
                &ch.telegram.token_env,
                "the Telegram bot token".into(),
                token(ch.telegram.optional),
            );
        }
        if ch.telegram.mode == hearth_config::TelegramMode::Webhook {
            need(
                &ch.telegram.webhook_secret_env,
                "the Telegram webhook secret".into(),
                Status::Warn,
            );
        }
    }
    if ch.discord.enabled && ch.discord.token_secret.is_none() {
        need(
            &ch.discord.token_env,
            "the Discord bot token".into(),
            token(ch.discord.optional),
        );
    }
    if ch.slack.enabled {
        if ch.slack.bot_token_secret.is_none() {
            need(
                &ch.slack.bot_token_env,
                "the Slack bot token".into(),
                token(ch.slack.optional),
            );
        }
        match ch.slack.mode {
            hearth_config::SlackMode::Socket if ch.slack.app_token_secret.is_none() => need(
                &ch.slack.app_token_env,
                "the Slack app-level token".into(),
                token(ch.slack.optional),
            ),
            hearth_config::SlackMode::Http => need(
                &ch.slack.signing_secret_env,
                "the Slack signing secret".into(),
                Status::Warn,
            ),
            hearth_config::SlackMode::Socket => {}
        }
    }
    need(
        &config.alerts.webhook_secret_env,
        "the alerts' webhook signing secret".into(),
        Status::Warn,
    );
    let mut seen = std::collections::BTreeSet::new();
    for n in needed {
        if !seen.insert(n.var.clone()) {
            continue;
        }
        let name = format!("env {}", n.var);
        match env.get(&n.var) {
            Some(v) if !v.trim().is_empty() => report.ok(name, format!("set ({})", n.what)),
            Some(_) => report.bad(
                name,
                n.status_if_missing,
                format!("{} is empty ({})", n.var, n.what),
                Some(format!("export {}=<the value>", n.var)),
            ),
            None => report.bad(
                name,
                n.status_if_missing,
                format!("{} is not set ({})", n.var, n.what),
                Some(format!("export {}=<the value>", n.var)),
            ),
        }
    }
}

/// Each enabled channel: its tokens present (a missing one fails as `serve`
/// refuses, unless the channel is optional) and accepted by the platform;
/// its webhook URL well-formed.
async fn channels(
    report: &mut Report,
    config: &hearth_config::Config,
    sources: &hearth_channels::secrets::TokenSources,
    client: &reqwest::Client,
) {
    let missing = hearth_channels::required::missing_tokens(&config.channels, sources);
    for m in &missing {
        if m.optional {
            report.bad(
                format!("channel {}", m.channel),
                Status::Warn,
                m.degraded(),
                Some("set the token, or remove optional = true once you need the channel".into()),
            );
        } else {
            report.bad(
                format!("channel {}", m.channel),
                Status::Fail,
                m.refusal(),
                None,
            );
        }
    }
    let checked = hearth_channels::doctor::check_tokens(&config.channels, sources, client).await;
    for (name, r) in checked {
        // A missing token was reported above, as serve would refuse it.
        let channel = name.split(' ').next().unwrap_or(name);
        if r.is_err() && missing.iter().any(|m| m.channel == channel) {
            continue;
        }
        report.result(format!("channel {name}"), Status::Warn, r);
    }
    let t = &config.channels.telegram;
    if t.enabled && t.mode == hearth_config::TelegramMode::Webhook {
        match &t.webhook_url {
            Some(url) => report.result("webhook telegram", Status::Warn, webhook_url(url)),
            None => report.bad(
                "webhook telegram",
                Status::Warn,
                "webhook mode without webhook_url: hearth does not call setWebhook, so Telegram \
                 posts only if you registered the URL yourself",
                Some(
                    "set [channels.telegram] webhook_url to the public https:// URL of \
                     /channels/telegram/webhook"
                        .into(),
                ),
            ),
        }
    }
}

/// A public URL a platform posts to: https, with a host.
fn webhook_url(url: &str) -> Result<String, String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| format!("webhook_url {url:?} is not a URL ({e})"))?;
    if parsed.scheme() != "https" {
        return Err(format!(
            "webhook_url {url:?} is not https://: Telegram only posts to HTTPS URLs"
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("webhook_url {url:?} has no host"));
    }
    Ok(format!("{url} is a well-formed https:// URL"))
}

/// Each enabled job posts to a thread whose channel is enabled (a job kept
/// while the config disabled its channel would fire into nothing).
async fn jobs(
    report: &mut Report,
    config: &hearth_config::Config,
    store: &dyn hearth_store::Store,
) {
    let jobs = match store.list_jobs().await {
        Ok(j) => j,
        Err(e) => {
            report.bad("jobs", Status::Warn, format!("cannot list jobs: {e}"), None);
            return;
        }
    };
    let ch = &config.channels;
    let enabled = |c: &str| match c {
        "telegram" => ch.telegram.enabled,
        "discord" => ch.discord.enabled,
        "slack" => ch.slack.enabled,
        "sms" => ch.sms.enabled,
        _ => true,
    };
    let mut stranded = 0;
    for job in jobs.iter().filter(|j| j.enabled) {
        if let Some(channel) = hearth_runtime::thread_channel(&job.thread_key)
            && !enabled(channel)
        {
            stranded += 1;
            report.bad(
                format!("job {}", job.id),
                Status::Warn,
                format!(
                    "{:?}: {}",
                    job.name,
                    hearth_runtime::disabled_channel(&job.thread_key, channel)
                ),
                Some(format!(
                    "enable the channel, or delete the job: `hearth jobs rm {}`",
                    job.id
                )),
            );
        }
    }
    if stranded == 0 && !jobs.is_empty() {
        report.ok(
            "jobs",
            format!(
                "{} job(s), each on a thread whose channel is enabled",
                jobs.len()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_urls_must_be_https_with_a_host() {
        assert!(webhook_url("https://bot.example.org/channels/telegram/webhook").is_ok());
        for bad in ["http://bot.example.org/x", "bot.example.org", "https://"] {
            assert!(webhook_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_worst_status_decides_the_exit() {
        let mut r = Report::default();
        assert!(outcome(&r).is_ok());
        r.ok("a", "fine");
        assert!(outcome(&r).is_ok());
        r.bad("b", Status::Warn, "meh", None);
        assert_eq!(outcome(&r).unwrap_err().code, 1);
        r.bad("c", Status::Fail, "no", None);
        assert_eq!(outcome(&r).unwrap_err().code, 2);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["checks"][1]["status"], "warn");
        assert_eq!(json["checks"][0]["fix"], serde_json::Value::Null);
    }
}
