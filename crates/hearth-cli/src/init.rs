//! `hearth init`: writes a first, minimal `hearth.toml` (a provider, its
//! model, optionally a chat channel), runs `hearth doctor` on it, exits with
//! doctor's status and prints the next command.
//!
//! Asks when stdin is a terminal (plain prompts; every question has a
//! default), takes flags otherwise. Keys already in the environment
//! (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, `GEMINI_API_KEY`) and a local
//! Ollama (its `/api/tags` on 127.0.0.1:11434) are detected; the chosen
//! server's own model list is offered to pick from. Only the *names* of
//! the variables holding keys and tokens are written, never a value. An
//! existing file is kept unless `--force` (then the old one is saved as
//! `hearth.toml.bak`); a file of comments only (such as the one `serve` seeds
//! a new home with) holds no setting and is replaced (saved as the `.bak`
//! unless it is that seeded file unchanged).

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::Exit;
use crate::cli::Global;
use crate::doctor::providers::{Listed, list_models};

/// How long the Ollama probe and the model list may take.
const PROBE: Duration = Duration::from_millis(1500);

/// `hearth init` flags.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The provider (default: the first found: a key in the environment,
    /// then a local Ollama).
    #[arg(long, value_enum)]
    pub provider: Option<ProviderArg>,
    /// The server's base URL (openai-compat: required; ollama: default
    /// http://127.0.0.1:11434/v1).
    #[arg(long)]
    pub base_url: Option<String>,
    /// The model (default: the provider's usual one, or the first the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// The environment variable holding the API key (its name, not the key).
    #[arg(long)]
    pub key_env: Option<String>,
    /// A chat channel to enable.
    #[arg(long, value_enum)]
    pub channel: Option<ChannelArg>,
    /// The environment variable holding the channel's bot token (its name).
    #[arg(long)]
    pub token_env: Option<String>,
    /// Ask nothing: take the flags and what was detected.
    #[arg(long)]
    pub yes: bool,
    /// Replace an existing hearth.toml (the old one is kept as hearth.toml.bak).
    #[arg(long)]
    pub force: bool,
    /// Where to look for a local Ollama (tests point it elsewhere).
    #[arg(
        long,
        env = "HEARTH_OLLAMA_URL",
        default_value = "http://127.0.0.1:11434",
        hide = true
    )]
    pub ollama_url: String,
    /// Ask the questions even when stdin is not a terminal (tests).
    #[arg(long, hide = true)]
    pub ask: bool,
}

/// `--provider`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderArg {
    /// OpenAI (Responses API).
    Openai,
    /// Anthropic.
    Anthropic,
    /// Google Gemini.
    Gemini,
    /// A local Ollama (OpenAI-compatible).
    Ollama,
    /// Any OpenAI-compatible server (LM Studio, vLLM, llama.cpp, OpenRouter, ...).
    OpenaiCompat,
}

impl ProviderArg {
    const ALL: [Self; 5] = [
        Self::Anthropic,
        Self::Openai,
        Self::Gemini,
        Self::Ollama,
        Self::OpenaiCompat,
    ];

    /// The name of its `[llm.providers.<name>]` section.
    fn section(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Ollama => "ollama",
            Self::OpenaiCompat => "compat",
        }
    }

    /// Its `type` in hearth.toml.
    fn kind(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Ollama | Self::OpenaiCompat => "openai_compat",
        }
    }

    /// The variable its key is usually in.
    fn key_env(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("OPENAI_API_KEY"),
            Self::Anthropic => Some("ANTHROPIC_API_KEY"),
            Self::Gemini => Some("GEMINI_API_KEY"),
            Self::Ollama | Self::OpenaiCompat => None,
        }
    }

    /// The model picked when the list offers no better choice.
    fn usual_model(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("gpt-4.1-mini"),
            Self::Anthropic => Some("claude-sonnet-4-5"),
            Self::Gemini => Some("gemini-flash-latest"),
            Self::Ollama | Self::OpenaiCompat => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::Ollama => "ollama",
            Self::OpenaiCompat => "openai-compat",
        }
    }
}

/// `--channel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ChannelArg {
    /// A Telegram bot (long polling: no public URL needed).
    Telegram,
    /// A Discord bot.
    Discord,
    /// A Slack app in Socket Mode.
    Slack,
}

impl ChannelArg {
    fn name(self) -> &'static str {
        match self {
            Self::Telegram => "telegram",
            Self::Discord => "discord",
            Self::Slack => "slack",
        }
    }

    fn token_env(self) -> &'static str {
        match self {
            Self::Telegram => "TELEGRAM_BOT_TOKEN",
            Self::Discord => "DISCORD_BOT_TOKEN",
            Self::Slack => "SLACK_BOT_TOKEN",
        }
    }
}

/// What goes into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Choice {
    provider: ProviderArg,
    base_url: Option<String>,
    key_env: Option<String>,
    model: String,
    channel: Option<(ChannelArg, String)>,
}

/// Runs `hearth init`.
pub async fn run(g: &Global, args: InitArgs) -> Result<(), Exit> {
    let home = crate::serve::home_dir(g)?;
    hearth_config::prepare_home(&home).map_err(Exit::config)?;
    let path = g.config.clone().unwrap_or_else(|| home.join("hearth.toml"));
    let existing = std::fs::read_to_string(&path).ok();
    // Only comments (the file serve seeds a new home with): nothing to keep.
    let configured = existing.as_deref().is_some_and(has_settings);
    if configured && !args.force {
        println!(
            "{} exists and is kept (pass --force to replace it; the old one is then saved as \
             hearth.toml.bak). Checking it:",
            path.display()
        );
        return finish(g, None).await;
    }
    let interactive = !args.yes && (args.ask || std::io::stdin().is_terminal());
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let mut prompt = Prompt::new(interactive);
    let choice = choose(&args, &env, &mut prompt).await?;
    let text = render(&choice);
    // What is written must load: the same loader serve uses.
    hearth_config::load_str(&text, &path.display().to_string(), Vec::new()).map_err(|e| {
        Exit::config(anyhow::anyhow!(
            "the config init would write is refused: {e}"
        ))
    })?;
    let seeded = existing.as_deref() == Some(hearth_config::home::DEFAULT_CONFIG);
    if existing.is_some() && !seeded {
        let bak = path.with_file_name("hearth.toml.bak");
        std::fs::copy(&path, &bak).map_err(|e| {
            anyhow::anyhow!("cannot save {} as {}: {e}", path.display(), bak.display())
        })?;
        println!("saved the old {} as {}", path.display(), bak.display());
    }
    write_private(&path, &text)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    println!("wrote {}", path.display());
    finish(g, Some(&choice)).await
}

/// True when `text` sets something (a line that is not blank or a comment).
fn has_settings(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with('#')
    })
}

/// Runs doctor, prints the next command, and exits with doctor's status.
async fn finish(g: &Global, choice: Option<&Choice>) -> Result<(), Exit> {
    println!();
    let report = crate::doctor::checks(g).await?;
    crate::doctor::print(g, &report);
    let outcome = crate::doctor::outcome(&report);
    println!();
    if report.worst() == crate::doctor::Status::Fail {
        println!("Next: fix what is marked FAIL above, then run `hearth doctor` again.");
    } else {
        let mut exports = Vec::new();
        if let Some(c) = choice {
            exports.extend(c.key_env.iter().cloned());
            exports.extend(c.channel.iter().map(|(_, v)| v.clone()));
        }
        let unset: Vec<String> = exports
            .into_iter()
            .filter(|v| std::env::var(v).map_or(true, |x| x.trim().is_empty()))
            .collect();
        for v in &unset {
            println!("Next: export {v}=<the value>");
        }
        println!("Next: hearth serve   (then, in another terminal: hearth message \"hello\")");
    }
    outcome
}

/// Writes `text` to `path` readable by its owner only (it names where keys are).
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)?.write_all(text.as_bytes())
}

/// Questions on stdin/stdout, or the defaults when not interactive.
struct Prompt {
    interactive: bool,
}

impl Prompt {
    fn new(interactive: bool) -> Self {
        Self { interactive }
    }

    /// The answer to `question`, `default` when empty (or not asking).
    fn ask(&mut self, question: &str, default: &str) -> Result<String, Exit> {
        if !self.interactive {
            return Ok(default.to_owned());
        }
        if default.is_empty() {
            print!("{question}: ");
        } else {
            print!("{question} [{default}]: ");
        }
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        let n = tokio::task::block_in_place(|| std::io::stdin().lock().read_line(&mut line))
            .map_err(|e| anyhow::anyhow!("cannot read the answer: {e}"))?;
        if n == 0 {
            return Err(Exit::config(anyhow::anyhow!(
                "stdin closed before \"{question}\" was answered; pass --yes with flags instead"
            )));
        }
        let answer = line.trim();
        Ok(if answer.is_empty() { default } else { answer }.to_owned())
    }

    fn say(&self, text: &str) {
        if self.interactive {
            println!("{text}");
        }
    }
}

/// What is found on this machine: keys in the environment, a local Ollama.
fn detected(env: &BTreeMap<String, String>, ollama: bool) -> Vec<ProviderArg> {
    let mut out: Vec<ProviderArg> = ProviderArg::ALL
        .into_iter()
        .filter(|p| {
            p.key_env()
                .is_some_and(|k| env.get(k).is_some_and(|v| !v.trim().is_empty()))
        })
        .collect();
    if ollama {
        out.push(ProviderArg::Ollama);
    }
    out
}

/// True when an Ollama answers `GET {url}/api/tags`.
async fn ollama_answers(client: &reqwest::Client, url: &str) -> bool {
    let url = format!("{}/api/tags", url.trim_end_matches('/'));
    match client.get(url).timeout(PROBE).send().await {
        Ok(r) => r.status().is_success(),
        Err(_) => false,
    }
}

async fn choose(
    args: &InitArgs,
    env: &BTreeMap<String, String>,
    prompt: &mut Prompt,
) -> Result<Choice, Exit> {
    let client = hearth_http::client_builder()
        .connect_timeout(PROBE)
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let ollama = args.provider.is_none() || args.provider == Some(ProviderArg::Ollama);
    let ollama = ollama && ollama_answers(&client, &args.ollama_url).await;
    let found = detected(env, ollama);
    let provider = match args.provider {
        Some(p) => p,
        None if prompt.interactive => {
            prompt.say("Providers (found on this machine: marked *):");
            for (i, p) in ProviderArg::ALL.iter().enumerate() {
                let mark = if found.contains(p) { "*" } else { " " };
                prompt.say(&format!("  {}{mark} {}", i + 1, p.label()));
            }
            let default = found.first().copied().unwrap_or(ProviderArg::Anthropic);
            let answer = prompt.ask("Provider (number or name)", default.label())?;
            parse_provider(&answer)?
        }
        None => *found.first().ok_or_else(|| {
            Exit::config(anyhow::anyhow!(
                "no provider found: no ANTHROPIC_API_KEY, OPENAI_API_KEY or GEMINI_API_KEY in the \
                 environment and no Ollama at {}; pass --provider (and --base-url, --model for \
                 openai-compat)",
                args.ollama_url
            ))
        })?,
    };
    let base_url = match (provider, &args.base_url) {
        (_, Some(u)) => Some(u.clone()),
        (ProviderArg::Ollama, None) => Some(prompt.ask(
            "Ollama's OpenAI-compatible URL",
            &format!("{}/v1", args.ollama_url.trim_end_matches('/')),
        )?),
        (ProviderArg::OpenaiCompat, None) => {
            let u = prompt.ask("The server's base URL (e.g. http://127.0.0.1:8080/v1)", "")?;
            if u.is_empty() {
                return Err(Exit::config(anyhow::anyhow!(
                    "openai-compat needs the server's base URL: pass --base-url"
                )));
            }
            Some(u)
        }
        (_, None) => None,
    };
    if let Some(u) = &base_url
        && !(u.starts_with("http://") || u.starts_with("https://"))
    {
        return Err(Exit::config(anyhow::anyhow!(
            "--base-url {u:?} is not an http:// or https:// URL"
        )));
    }
    let key_env = match (&args.key_env, provider.key_env()) {
        (Some(k), _) => Some(k.clone()),
        (None, Some(k)) => Some(prompt.ask("Environment variable holding the API key", k)?),
        (None, None) if provider == ProviderArg::OpenaiCompat && prompt.interactive => {
            let k = prompt.ask(
                "Environment variable holding the API key (empty: the server needs none)",
                "",
            )?;
            (!k.is_empty()).then_some(k)
        }
        (None, None) => None,
    };
    if let Some(k) = &key_env {
        hearth_config::check::env_var_name(k).map_err(|e| {
            Exit::config(anyhow::anyhow!(
                "--key-env: {}",
                e.replace("api_key_env", "--key-env")
            ))
        })?;
        if env.get(k).is_none_or(|v| v.trim().is_empty()) {
            prompt.say(&format!(
                "{k} is not set in this shell: export it before `hearth serve`."
            ));
        }
    }
    let model = pick_model(args, provider, &base_url, &key_env, env, &client, prompt).await?;
    let channel = match args.channel {
        Some(c) => Some(c),
        None if prompt.interactive => {
            let a = prompt.ask("Chat channel (none, telegram, discord, slack)", "none")?;
            match a.as_str() {
                "none" | "" => None,
                other => Some(ChannelArg::from_str(other, true).map_err(|_| {
                    Exit::config(anyhow::anyhow!(
                        "{other:?} is not a channel: none, telegram, discord or slack"
                    ))
                })?),
            }
        }
        None => None,
    };
    let channel = match channel {
        Some(c) => {
            let var = match &args.token_env {
                Some(v) => v.clone(),
                None => prompt.ask(
                    "Environment variable holding the bot token (its name, not the token)",
                    c.token_env(),
                )?,
            };
            hearth_config::check::env_var_name(&var).map_err(|e| {
                Exit::config(anyhow::anyhow!(
                    "--token-env: {}",
                    e.replace("api_key_env", "--token-env")
                ))
            })?;
            Some((c, var))
        }
        None => None,
    };
    Ok(Choice {
        provider,
        base_url,
        key_env,
        model,
        channel,
    })
}

fn parse_provider(answer: &str) -> Result<ProviderArg, Exit> {
    if let Ok(n) = answer.parse::<usize>()
        && let Some(p) = n.checked_sub(1).and_then(|i| ProviderArg::ALL.get(i))
    {
        return Ok(*p);
    }
    ProviderArg::from_str(answer, true).map_err(|_| {
        Exit::config(anyhow::anyhow!(
            "{answer:?} is not a provider: openai, anthropic, gemini, ollama or openai-compat"
        ))
    })
}

/// The model: `--model`, else one from the server's own list (asked, or the
/// usual one when listed, else the first), else the usual one.
async fn pick_model(
    args: &InitArgs,
    provider: ProviderArg,
    base_url: &Option<String>,
    key_env: &Option<String>,
    env: &BTreeMap<String, String>,
    client: &reqwest::Client,
    prompt: &mut Prompt,
) -> Result<String, Exit> {
    if let Some(m) = &args.model {
        return Ok(m.clone());
    }
    // The provider as it will be written, without a model yet.
    let draft = Choice {
        provider,
        base_url: base_url.clone(),
        key_env: key_env.clone(),
        model: String::new(),
        channel: None,
    };
    let listed = match hearth_config::load_str(&render(&draft), "hearth init", Vec::new()) {
        Ok(c) => match c.llm.providers.get(provider.section()) {
            Some(pc) => {
                let key = key_env.as_ref().and_then(|k| env.get(k)).map(|k| k.trim());
                match list_models(client, provider.section(), pc, key).await {
                    Ok(Listed::Models(_, models)) => Ok(models),
                    Ok(_) => Err("it has no model list".to_owned()),
                    Err(e) => Err(e.message),
                }
            }
            None => Err("no provider".to_owned()),
        },
        Err(e) => Err(e.to_string()),
    };
    let models = match listed {
        Ok(m) if !m.is_empty() => m,
        other => {
            let why = match other {
                Err(e) => e,
                Ok(_) => "it lists no model".to_owned(),
            };
            return match provider.usual_model() {
                Some(m) => {
                    prompt.say(&format!("Could not list the models ({why})."));
                    prompt.ask("Model", m)
                }
                None if prompt.interactive => {
                    prompt.say(&format!("Could not list the models ({why})."));
                    let m = prompt.ask("Model", "")?;
                    if m.is_empty() {
                        Err(Exit::config(anyhow::anyhow!(
                            "a model is needed: pass --model"
                        )))
                    } else {
                        Ok(m)
                    }
                }
                None => Err(Exit::config(anyhow::anyhow!(
                    "cannot list the server's models ({why}): pass --model"
                ))),
            };
        }
    };
    let models: Vec<String> = models
        .into_iter()
        .map(|m| m.strip_prefix("models/").map(str::to_owned).unwrap_or(m))
        .collect();
    let default = provider
        .usual_model()
        .filter(|u| models.iter().any(|m| m == u))
        .map(str::to_owned)
        .unwrap_or_else(|| models[0].clone());
    prompt.say("Models the server offers:");
    for (i, m) in models.iter().take(30).enumerate() {
        prompt.say(&format!("  {} {m}", i + 1));
    }
    if models.len() > 30 {
        prompt.say(&format!(
            "  ... and {} more (type a name)",
            models.len() - 30
        ));
    }
    let answer = prompt.ask("Model (number or name)", &default)?;
    Ok(match answer.parse::<usize>() {
        Ok(n) if n >= 1 && n <= models.len() => models[n - 1].clone(),
        _ => answer,
    })
}

/// A TOML basic string (JSON's escapes are TOML's).
fn quoted(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The file: only what was chosen; every other key keeps its default.
fn render(c: &Choice) -> String {
    let name = c.provider.section();
    let mut t = String::from(
        "# Written by `hearth init`. Every other setting has its default: `hearth config\n\
         # show` prints them all, the README's \"Configure a real provider\" explains the\n\
         # main ones. Keys and tokens are never written here, only the names of the\n\
         # environment variables that hold them.\n\n",
    );
    if !c.model.is_empty() {
        t.push_str(&format!(
            "[llm]\ndefault_model = {}\n\n",
            quoted(&format!("{name}/{}", c.model))
        ));
    }
    t.push_str(&format!(
        "[llm.providers.{name}]\ntype = {}\n",
        quoted(c.provider.kind())
    ));
    if let Some(u) = &c.base_url {
        t.push_str(&format!("base_url = {}\n", quoted(u)));
    }
    if let Some(k) = &c.key_env {
        t.push_str(&format!("api_key_env = {}\n", quoted(k)));
    }
    if !c.model.is_empty() {
        t.push_str(&format!("models = [{}]\n", quoted(&c.model)));
    }
    if let Some((ch, var)) = &c.channel {
        let key = if *ch == ChannelArg::Slack {
            "bot_token_env"
        } else {
            "token_env"
        };
        t.push_str(&format!(
            "\n[channels.{}]\nenabled = true\n{key} = {}\n",
            ch.name(),
            quoted(var)
        ));
        if *ch == ChannelArg::Slack {
            t.push_str("# Socket Mode also needs the app-level token (xapp-...).\napp_token_env = \"SLACK_APP_TOKEN\"\n");
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_choice_renders_a_file_the_loader_accepts() {
        for provider in ProviderArg::ALL {
            for channel in [
                None,
                Some((ChannelArg::Telegram, "TG".to_owned())),
                Some((ChannelArg::Slack, "SLACK_BOT_TOKEN".to_owned())),
            ] {
                let c = Choice {
                    provider,
                    base_url: matches!(provider, ProviderArg::Ollama | ProviderArg::OpenaiCompat)
                        .then(|| "http://127.0.0.1:11434/v1".to_owned()),
                    key_env: provider.key_env().map(str::to_owned),
                    model: "m \"quoted\"".into(),
                    channel,
                };
                let text = render(&c);
                let config = hearth_config::load_str(&text, "t", Vec::new())
                    .unwrap_or_else(|e| panic!("{e}\n{text}"));
                assert_eq!(
                    config.llm.default_model.as_deref(),
                    Some(format!("{}/m \"quoted\"", provider.section()).as_str())
                );
            }
        }
    }

    #[test]
    fn only_a_file_with_settings_is_kept() {
        assert!(!has_settings(hearth_config::home::DEFAULT_CONFIG));
        assert!(!has_settings("# a note\n\n   # another\n"));
        assert!(has_settings("# a note\n[llm]\n"));
    }

    #[test]
    fn providers_are_found_by_their_keys_and_ollama() {
        let mut env = BTreeMap::new();
        assert!(detected(&env, false).is_empty());
        env.insert("OPENAI_API_KEY".to_owned(), "sk-1".to_owned());
        env.insert("GEMINI_API_KEY".to_owned(), " ".to_owned());
        assert_eq!(
            detected(&env, true),
            [ProviderArg::Openai, ProviderArg::Ollama]
        );
        assert_eq!(parse_provider("4").unwrap(), ProviderArg::Ollama);
        assert_eq!(
            parse_provider("openai-compat").unwrap(),
            ProviderArg::OpenaiCompat
        );
        assert!(parse_provider("9").is_err());
    }
}
