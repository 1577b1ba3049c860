//! The walk itself: a fresh HOME and working folder, the fakes, and each
//! README command run by bash in turn, with what the steps around some
//! commands do (the [`HOOKS`] table) to stand in for the world a user has:
//! a terminal, a chat with a stranger in it, a model that asks first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use hearth_testkit::fake_telegram::{Failure, FakeTelegram, User};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::parse::ShellCommand;
use super::{EXIT, NOT_RUN, OUTPUT, SUBSTITUTIONS};
use crate::harness::{bin, poll};

const INIT: &str = "hearth init";
const SERVE: &str = "hearth serve";
const TOKYO: &str = "hearth message \"and in Tokyo?\" --thread api:me";
const TOKEN_CREATE: &str = "hearth token create --name laptop";
const SECRETS_KEYGEN: &str = "hearth secrets keygen";
const CONFIRM: &str = "hearth confirm <token> --wait";
const DENY: &str = "hearth deny <token>";
const COMPLETIONS: &str =
    "hearth completions bash > ~/.local/share/bash-completion/completions/hearth";
const SKILLS_KEYGEN: &str = "hearth skills keygen";
const JOBS_ADD: &str = "hearth jobs add --name briefing --schedule \"0 8 * * 1-5\" --timezone Europe/Paris --thread telegram:chat:123456789 \"Summarize my day\"";
const SERVICE_INSTALL: &str = "hearth service install";
const PAIR_LIST: &str = "hearth pair list";
const OUTBOX_LIST: &str = "hearth outbox list --status failed";
const PAIR_APPROVE: &str = "hearth pair approve K7M2QX9P";
const OUTBOX_RETRY: &str = "hearth outbox retry 42";
const JOBS_RUN: &str = "hearth jobs run <job_id>";
const IN_A_TERMINAL: &str = "hearth message \"what time is it?\"";

/// What the walk does around a command, by its key.
pub const HOOKS: &[(&str, &str)] = &[
    (
        INIT,
        "runs with `--yes --provider openai-compat --base-url <the fake> --model fake-model \
         --key-env FAKE_KEY` (stdin is no terminal here, so init takes flags, as the README's \
         next paragraph says); then adds to the file what the README's later sections have a \
         user add: the README's own [channels.telegram] block with `api_base` at the fake Bot \
         API, and an MCP server `fs` (the fake MCP server)",
    ),
    (
        SERVE,
        "runs in the background with HEARTH_BIND=127.0.0.1:0 until the walk ends (then \
         SIGTERM, exit 0); the commands after it get its URL in HEARTH_URL",
    ),
    (TOKYO, "learns {run_id}: the first word it prints"),
    (
        TOKEN_CREATE,
        "learns {token_id} from what it says on stderr",
    ),
    (
        SECRETS_KEYGEN,
        "exports the key it prints as HEARTH_SECRET_KEY, as the README says",
    ),
    (
        CONFIRM,
        "before: a run of cli:user:local stops to ask (the fake model calls memory_forget), \
         its token is {confirmation}",
    ),
    (
        DENY,
        "before: another run stops to ask, its token is {confirmation}",
    ),
    (COMPLETIONS, "after: the script is in the file"),
    (
        SKILLS_KEYGEN,
        "after: learns {key_id}, and puts the printed key in [skills] trusted_keys, as the \
         README says before the block",
    ),
    (JOBS_ADD, "learns {job_id}: the word after `added job`"),
    (
        SERVICE_INSTALL,
        "after: the unit file is there, and systemctl got daemon-reload and enable",
    ),
    (
        PAIR_LIST,
        "before: a stranger writes to the bot (the fake Telegram) and is given a code: \
         {pairing_code}",
    ),
    (
        OUTBOX_LIST,
        "before: the allowed user of the README's Telegram block writes, and the fake \
         Telegram refuses the answer once for good (403, the bot was blocked): {outbox_id}, \
         which the retry then delivers",
    ),
    (
        PAIR_APPROVE,
        "after: the stranger is told, in the fake Telegram chat",
    ),
    (OUTBOX_RETRY, "after: the answer reaches the user's chat"),
    (
        JOBS_RUN,
        "after: the answer goes where the thread lives, the Telegram chat 123456789",
    ),
    (
        IN_A_TERMINAL,
        "runs in a pseudo-terminal (util-linux `script`), as the README's comment says: the \
         answer is printed, not a run id",
    ),
];

/// Variables every command gets besides PATH (the `hearth` link first) and
/// HOME (a fresh folder), and why.
const ENV: &[(&str, &str, &str)] = &[
    (
        "FAKE_KEY",
        "test-key",
        "the fake provider's key, named by init's --key-env",
    ),
    (
        "TELEGRAM_BOT_TOKEN",
        TG_TOKEN,
        "the README's Telegram block names it",
    ),
    (
        "KEY",
        "sk-example-walk",
        "the README's `$KEY`, a credential to seal",
    ),
];

const TG_TOKEN: &str = "7000000001:AAwalkTOKENwalkTOKENwalkTOKENwalk";
/// How long one command may take.
const COMMAND_TIME: Duration = Duration::from_secs(30);

/// The walk's state: its folders, the fakes, the server, what it learnt.
pub struct Walk {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    work: PathBuf,
    env: BTreeMap<String, String>,
    vars: BTreeMap<&'static str, String>,
    fake: FakeOpenAi,
    tg: FakeTelegram,
    server: Option<Child>,
    http: reqwest::Client,
}

impl Walk {
    /// Runs every command in order; panics at the first that fails.
    pub async fn run(commands: Vec<(usize, ShellCommand)>) {
        let mut w = Self::new().await;
        let mut ran = 0;
        for (line, c) in &commands {
            if NOT_RUN.iter().any(|(k, _)| *k == c.key) {
                println!("not run: {}", c.key);
                continue;
            }
            println!("run: {}", c.key);
            ran += 1;
            w.before(&c.key).await;
            if c.key == SERVE {
                w.serve(&c.text).await;
                continue;
            }
            let mut text = w.substitute(&c.text);
            if c.key == IN_A_TERMINAL {
                text = format!("script -qec {} /dev/null", quoted(&text));
            }
            let (code, out, err) = w.sh(&text).await;
            let want = EXIT.iter().find(|(k, ..)| *k == c.key).map_or(0, |e| e.1);
            assert_eq!(
                code, want,
                "README.md:{line}: `{text}` exited {code}, not {want}\n\
                 stdout:\n{out}\nstderr:\n{err}"
            );
            for (_, shown) in OUTPUT.iter().filter(|(k, _)| *k == c.key) {
                let shown = w.expand(shown);
                assert!(
                    out.contains(&shown),
                    "README.md:{line}: `{text}` did not print {shown:?}\n\
                     stdout:\n{out}\nstderr:\n{err}"
                );
            }
            w.after(&c.key, &out, &err).await;
        }
        w.finish().await;
        println!(
            "{ran} README commands run, {} not run",
            commands.len() - ran
        );
    }

    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let (home, work, bin_dir, notes) = (
            root.join("home"),
            root.join("work"),
            root.join("bin"),
            root.join("notes"),
        );
        for d in [&home, &work, &bin_dir, &notes] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::os::unix::fs::symlink(bin(), bin_dir.join("hearth")).unwrap();
        write_exe(
            &bin_dir.join("systemctl"),
            &format!(
                "#!/bin/sh\necho \"$*\" >> '{}'\n",
                root.join("systemctl.log").display()
            ),
        );
        std::fs::write(work.join("question.txt"), "what is in question.txt?\n").unwrap();
        std::fs::write(notes.join("a.md"), "notes of the walk\n").unwrap();
        // A skill in <workspace>/skills, the folder `hearth serve` runs in.
        std::fs::create_dir_all(work.join("skills/pdf")).unwrap();
        std::fs::write(
            work.join("skills/pdf/SKILL.md"),
            "---\nname: pdf\ndescription: Read and fill PDF forms.\n---\nUse pdftotext.\n",
        )
        .unwrap();
        // An executable skill to sign, in the working folder.
        std::fs::create_dir_all(work.join("weather")).unwrap();
        std::fs::write(
            work.join("weather/hearth-skill.json"),
            r#"{"name":"weather","version":"1.0.0","description":"Forecasts","entry":"server","hearth":">=0.1"}"#,
        )
        .unwrap();
        write_exe(&work.join("weather/server"), "#!/bin/sh\n");

        let fake = FakeOpenAi::start().await;
        fake.respond_with(scripted);
        let tg = FakeTelegram::start(TG_TOKEN).await;
        let mut env: BTreeMap<String, String> = ENV
            .iter()
            .map(|(k, v, _)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let path = std::env::var("PATH").unwrap_or_default();
        env.insert("PATH".into(), format!("{}:{path}", bin_dir.display()));
        env.insert("HOME".into(), home.display().to_string());
        // init looks for a local Ollama; there is none here (a port just freed).
        env.insert("HEARTH_OLLAMA_URL".into(), closed_port());
        let mut vars = BTreeMap::new();
        vars.insert("base_url", fake.base_url());
        vars.insert("notes", notes.display().to_string());
        Self {
            _dir: dir,
            root,
            home,
            work,
            env,
            vars,
            fake,
            tg,
            server: None,
            http: reqwest::Client::new(),
        }
    }

    /// `{name}` in `template` replaced by what the walk learnt.
    fn expand(&self, template: &str) -> String {
        let mut out = template.to_owned();
        while let Some(start) = out.find('{') {
            let Some(len) = out[start..].find('}') else {
                break;
            };
            let name = &out[start + 1..start + len];
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                break;
            }
            let value = self.vars.get(name).unwrap_or_else(|| {
                panic!("{{{name}}} is needed before any step of the walk learnt it")
            });
            out.replace_range(start..start + len + 1, value);
        }
        out
    }

    fn substitute(&self, text: &str) -> String {
        let mut text = text.to_owned();
        if text.starts_with(INIT) {
            let flags = " --yes --provider openai-compat --base-url {base_url} --model fake-model \
                         --key-env FAKE_KEY";
            text.insert_str(INIT.len(), &self.expand(flags));
        }
        for (placeholder, value) in SUBSTITUTIONS {
            if text.contains(placeholder) {
                text = text.replace(placeholder, &self.expand(value));
            }
        }
        text
    }

    /// Runs `text` with bash (errors and failed pipes stop it) in the
    /// working folder; exit code, stdout, stderr.
    async fn sh(&self, text: &str) -> (i32, String, String) {
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(format!("set -eo pipefail\n{text}"))
            .current_dir(&self.work)
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let out = tokio::time::timeout(COMMAND_TIME, cmd.output())
            .await
            .unwrap_or_else(|_| panic!("`{text}` did not end within {COMMAND_TIME:?}"))
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Starts the README's `hearth serve` in the background.
    async fn serve(&mut self, text: &str) {
        let log = std::fs::File::create(self.root.join("serve.log")).unwrap();
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(format!("exec {text}"))
            .current_dir(&self.work)
            .env_clear()
            .envs(&self.env)
            .env("HEARTH_BIND", "127.0.0.1:0")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = tokio::time::timeout(COMMAND_TIME, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(u) = line.strip_prefix("hearth listening on ") {
                    return u.to_owned();
                }
            }
            let log = std::fs::read_to_string(self.root.join("serve.log")).unwrap_or_default();
            panic!("`{text}` exited before listening; its log:\n{log}");
        })
        .await
        .expect("`hearth serve` did not listen within 30 s");
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        self.vars
            .insert("addr", url.trim_start_matches("http://").to_owned());
        self.vars.insert("url", url.clone());
        self.env.insert("HEARTH_URL".into(), url);
        self.server = Some(child);
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.vars["url"])
    }

    async fn get(&self, path: &str) -> Value {
        let r = self.http.get(self.url(path)).send().await.unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    async fn before(&mut self, key: &str) {
        match key {
            CONFIRM => self.asking(FORGET).await,
            DENY => self.asking(FORGET_AGAIN).await,
            PAIR_LIST => {
                self.tg
                    .push_update(self.tg.private_text(&User::new(3003), "let me in"));
                let asked = self
                    .tg
                    .wait_for(
                        |st| {
                            st.visible_in(3003)
                                .iter()
                                .any(|m| m.text.contains("hearth pair approve"))
                        },
                        COMMAND_TIME,
                    )
                    .await;
                assert!(asked, "the stranger was given no pairing code");
                let p = self.get("/v1/pairings").await;
                let code = p["pairings"][0]["code"].as_str().unwrap().to_owned();
                self.vars.insert("pairing_code", code);
            }
            OUTBOX_LIST => {
                // The allowed user of the README's block writes; Telegram
                // refuses the answer for good (the user blocked the bot), once.
                self.tg.fail_method(
                    "sendMessage",
                    1,
                    Failure::Error {
                        code: 403,
                        description: "Forbidden: bot was blocked by the user".into(),
                    },
                );
                self.tg.push_update(
                    self.tg
                        .private_text(&User::new(123_456_789), "still there?"),
                );
                let item = poll("a failed reply in the outbox", COMMAND_TIME, || async {
                    let v = self.get("/v1/outbox?status=failed").await;
                    v["items"]
                        .as_array()
                        .and_then(|a| a.first())
                        .cloned()
                        .ok_or(v)
                })
                .await;
                assert_eq!(item["target"], "123456789", "{item}");
                self.vars.insert("outbox_id", item["id"].to_string());
            }
            _ => {}
        }
    }

    /// Sends `text` as the CLI's user, which [`scripted`] answers with a
    /// call of `memory_forget` (which asks first); learns the token.
    async fn asking(&mut self, text: &str) {
        let body = json!({ "text": text, "thread_key": "cli:local",
                           "user_key": "cli:user:local", "wait": true });
        let r = self
            .http
            .post(self.url("/v1/messages"))
            .json(&body)
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["status"], "awaiting_confirmation", "{v}");
        let token = v["confirmation"]["token"].as_str().unwrap().to_owned();
        self.vars.insert("confirmation", token);
    }

    async fn after(&mut self, key: &str, out: &str, err: &str) {
        match key {
            INIT => {
                let path = self.home.join(".hearth/hearth.toml");
                let mut config = std::fs::read_to_string(&path).unwrap();
                readme_sections_exist(&config);
                config.push_str(&self.additions());
                std::fs::write(&path, config).unwrap();
            }
            TOKYO => {
                let id = out.split_whitespace().next().unwrap().to_owned();
                self.vars.insert("run_id", id);
            }
            TOKEN_CREATE => {
                let id = word_after(err, "token ").unwrap_or_else(|| panic!("no token id: {err}"));
                self.vars.insert("token_id", id);
            }
            SECRETS_KEYGEN => {
                let key = out.lines().next().unwrap().trim().to_owned();
                self.env.insert("HEARTH_SECRET_KEY".into(), key);
            }
            COMPLETIONS => {
                let script = self
                    .home
                    .join(".local/share/bash-completion/completions/hearth");
                let text = std::fs::read_to_string(&script).unwrap();
                assert!(text.contains("complete "), "not a bash completion script");
            }
            SKILLS_KEYGEN => {
                let keys = self.home.join(".hearth/keys");
                let file = std::fs::read_dir(&keys).unwrap().next().unwrap().unwrap();
                let id = file
                    .path()
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                self.vars.insert("key_id", id);
                let path = self.home.join(".hearth/hearth.toml");
                let mut config = std::fs::read_to_string(&path).unwrap();
                let public = out.trim();
                config.push_str(&format!("\n[skills]\ntrusted_keys = [\"{public}\"]\n"));
                std::fs::write(&path, config).unwrap();
            }
            JOBS_ADD => {
                let id = word_after(out, "added job ").unwrap_or_else(|| panic!("no id: {out}"));
                self.vars.insert("job_id", id);
            }
            PAIR_APPROVE => self.telegram_shows(3003, "approved").await,
            OUTBOX_RETRY => self.telegram_shows(123_456_789, "echo: still there?").await,
            JOBS_RUN => {
                self.telegram_shows(123_456_789, "echo: Summarize my day")
                    .await
            }
            SERVICE_INSTALL => {
                let unit = self.home.join(".config/systemd/user/hearth.service");
                let text = std::fs::read_to_string(&unit).unwrap();
                assert!(text.contains("Type=notify"), "{text}");
                let calls = std::fs::read_to_string(self.root.join("systemctl.log")).unwrap();
                assert!(
                    calls.contains("--user daemon-reload") && calls.contains("--user enable"),
                    "{calls}"
                );
            }
            _ => {}
        }
    }

    /// Waits until the bot's messages in `chat` show `text`.
    async fn telegram_shows(&self, chat: i64, text: &str) {
        let shown = self
            .tg
            .wait_for(
                |st| st.visible_in(chat).iter().any(|m| m.text.contains(text)),
                COMMAND_TIME,
            )
            .await;
        let seen: Vec<String> = self
            .tg
            .with_state(|st| st.visible_in(chat).iter().map(|m| m.text.clone()).collect());
        assert!(
            shown,
            "Telegram chat {chat} never showed {text:?}; it shows {seen:?}"
        );
    }

    /// What the README's later sections have a user add to hearth.toml:
    /// its Telegram block (pointed at the fake) and an MCP server `fs`.
    fn additions(&self) -> String {
        let readme = super::readme();
        let telegram = super::parse::blocks(&readme)
            .into_iter()
            .find(|b| b.lang == "toml" && b.text.starts_with("[channels.telegram]"))
            .expect("the README's [channels.telegram] block");
        format!(
            "\n{}api_base = \"{}\"\n\n[mcp.servers.fs]\ncommand = \"{}\"\nargs = [\"--read-files\"]\n\
             read_tools = [\"read_text_file\"]\n",
            telegram.text,
            self.tg.url(),
            hearth_testkit::fake_mcp::fake_mcp_bin().display()
        )
    }

    /// Stops the server (SIGTERM: it must exit 0) and checks the fakes saw
    /// only well-formed requests.
    async fn finish(mut self) {
        let mut child = self
            .server
            .take()
            .expect("the README never started `hearth serve`");
        let pid = child.id().unwrap().to_string();
        let killed = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(killed.success());
        let status = tokio::time::timeout(COMMAND_TIME, child.wait())
            .await
            .expect("hearth did not stop within 30 s of SIGTERM")
            .unwrap();
        let log = std::fs::read_to_string(self.root.join("serve.log")).unwrap_or_default();
        assert!(
            status.success(),
            "hearth serve ended with {status}; log:\n{log}"
        );
        assert_eq!(self.fake.violations(), Vec::<String>::new());
        assert_eq!(
            self.tg.rejections(),
            Vec::<String>::new(),
            "Telegram would refuse these"
        );
    }
}

/// The README sections the file `hearth init` wrote sends a reader to
/// (`the README's "<title>"`) are headings of the README.
fn readme_sections_exist(config: &str) {
    let comments: Vec<&str> = config
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(str::trim)
        .collect();
    let prose = comments.join(" ");
    let readme = super::readme();
    let mut named = 0;
    for part in prose.split("README's \"").skip(1) {
        let title = part.split('"').next().unwrap_or_default();
        assert!(
            readme
                .lines()
                .any(|l| l.trim_start_matches('#').trim() == title && l.starts_with('#')),
            "hearth init's file sends the reader to the README's {title:?}, which has no such \
             section:\n{config}"
        );
        named += 1;
    }
    assert!(
        named > 0 || !prose.contains("README"),
        "hearth init's file names a README section without its title in quotes:\n{config}"
    );
}

/// The messages the model answers with a tool call that asks first, and
/// what it says once the call is answered (everything else is echoed).
const FORGET: &str = "forget memory 1";
const FORGET_AGAIN: &str = "forget it again";

/// The fake model's script, by the request's content rather than by order,
/// so that no other run of the walk can take a scripted reply.
fn scripted(req: &Value) -> Option<Reply> {
    let messages = req["messages"].as_array()?;
    let last_user = messages.iter().rev().find(|m| m["role"] == "user")?;
    let text = last_user["content"].as_str()?;
    if text != FORGET && text != FORGET_AGAIN {
        return None;
    }
    if messages.last()?["role"] == "tool" {
        return Some(Reply::text(if text == FORGET {
            "forgotten"
        } else {
            "kept"
        }));
    }
    Some(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]))
}

/// `text` as one single-quoted shell word.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// The word that follows `prefix` in `text`.
fn word_after(text: &str, prefix: &str) -> Option<String> {
    let at = text.find(prefix)? + prefix.len();
    text[at..].split_whitespace().next().map(str::to_owned)
}

fn write_exe(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A loopback URL nothing listens on (a port just freed).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
}
