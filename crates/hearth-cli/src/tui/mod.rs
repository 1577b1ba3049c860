//! `hearth chat`: a full-screen chat in the terminal, talking to a running
//! hearth over its HTTP API and event streams (so it works against a remote
//! server with `HEARTH_TOKEN`). The state and its keys are in [`app`], the
//! drawing in [`view`], the requests in [`net`]. The terminal is put back
//! (raw mode off, the normal screen) on every way out: a normal exit, an
//! error, or a panic.

mod app;
mod markdown;
mod net;
#[cfg(test)]
mod tests;
mod view;

use std::io::{IsTerminal, Write};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossterm::event::{
    DisableBracketedPaste, DisableMouseCapture, EnableBracketedPaste, EnableMouseCapture, Event,
    EventStream, KeyboardEnhancementFlags, PopKeyboardEnhancementFlags,
    PushKeyboardEnhancementFlags,
};
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use futures_util::StreamExt;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

use crate::Exit;
use crate::cli::Global;
use crate::client::Api;
use app::{Action, App};
use net::{Net, Remote};

/// How often the screen is redrawn while an answer is being written (its
/// clock and tool durations move); an idle screen is drawn only on input.
const TICK: Duration = Duration::from_millis(500);

/// Net events handled before the screen is drawn again: a fast stream is
/// drawn a batch at a time.
const BATCH: usize = 256;

/// How long `--spawn` waits for the server it started.
const SPAWN_WAIT: Duration = Duration::from_secs(30);

/// Runs the TUI on `thread` until the user quits.
pub(crate) async fn run(g: &Global, thread: &str, spawn: bool) -> Result<(), Exit> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return Err(Exit::config(anyhow::anyhow!(
            "hearth chat needs a terminal (stdin and stdout); for scripts use `hearth message`"
        )));
    }
    hearth_core::ThreadKey::new(thread)
        .map_err(|e| Exit::config(anyhow::anyhow!("--thread: {e}")))?;
    let api = Api::new(g)?;
    reach(g, &api, spawn).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Net>();
    let remote = Remote::new(api, thread, tx);
    let mut app = App::new(thread);
    let guard = Screen::enter().map_err(|e| anyhow::anyhow!("cannot set up the terminal: {e}"))?;
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stdout()))
        .map_err(|e| anyhow::anyhow!("cannot draw on the terminal: {e}"))?;
    remote.load();
    remote.health();
    let mut events = EventStream::new();
    let mut health = tokio::time::interval(net::HEALTH_EVERY);
    health.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    health.tick().await;
    let mut tick = tokio::time::interval(TICK);
    // A `kill` or a closed terminal ends the TUI through the same way out
    // as a key, so the terminal is put back.
    let mut stop = stop_signals().map_err(|e| anyhow::anyhow!("cannot listen for signals: {e}"))?;
    let outcome: Result<(), Exit> = loop {
        if let Err(e) = terminal.draw(|f| view::draw(f, &mut app)) {
            break Err(anyhow::anyhow!("cannot draw on the terminal: {e}").into());
        }
        if app.quit {
            break Ok(());
        }
        let actions = tokio::select! {
            ev = events.next() => match ev {
                Some(Ok(Event::Key(k))) => app.key(k),
                Some(Ok(Event::Paste(text))) => {
                    app.paste(&text);
                    Vec::new()
                }
                Some(Ok(Event::Mouse(m))) => app.mouse(m),
                Some(Ok(_)) => Vec::new(),
                Some(Err(e)) => break Err(anyhow::anyhow!("cannot read the terminal: {e}").into()),
                None => break Ok(()),
            },
            Some(n) = rx.recv() => {
                let mut actions = app.net(n);
                for _ in 0..BATCH {
                    match rx.try_recv() {
                        Ok(n) => actions.extend(app.net(n)),
                        Err(_) => break,
                    }
                }
                actions
            }
            _ = health.tick() => {
                remote.health();
                Vec::new()
            }
            _ = tick.tick(), if app.run.is_some() => Vec::new(),
            // `None` (no signals here) disables the branch.
            Some(()) = stop.recv() => break Ok(()),
        };
        for a in actions {
            carry_out(&remote, a);
        }
    };
    drop(terminal);
    drop(guard);
    outcome
}

/// SIGTERM and SIGHUP, as one stream.
fn stop_signals() -> std::io::Result<tokio::sync::mpsc::Receiver<()>> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        for kind in [SignalKind::terminate(), SignalKind::hangup()] {
            let mut sig = signal(kind)?;
            let tx = tx.clone();
            tokio::spawn(async move {
                if sig.recv().await.is_some() {
                    let _ = tx.send(()).await;
                }
            });
        }
    }
    Ok(rx)
}

fn carry_out(remote: &Remote, a: Action) {
    match a {
        Action::Send(text) => remote.send(text, false),
        Action::Steer(text) => remote.send(text, true),
        Action::Follow(run_id) => remote.follow(run_id),
        Action::Cancel(run_id) => remote.cancel(run_id),
        Action::Confirm {
            token,
            approve,
            accept_edits,
        } => remote.confirm(token, approve, accept_edits),
        Action::SetMode(m) => remote.set_mode(m),
        Action::RunPlan { mode, text } => remote.run_plan(mode, text),
        Action::SetModel(m) => remote.set_model(m),
        Action::SetThinking(l) => remote.set_thinking(l),
        Action::Incognito(on) => remote.set_incognito(on),
        Action::NewSession => remote.new_session(),
        Action::Trace(run_id) => remote.trace(run_id),
        Action::Usage(run) => remote.usage(run),
        Action::LoadOlder(before) => remote.history(Some(before)),
        Action::RefreshThread => remote.refresh_thread(),
    }
}

/// Checks a server answers at the URL; with `spawn`, starts `hearth serve`
/// in the background when none does and waits for it.
async fn reach(g: &Global, api: &Api, spawn: bool) -> Result<(), Exit> {
    let up = || async {
        api.send(api.request(reqwest::Method::GET, "/healthz"))
            .await
            .is_ok_and(|r| r.status().is_success())
    };
    if up().await {
        return Ok(());
    }
    if !spawn {
        return Err(anyhow::anyhow!(
            "no hearth server answers at {url}: start one with `hearth serve` (in another \
             terminal, or as a service with `hearth service install`), or run `hearth chat \
             --spawn` to start it in the background; a remote server is given with --url or \
             HEARTH_URL (and its token with HEARTH_TOKEN)",
            url = api.base()
        )
        .into());
    }
    let log = start_server(g, api.base())?;
    let deadline = tokio::time::Instant::now() + SPAWN_WAIT;
    while tokio::time::Instant::now() < deadline {
        if up().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(anyhow::anyhow!(
        "started `hearth serve` but it did not answer at {} within {} s; its output is in {}",
        api.base(),
        SPAWN_WAIT.as_secs(),
        log.display()
    )
    .into())
}

/// Starts `hearth serve` on the URL's address, in its own process group
/// (the terminal's Ctrl+C and hang-up do not reach it), its output in a
/// log file; returns the file.
fn start_server(g: &Global, base: &str) -> Result<std::path::PathBuf, Exit> {
    let url = reqwest::Url::parse(base).map_err(|e| anyhow::anyhow!("--url: {e}"))?;
    let host = url.host_str().unwrap_or_default();
    let ip = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<std::net::IpAddr>()
        .ok();
    let loopback = host == "localhost" || ip.is_some_and(|ip| ip.is_loopback());
    if !loopback {
        return Err(Exit::config(anyhow::anyhow!(
            "--spawn starts a server on this machine, but {} is not a loopback address; start \
             the remote one there",
            base
        )));
    }
    let port = url.port_or_known_default().unwrap_or(7777);
    let host = match ip {
        Some(std::net::IpAddr::V6(ip)) => format!("[{ip}]"),
        Some(ip) => ip.to_string(),
        None => "127.0.0.1".to_owned(),
    };
    let exe = std::env::current_exe()
        .map_err(|e| anyhow::anyhow!("cannot find the hearth binary to start: {e}"))?;
    let log_path = std::env::temp_dir().join(format!("hearth-serve-{port}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", log_path.display()))?;
    let err = log
        .try_clone()
        .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", log_path.display()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("serve")
        .arg("--bind")
        .arg(format!("{host}:{port}"))
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(err);
    if let Some(home) = &g.home {
        cmd.arg("--home").arg(home);
    }
    if let Some(config) = &g.config {
        cmd.arg("--config").arg(config);
    }
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd.spawn()
        .map_err(|e| anyhow::anyhow!("cannot start `hearth serve`: {e}"))?;
    Ok(log_path)
}

/// Whether the terminal took the enhanced keyboard flags (so they are
/// popped on the way out).
static ENHANCED: AtomicBool = AtomicBool::new(false);

/// The terminal in raw mode on the alternate screen, with pasting and the
/// mouse wheel reported; put back when dropped, and by the panic hook.
struct Screen;

impl Screen {
    fn enter() -> std::io::Result<Self> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        // From here on a failure still restores what was set.
        let screen = Screen;
        let mut out = std::io::stdout();
        crossterm::execute!(
            out,
            EnterAlternateScreen,
            EnableBracketedPaste,
            EnableMouseCapture
        )?;
        // Shift+Enter and Ctrl+I are told apart only with these flags;
        // terminals without them still have Alt+Enter and Tab.
        if crossterm::terminal::supports_keyboard_enhancement().unwrap_or(false) {
            crossterm::execute!(
                out,
                PushKeyboardEnhancementFlags(KeyboardEnhancementFlags::DISAMBIGUATE_ESCAPE_CODES)
            )?;
            ENHANCED.store(true, Ordering::SeqCst);
        }
        Ok(screen)
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Puts the terminal back as it was; safe to call more than once.
fn restore() {
    let mut out = std::io::stdout();
    if ENHANCED.swap(false, Ordering::SeqCst) {
        let _ = crossterm::execute!(out, PopKeyboardEnhancementFlags);
    }
    let _ = crossterm::execute!(
        out,
        DisableMouseCapture,
        DisableBracketedPaste,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
    let _ = disable_raw_mode();
    let _ = out.flush();
}
