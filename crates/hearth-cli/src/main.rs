//! The `hearth` binary: `hearth serve` runs the gateway; every other command is
//! a client of its HTTP API (or, for tokens and secrets, of the local store).
//!
//! This is the binary edge: errors are `anyhow` here, and the exit code says
//! what kind of failure it was (1: the request or run failed, 2: bad usage or
//! configuration, 3: a `--wait` ended while the run goes on, 4: the run
//! stopped to ask for a confirmation, 130: interrupted while waiting).

mod cli;
mod client;
mod doctor;
mod generated;
mod home_lock;
mod init;
mod logging;
mod mcp_serve;
mod memory;
mod output;
mod secrets;
mod serve;
mod service;
mod skills;
mod store_cmd;
mod tokens;
mod tui;

use std::process::ExitCode;

/// Exit code for bad usage or configuration.
const EXIT_CONFIG: u8 = 2;

/// Exit code for a wait that ended while the run is still going: not a
/// failure of the run, so scripts can tell it apart and follow up.
const EXIT_PENDING: u8 = 3;

/// Exit code for a wait that ended because the run asks for a confirmation:
/// neither done nor failed, and it needs a person's answer, not more time.
const EXIT_AWAITING: u8 = 4;

/// Exit code for Ctrl+C while waiting (128 + SIGINT, as shells report it).
const EXIT_INTERRUPTED: u8 = 130;

/// An error that carries its exit code.
#[derive(Debug)]
pub struct Exit {
    code: u8,
    error: anyhow::Error,
    /// The API's error code (`unknown_model`, ...) when the server refused.
    api_code: Option<String>,
}

impl Exit {
    /// A configuration or usage error (exit 2).
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Self::with_code(EXIT_CONFIG, error)
    }

    /// The wait ended but the run goes on (exit 3).
    pub fn pending(error: impl Into<anyhow::Error>) -> Self {
        Self::with_code(EXIT_PENDING, error)
    }

    /// The run waits for a confirmation (exit 4).
    pub fn awaiting(error: impl Into<anyhow::Error>) -> Self {
        Self::with_code(EXIT_AWAITING, error)
    }

    /// Interrupted while waiting (exit 130).
    pub fn interrupted(error: impl Into<anyhow::Error>) -> Self {
        Self::with_code(EXIT_INTERRUPTED, error)
    }

    fn with_code(code: u8, error: impl Into<anyhow::Error>) -> Self {
        Self {
            code,
            error: error.into(),
            api_code: None,
        }
    }

    /// Names the API's error code, for `--json` errors.
    pub fn api_code(mut self, code: impl Into<String>) -> Self {
        self.api_code = Some(code.into());
        self
    }

    /// The error as `--json` prints it.
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": {
            "code": self.api_code,
            "message": format!("{:#}", self.error),
            "exit_code": self.code,
        }})
    }
}

impl<E: Into<anyhow::Error>> From<E> for Exit {
    fn from(e: E) -> Self {
        Self::with_code(1, e)
    }
}

/// Parses the arguments. Options that the environment provides
/// (`HEARTH_TOKEN`, `HEARTH_HOME`, ...) count as given, so clap's usage line
/// in an error would list them as if they were required
/// (`Usage: hearth message --home <HOME> --token <TOKEN> <TEXT>`); the error
/// is made again without the environment, which gives the plain usage.
fn parse_args() -> cli::Cli {
    use clap::{CommandFactory, FromArgMatches};
    let err = match cli::Cli::command().try_get_matches() {
        Ok(m) => match cli::Cli::from_arg_matches(&m) {
            Ok(c) => return c,
            Err(e) => e,
        },
        Err(e) => e,
    };
    if matches!(
        err.kind(),
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
    ) {
        err.exit();
    }
    let err = match without_env(cli::Cli::command()).try_get_matches() {
        Err(plain) if plain.kind() == err.kind() => plain,
        _ => err,
    };
    // `--json` anywhere: the usage error as JSON too, as every other error.
    if std::env::args_os().any(|a| a == "--json") {
        let text = err.render().to_string();
        // What is wrong, without the usage and help lines that follow it.
        let message = text.split("\n\n").next().unwrap_or_default();
        let message = message.strip_prefix("error: ").unwrap_or(message);
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        eprintln!(
            "{}",
            serde_json::json!({ "error": {
                "code": "usage",
                "message": message,
                "exit_code": EXIT_CONFIG,
            }})
        );
        std::process::exit(i32::from(EXIT_CONFIG));
    }
    err.exit()
}

/// `cmd` with no argument read from the environment.
fn without_env(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| a.env(None)).mut_subcommands(without_env)
}

fn main() -> ExitCode {
    let mut args = parse_args();
    // An empty HEARTH_TOKEN (`export HEARTH_TOKEN=`) means no token, as an
    // unset one does, rather than an empty bearer the server refuses.
    if args
        .global
        .token
        .as_deref()
        .is_some_and(|t| t.trim().is_empty())
    {
        args.global.token = None;
    }
    let json_errors = args.global.json;
    if !matches!(args.command, cli::Command::Serve { .. }) {
        default_sigpipe();
    }
    few_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hearth: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(cli::dispatch(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(exit) => {
            if json_errors {
                // On stderr as every error: stdout keeps the one document
                // a command prints, or nothing.
                eprintln!("{}", exit.to_json());
            } else {
                // An error may quote what others wrote (a run's error, a
                // platform's answer): no escape sequence of theirs is obeyed.
                let message = format!("{:#}", exit.error);
                eprintln!("hearth: {}", output::terminal_safe(&message));
            }
            ExitCode::from(exit.code)
        }
    }
}

/// Keeps glibc's malloc to one arena. By default every thread that
/// allocates while another holds an arena gets its own (up to 8 per core),
/// each keeping its freed memory: at 64 runs in parallel the server's peak
/// RSS was 25-26 MB with the default, 25.0-25.3 MB with two arenas and
/// 24.0-24.3 MB with one, after `hearth-load`'s 1, 16 and 64 levels
/// (BENCHMARKS.md, issue 17). One arena costs about a fifth of the runs per
/// second at 16 in parallel on 2 cores (3,000-3,900 against 4,000-5,000), far
/// above what a small box sees; an operator who wants them back sets
/// `GLIBC_TUNABLES=glibc.malloc.arena_max=2`, which wins over this.
///
/// glibc's top pad stays at its default: 512 KiB took a run at concurrency 1
/// from 18 page faults to 2 but no measurable CPU, and cost up to 2 MB of
/// peak RSS at 64 in parallel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "mallopt is glibc's C interface")]
fn few_malloc_arenas() {
    if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max")) {
        return;
    }
    // SAFETY: runs first thing in `main`, before any other thread exists;
    // mallopt only changes a limit for arenas created from now on.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn few_malloc_arenas() {}

/// Gives SIGPIPE back its default action for the commands that print, so
/// `hearth ... | head` ends hearth as it ends any Unix tool; Rust ignores the
/// signal, which turns a closed pipe into a panic on the next print. `serve`
/// keeps it ignored: a closed pipe to an MCP child must not end the server
/// (sockets never raise it: Rust sends with `MSG_NOSIGNAL`).
#[expect(unsafe_code, reason = "libc::signal is a C call; see SAFETY below")]
fn default_sigpipe() {
    // SAFETY: runs first thing in `main`, before any other thread exists, and
    // only sets one signal's disposition to the default.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
