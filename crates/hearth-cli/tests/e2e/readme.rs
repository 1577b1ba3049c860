//! README.md, walked as a new user would, by a test: every command of its
//! ```sh blocks runs, in order, in a shell against the real binary (a
//! `hearth` first on PATH), on a fresh HOME, with the fake OpenAI-compatible
//! provider behind `hearth init`, a fake Telegram Bot API and the fake MCP
//! server. A command runs unless the table [`NOT_RUN`] names it with the
//! reason, so a command added to the README is run by construction (and
//! fails the test until it works); each must exit 0 unless [`EXIT`] says
//! otherwise, with what the README shows of its output ([`OUTPUT`]). Every
//! ```toml block is read by hearth's config loader. Each table entry must
//! match a README command: a stale entry fails the test too. Like a user
//! following the README, it needs bash, curl, man and script (util-linux)
//! on PATH; the walk takes about a second.

mod parse;
mod walk;

use std::collections::BTreeSet;

use parse::{Block, ShellCommand, blocks, commands};

/// The README, as the repository has it.
fn readme() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

/// Commands the walk does not run, by their key (the command without
/// comments), each with the reason. Reviewed: add one only when the command
/// cannot run in a test at all.
pub const NOT_RUN: &[(&str, &str)] = &[
    (
        "cargo run --release -- serve",
        "a release build of the whole workspace (minutes); the walk runs the binary the e2e \
         tests built, as `hearth serve` further down",
    ),
    (".ci/test", "runs every test, this walk included"),
    (
        "hearth chat --thread cli:demo",
        "a full-screen terminal program; tui:: drives it under tmux against the real binary \
         (type, stream, confirm with y, Shift+Tab, Esc, exit)",
    ),
    (
        "systemctl --user start hearth",
        "needs a live systemd user manager; the `hearth service` commands around it run \
         against a fake systemctl that records its calls",
    ),
    (
        "cargo build --release --features postgres",
        "a release build (minutes); the tests run the binary built with the postgres \
         feature against a throw-away PostgreSQL cluster (postgres::)",
    ),
    (
        "HEARTH_DATABASE_URL=postgres://hearth@db.internal:5432/hearth hearth store copy-to-postgres",
        "needs a PostgreSQL server at that address; store_copy:: copies a stopped home into a \
         fresh database of the throw-away cluster and starts it there",
    ),
    (
        "docker build -t hearth .",
        "needs a Docker daemon (CI's .ci/run builds the image where one answers)",
    ),
    ("docker volume create hearth", "needs a Docker daemon"),
    (
        "docker run --rm -v hearth:/var/lib/hearth hearth token create --name admin",
        "needs a Docker daemon and the image",
    ),
    (
        "docker run -d --name hearth -p 127.0.0.1:7777:7777 -v hearth:/var/lib/hearth -e OPENAI_API_KEY hearth",
        "needs a Docker daemon and the image",
    ),
    (
        "claude mcp add --transport http hearth http://127.0.0.1:7777/mcp --header \"Authorization: Bearer hth_...\"",
        "needs Claude Code's own CLI; hearth's /mcp is run by mcp_server:: and by \
         `hearth mcp probe` in this walk",
    ),
    (
        "claude mcp add hearth -e HEARTH_TOKEN=hth_... -- hearth mcp serve",
        "needs Claude Code's own CLI; `hearth mcp serve` is run by mcp_server::",
    ),
];

/// Placeholders and example values in README commands, and what the walk
/// puts in their place: `{name}` is a value an earlier step learnt (see
/// `walk::Walk::learn`), the rest is literal.
pub const SUBSTITUTIONS: &[(&str, &str)] = &[
    ("<run_id>", "{run_id}"),
    ("<token_id>", "{token_id}"),
    ("<token>", "{confirmation}"),
    ("<job_id>", "{job_id}"),
    ("<key_id>", "{key_id}"),
    // The model the fake provider offers (init's provider is `compat`).
    ("<provider>/<model>", "compat/fake-model"),
    // The server listens on an ephemeral port, not 7777.
    ("localhost:7777", "{addr}"),
    // An MCP server to probe: hearth's own /mcp.
    ("http://127.0.0.1:3000/mcp", "{url}/mcp"),
    // The folder the fake MCP server's read_text_file reads.
    ("/srv/notes", "{notes}"),
    // The code and the id the fake Telegram's stranger and failed send made.
    ("pair approve K7M2QX9P", "pair approve {pairing_code}"),
    ("outbox retry 42", "outbox retry {outbox_id}"),
];

/// Commands whose exit status is not 0, as the README says beside them.
pub const EXIT: &[(&str, i32, &str)] = &[];

/// What a command prints (on stdout) that the README shows or says, by key:
/// each text must appear (after `{name}` substitution).
pub const OUTPUT: &[(&str, &str)] = &[
    ("hearth init", "Next: hearth serve"),
    ("hearth message \"hello\" --wait", "echo: hello"),
    (
        "hearth message \"what time is it?\"",
        "echo: what time is it?",
    ),
    (
        "hearth message \"what time is it?\" --wait",
        "echo: what time is it?",
    ),
    ("hearth message \"and in Tokyo?\" --thread api:me", "run_"),
    ("hearth message - < question.txt", "run_"),
    ("hearth run wait <run_id>", "echo: and in Tokyo?"),
    (
        "hearth run get <run_id> --json",
        "\"status\": \"succeeded\"",
    ),
    ("hearth threads show api:me", "model      compat/fake-model"),
    ("hearth threads history api:me", "user: and in Tokyo?"),
    ("hearth whoami", "cli:user:local"),
    ("hearth model list", "* compat/fake-model"),
    (
        "hearth model set <provider>/<model> --thread api:me",
        "compat/fake-model",
    ),
    ("hearth thinking set low", "low"),
    ("hearth incognito on", "incognito on"),
    ("hearth incognito off", "incognito off"),
    ("hearth health", "ready"),
    ("hearth doctor", "ok    provider compat"),
    (
        "hearth config show",
        "\"default_model\": \"compat/fake-model\"",
    ),
    ("hearth config show", "\"api_key\": \"<set>\""),
    ("hearth config reload", "configuration reloaded"),
    ("hearth token create --name laptop", "hth_"),
    ("hearth token list", "{token_id}"),
    ("hearth token revoke <token_id>", "revoked {token_id}"),
    ("hearth secrets list", "openai_key"),
    ("hearth confirm <token> --wait", "forgotten"),
    (
        "hearth memory export --user cli:user:local",
        "\"user_key\": \"cli:user:local\"",
    ),
    (
        "hearth permissions check cli:user:local web.fetch",
        "allowed: the default preset `member`",
    ),
    ("hearth permissions list", "jobs.manage"),
    ("hearth audit", "grant.add"),
    ("hearth man | man -l -", "hearth - "),
    ("hearth skills list", "pdf"),
    (
        "hearth skills show pdf",
        "description: Read and fill PDF forms.",
    ),
    ("hearth skills check", "no problem"),
    ("hearth skills keygen", "ed25519:"),
    (
        "hearth skills verify ./weather",
        "ok: weather 1.0.0 signed by trusted key",
    ),
    (
        "curl -s localhost:7777/v1/messages -H 'content-type: application/json' -d '{\"text\":\"hello\",\"wait\":true}'",
        "\"status\":\"succeeded\"",
    ),
    (
        "curl -N localhost:7777/v1/runs/<run_id>/events",
        "event: run.succeeded",
    ),
    (
        "hearth service install",
        ".config/systemd/user/hearth.service",
    ),
    ("hearth feedback <run_id> up", "rated {run_id}"),
    ("hearth router", "strategy"),
    ("hearth jobs list", "briefing"),
    ("hearth mcp list", "fs"),
    (
        "hearth mcp call fs read_text_file '{\"path\": \"/srv/notes/a.md\"}'",
        "notes of the walk",
    ),
    (
        "hearth mcp probe http://127.0.0.1:3000/mcp --call-all",
        "send_message",
    ),
    ("hearth channels", "telegram"),
    ("hearth jobs run <job_id>", "started run"),
    ("hearth pair list", "{pairing_code}"),
    ("hearth outbox list --status failed", "{outbox_id}"),
];

/// Fenced blocks that are neither shell nor hearth's TOML, by language.
const OTHER_LANGUAGES: &[(&str, &str)] = &[
    (
        "python",
        "a client program, not a command; the official openai package against hearth is \
         external_tools::openai's test",
    ),
    ("yaml", "Slack's app manifest, pasted into Slack"),
    (
        "text",
        "what a screen shows (hearth chat under tmux); tui:: checks that screen against the \
         real binary",
    ),
];

/// TOML blocks that are not hearth's config, by their first line.
const OTHER_TOML: &[(&str, &str)] = &[("# ~/.codex/config.toml", "Codex's own config file")];

/// TOML blocks the loader reads with more around them, by their first line:
/// what is prepended, and why.
const TOML_CONTEXT: &[(&str, &str, &str)] = &[(
    "[alerts]",
    "[channels.telegram]\nenabled = true\n",
    "its rules send to Telegram, and a rule for a channel that is not enabled is refused \
     at load (as the README says under the block)",
)];

#[tokio::test]
async fn every_readme_command_runs_and_every_toml_block_loads() {
    let readme = readme();
    let all = blocks(&readme);
    let mut shell: Vec<(usize, ShellCommand)> = Vec::new();
    for b in &all {
        match b.lang.as_str() {
            "sh" => shell.extend(
                commands(&b.text)
                    .into_iter()
                    .map(|c| (b.line + 1 + c.offset, c)),
            ),
            "toml" => check_toml(b),
            other => assert!(
                OTHER_LANGUAGES.iter().any(|(l, _)| *l == other),
                "README.md:{}: a ```{other} block: run it here (sh), load it (toml), or list \
                 it in OTHER_LANGUAGES with the reason",
                b.line
            ),
        }
    }
    check_tables_match(&all, &shell);
    let within = std::time::Duration::from_secs(120);
    tokio::time::timeout(within, walk::Walk::run(shell))
        .await
        .expect("the README walk took over 120 s");
}

/// Reads a ```toml block with hearth's loader (no environment overrides).
fn check_toml(b: &Block) {
    let first = b.text.lines().next().unwrap_or_default().trim();
    if OTHER_TOML.iter().any(|(f, _)| *f == first) {
        return;
    }
    let before = TOML_CONTEXT
        .iter()
        .find(|(f, ..)| *f == first)
        .map_or("", |(_, c, _)| c);
    let text = format!("{before}{}", b.text);
    if let Err(e) = hearth_config::load_str(&text, "README.md", Vec::<(String, String)>::new()) {
        panic!(
            "README.md:{}: the ```toml block is not a config hearth loads: {e}\n{text}",
            b.line
        );
    }
}

/// Every table entry names something the README has.
fn check_tables_match(all: &[Block], shell: &[(usize, ShellCommand)]) {
    let keys: BTreeSet<&str> = shell.iter().map(|(_, c)| c.key.as_str()).collect();
    let texts: Vec<&str> = shell.iter().map(|(_, c)| c.text.as_str()).collect();
    let named = NOT_RUN
        .iter()
        .map(|(k, _)| *k)
        .chain(EXIT.iter().map(|(k, ..)| *k))
        .chain(OUTPUT.iter().map(|(k, _)| *k))
        .chain(walk::HOOKS.iter().map(|(k, _)| *k));
    for k in named {
        assert!(
            keys.contains(k),
            "a table names `{k}`, which is no longer a README command: update the table"
        );
    }
    for (placeholder, _) in SUBSTITUTIONS {
        assert!(
            texts.iter().any(|t| t.contains(placeholder)),
            "SUBSTITUTIONS names {placeholder:?}, which no README command has any more"
        );
    }
    let firsts: Vec<&str> = all
        .iter()
        .filter(|b| b.lang == "toml")
        .map(|b| b.text.lines().next().unwrap_or_default().trim())
        .collect();
    for f in OTHER_TOML
        .iter()
        .map(|(f, _)| *f)
        .chain(TOML_CONTEXT.iter().map(|(f, ..)| *f))
    {
        assert!(
            firsts.contains(&f),
            "a TOML table names a block starting {f:?}, which the README no longer has"
        );
    }
}
