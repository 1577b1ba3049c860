//! `hearth chat` end to end, in a real terminal: tmux runs it against the
//! real server and the fake provider, `send-keys` types, `capture-pane`
//! reads the screen. Skipped (with the reason) where tmux is missing,
//! except under `CI=true`, where `.ci/run` installs it.

use std::process::Command as StdCommand;
use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Gate, Reply, ToolCallSpec};

use crate::harness::{Hearth, bin, fake_config, poll};

/// How long a screen may take to show what a test waits for.
const WAIT: Duration = Duration::from_secs(30);

/// A tmux server of the test's own (its own socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` (with the reason printed) when tmux is missing outside CI.
    fn start(home: &std::path::Path, url: &str, width: u16, height: u16) -> Option<Tmux> {
        Self::start_with(home, url, "", (width, height))
    }

    /// [`Tmux::start`] with more arguments to `hearth chat`.
    fn start_with(
        home: &std::path::Path,
        url: &str,
        args: &str,
        (width, height): (u16, u16),
    ) -> Option<Tmux> {
        if StdCommand::new("tmux").arg("-V").output().is_err() {
            if hearth_testkit::tools::in_ci() {
                panic!("CI=true but tmux is missing: .ci/run installs it (apt-get install tmux)");
            }
            eprintln!("skipped: tmux is not installed (apt-get install tmux)");
            return None;
        }
        let socket = format!(
            "hearth-tui-{}-{}",
            std::process::id(),
            hearth_core::new_run_id()
        );
        let tmux = Tmux { socket };
        // The exit status is printed once the TUI ends, so a test reads it
        // off the screen.
        let script = format!(
            "HEARTH_URL='{url}' HEARTH_HOME='{home}' '{bin}' chat {args}; echo \"EXIT=$?\"; stty -a | \
             tr ' ' '\\n' | grep -x -- '-\\?icanon'; sleep 60",
            home = home.display(),
            bin = bin(),
        );
        tmux.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &width.to_string(),
            "-y",
            &height.to_string(),
            "env",
            "-u",
            "TMUX",
            "TERM=xterm-256color",
            "sh",
            "-c",
            &script,
        ]);
        Some(tmux)
    }

    fn run(&self, args: &[&str]) -> String {
        let out = StdCommand::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `keys` (tmux key names, or text with `-l`).
    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn text(&self, text: &str) {
        self.run(&["send-keys", "-t", "t", "-l", text]);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t"])
    }

    /// Waits until the screen holds `needle`; returns the screen.
    async fn wait_for(&self, needle: &str) -> String {
        poll(&format!("{needle:?} on the screen"), WAIT, || async {
            let s = self.screen();
            if s.contains(needle) { Ok(s) } else { Err(s) }
        })
        .await
    }

    /// The status line (the last non-empty row while the TUI runs).
    fn status(&self) -> String {
        self.screen()
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = StdCommand::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

#[tokio::test]
async fn chat_streams_confirms_cycles_the_mode_cancels_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let Some(tmux) = Tmux::start(dir.path(), &h.url, 120, 30) else {
        return;
    };
    tmux.wait_for("mode ask │ fake/fake-model │ thinking off")
        .await;
    tmux.wait_for("● connected").await;

    // A message, and its answer as it streams: the first part is on the
    // screen while the rest is held back.
    let gate = Gate::new();
    fake.push(
        Reply::text("the first part, then the rest of the answer")
            .in_pieces(4)
            .pausing_after(2, gate.clone()),
    );
    tmux.text("hello there");
    tmux.keys(&["Enter"]);
    let partial = tmux.wait_for("the first").await;
    assert!(partial.contains("> hello there"), "{partial}");
    assert!(!partial.contains("rest of the answer"), "{partial}");
    assert!(tmux.status().contains("answering"), "{}", tmux.status());
    gate.open();
    tmux.wait_for("the rest of the answer").await;
    poll("the run to end", WAIT, || async {
        let s = tmux.status();
        if s.contains("answering") {
            Err(s)
        } else {
            Ok(())
        }
    })
    .await;

    // A write-class call asks; `y` approves it inline.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        r#"{"id": 1}"#,
    )]));
    fake.push(Reply::text("done forgetting"));
    tmux.text("forget it");
    tmux.keys(&["Enter"]);
    let asked = tmux.wait_for("confirm memory_forget").await;
    assert!(
        asked.contains("y approve · n deny · a approve and accept_edits"),
        "{asked}"
    );
    tmux.keys(&["y"]);
    let done = tmux.wait_for("done forgetting").await;
    assert!(
        done.contains("┃ ✓ memory_forget") || done.contains("┃ ✗ memory_forget"),
        "{done}"
    );
    assert!(
        !done.contains("confirm memory_forget"),
        "the prompt stays: {done}"
    );

    // Shift+Tab: the next mode on the status line and on the server.
    tmux.keys(&["BTab"]);
    tmux.wait_for("mode accept_edits │").await;
    poll("the mode on the server", WAIT, || async {
        let (_, v) = h.get("/v1/threads/cli:local").await;
        if v["mode"] == "accept_edits" {
            Ok(())
        } else {
            Err(v)
        }
    })
    .await;

    // Esc cancels the answer being written.
    fake.push(
        Reply::text("this answer never ends, it stalls")
            .in_pieces(4)
            .stalling_after(2),
    );
    tmux.text("stall");
    tmux.keys(&["Enter"]);
    tmux.wait_for("  this an").await;
    tmux.keys(&["Escape"]);
    tmux.wait_for("Cancelled.").await;
    let (_, runs) = h.get("/v1/runs?thread_key=cli:local&limit=1").await;
    assert_eq!(runs["runs"][0]["status"], "cancelled", "{runs}");

    // Ctrl+C at the empty prompt: exit 0, the terminal back in cooked mode.
    tmux.keys(&["C-c"]);
    // `stty` prints `icanon` (cooked) or `-icanon` (raw) after the exit.
    let after = tmux.wait_for("icanon").await;
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(
        after.lines().any(|l| l.trim() == "icanon"),
        "raw mode left on: {after}"
    );
}

/// The server goes away and comes back on the same address mid-answer:
/// the TUI says so, reconnects, and shows the answer.
#[tokio::test]
async fn chat_reconnects_after_a_server_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = format!(
        "{}\n[server]\nbind = \"127.0.0.1:{port}\"\n",
        fake_config(&fake.base_url())
    );
    std::fs::write(dir.path().join("hearth.toml"), &config).unwrap();
    let serve = || {
        crate::harness::command(dir.path())
            .args(["serve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let url = format!("http://127.0.0.1:{port}");
    let up = || async {
        poll("the server to answer", WAIT, || async {
            match reqwest::get(format!("{url}/healthz")).await {
                Ok(r) if r.status().is_success() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await
    };
    let mut first = serve();
    up().await;
    let Some(tmux) = Tmux::start(dir.path(), &url, 120, 30) else {
        first.kill().await.unwrap();
        return;
    };
    tmux.wait_for("● connected").await;
    // The answer stalls; the server dies under it.
    fake.push(
        Reply::text("lost with the first process")
            .in_pieces(4)
            .stalling_after(2),
    );
    fake.push(Reply::text("answered after the restart"));
    tmux.text("survive this");
    tmux.keys(&["Enter"]);
    tmux.wait_for("lost").await;
    first.kill().await.unwrap();
    first.wait().await.unwrap();
    tmux.wait_for("○ reconnecting").await;
    let mut second = serve();
    // Recovered, the run is answered again; the stream resumes and the
    // answer is shown.
    tmux.wait_for("answered after the restart").await;
    tmux.wait_for("● connected").await;
    // SIGTERM (a `kill`, a closed terminal's SIGHUP alike) ends it with
    // the terminal put back.
    let shell = tmux.run(&["display-message", "-p", "-t", "t", "#{pane_pid}"]);
    let shell = shell.trim();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children")).unwrap();
    let chat = children.split_whitespace().next().unwrap();
    let killed = StdCommand::new("kill")
        .args(["-TERM", chat])
        .status()
        .unwrap();
    assert!(killed.success());
    let after = tmux.wait_for("icanon").await;
    assert!(after.contains("EXIT=0"), "{after}");
    assert!(
        after.lines().any(|l| l.trim() == "icanon"),
        "raw mode left on: {after}"
    );
    second.kill().await.unwrap();
}

/// With no server at the address, `hearth chat` says how to start one and
/// exits 1; with `--spawn` it starts `hearth serve` there and talks to it.
#[tokio::test]
async fn chat_without_a_server_says_how_to_start_one_and_spawn_starts_it() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    std::fs::write(
        dir.path().join("hearth.toml"),
        fake_config(&fake.base_url()),
    )
    .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    let Some(tmux) = Tmux::start(dir.path(), &url, 100, 20) else {
        return;
    };
    let said = tmux.wait_for("EXIT=").await;
    assert!(said.contains("EXIT=1"), "{said}");
    let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(said.contains("no hearth server answers at"), "{said}");
    assert!(said.contains("hearth chat --spawn"), "{said}");
    drop(tmux);

    let tmux = Tmux::start_with(dir.path(), &url, "--spawn", (100, 20)).unwrap();
    tmux.wait_for("mode ask │ fake/fake-model").await;
    tmux.wait_for("● connected").await;
    tmux.keys(&["C-c"]);
    tmux.wait_for("EXIT=0").await;
    // The server goes on in the background; stopped here by the PID it
    // wrote in its home's lock file.
    let health = reqwest::get(format!("{url}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200);
    let pid = std::fs::read_to_string(dir.path().join("hearth.lock")).unwrap();
    let pid = pid.trim();
    assert!(pid.parse::<u32>().is_ok(), "{pid:?}");
    let killed = StdCommand::new("kill")
        .args(["-TERM", pid])
        .status()
        .unwrap();
    assert!(killed.success());
}
