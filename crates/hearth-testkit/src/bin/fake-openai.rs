//! `fake-openai`: runs the fake Chat Completions server until killed.
//!
//! Usage: `fake-openai [--bind ADDR] [--delay-ms N]`. Prints
//! `listening http://ADDR/v1` once ready, for scripts and benchmarks to read.

use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use hearth_testkit::FakeOpenAi;

const USAGE: &str = "usage: fake-openai [--bind ADDR] [--delay-ms N]\n\
    Serves an OpenAI-compatible /v1/chat/completions that echoes the last user message.\n\
    --bind ADDR     address to listen on (default 127.0.0.1:0)\n\
    --delay-ms N    wait N ms before the first byte of each reply (default 0)";

struct Args {
    bind: SocketAddr,
    delay: Duration,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Option<Args>, String> {
    let mut parsed = Args {
        bind: SocketAddr::from(([127, 0, 0, 1], 0)),
        delay: Duration::ZERO,
    };
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f.to_owned(), Some(v.to_owned())),
            None => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--bind" => {
                let v = value()?;
                parsed.bind = v.parse().map_err(|e| format!("--bind {v:?}: {e}"))?;
            }
            "--delay-ms" => {
                let v = value()?;
                let ms: u64 = v.parse().map_err(|e| format!("--delay-ms {v:?}: {e}"))?;
                parsed.delay = Duration::from_millis(ms);
            }
            "-h" | "--help" => return Ok(None),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(parsed))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("fake-openai: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let fake = match FakeOpenAi::bind(args.bind).await {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fake-openai: cannot bind {}: {e}", args.bind);
            return ExitCode::FAILURE;
        }
    };
    fake.set_default_delay(args.delay);
    let mut out = std::io::stdout().lock();
    if writeln!(out, "listening {}", fake.base_url())
        .and_then(|()| out.flush())
        .is_err()
    {
        return ExitCode::FAILURE;
    }
    drop(out);
    // Without a signal handler (ctrl_c failing) serve until killed.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
    // Requests that broke the API's rules were answered with its errors;
    // say which, and fail, so a benchmark of a broken client does not pass.
    let violations = fake.violations();
    if violations.is_empty() {
        return ExitCode::SUCCESS;
    }
    for v in &violations {
        eprintln!("fake-openai: {v}");
    }
    ExitCode::FAILURE
}
