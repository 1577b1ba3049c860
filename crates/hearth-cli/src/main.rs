//! The `hearth` binary: `hearth serve` runs the gateway; every other command is
//! a client of its HTTP API (or, for tokens and secrets, of the local store).
//!
//! This is the binary edge: errors are `anyhow` here, and the exit code says
//! what kind of failure it was (1: the request or run failed, 2: bad usage or
//! configuration, 3: a `--wait` ended while the run goes on).

mod cli;
mod client;
mod doctor;
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
mod tokens;

use std::process::ExitCode;

use clap::Parser;

/// Exit code for bad usage or configuration.
const EXIT_CONFIG: u8 = 2;

/// Exit code for a wait that ended while the run is still going: not a
/// failure of the run, so scripts can tell it apart and follow up.
const EXIT_PENDING: u8 = 3;

/// An error that carries its exit code.
#[derive(Debug)]
pub struct Exit {
    code: u8,
    error: anyhow::Error,
}

impl Exit {
    /// A configuration or usage error (exit 2).
    pub fn config(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: EXIT_CONFIG,
            error: error.into(),
        }
    }

    /// The wait ended but the run goes on (exit 3).
    pub fn pending(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: EXIT_PENDING,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for Exit {
    fn from(e: E) -> Self {
        Self {
            code: 1,
            error: e.into(),
        }
    }
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
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
            eprintln!("hearth: {:#}", exit.error);
            ExitCode::from(exit.code)
        }
    }
}

/// Caps glibc's malloc at two arenas. By default every thread that
/// allocates while another holds an arena gets its own (up to 8 per core),
/// each keeping its freed memory: at 64 runs in parallel the server's peak
/// RSS was 25-26 MB, 23.5-24 MB with two (BENCHMARKS.md, issue 17); one
/// arena saved another 1 MB but cost about 10% more CPU per run at 16 in
/// parallel.
///
/// And keeps 512 KiB of slack at the top of each heap (glibc's default is
/// 128 KiB): with less, each run's allocations grew the heap and each run's
/// end gave it back, so the next run faulted the same pages in again, about
/// 17 page faults per run at concurrency 1 against 2 with this
/// (`perf stat -e page-faults`, BENCHMARKS.md). The slack is only kept once
/// touched, so an idle server is no larger.
///
/// A `GLIBC_TUNABLES` that sets `arena_max` or `top_pad` wins over each.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "mallopt is glibc's C interface")]
fn few_malloc_arenas() {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    // SAFETY: runs first thing in `main`, before any other thread exists;
    // mallopt only changes limits that glibc reads on later allocations.
    unsafe {
        if !tunables.contains("arena_max") {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
        if !tunables.contains("top_pad") {
            libc::mallopt(libc::M_TOP_PAD, 512 * 1024);
        }
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
