//! Starting and stopping the real binary on a temp home.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The binary under test (built once by cargo for all tests).
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_hearth")
}

/// The line of [`fake_config`] that gives the fake provider a key (the
/// fake, like OpenAI, refuses a call without one); a test that configures
/// its own key removes it.
pub const FAKE_KEY_LINE: &str = "headers = { Authorization = \"Bearer test-key\" }\n";

/// A `hearth.toml` that points the default model at a fake provider.
pub fn fake_config(base_url: &str) -> String {
    format!(
        "[llm]\ndefault_model = \"fake/fake-model\"\n\
         [llm.providers.fake]\ntype = \"openai_compat\"\n{FAKE_KEY_LINE}base_url = \"{base_url}\"\n\
         models = [\"fake-model\", \"other-model\"]\nrequest_timeout_secs = 30\nidle_timeout_secs = 30\n"
    )
}

/// A running `hearth serve`.
pub struct Hearth {
    pub url: String,
    pub home: PathBuf,
    pub http: reqwest::Client,
    child: Child,
}

/// A command for the binary with a clean environment.
pub fn command(home: &Path) -> Command {
    let mut cmd = Command::new(bin());
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HEARTH_HOME", home)
        .env("RUST_LOG", "info")
        .kill_on_drop(true);
    cmd
}

/// Runs `cmd` (a [`command`]) and gives its stdout, failing the test with
/// its arguments, exit status and output when it does not exit 0.
pub async fn succeeds(cmd: &mut Command) -> String {
    let out = cmd.output().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "hearth {:?}: {}\n{stdout}\n{}",
        cmd.as_std().get_args().collect::<Vec<_>>(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A new API token named `name`, made with `hearth token create` on `home`.
pub async fn new_token(home: &Path, name: &str) -> String {
    succeeds(command(home).args(["token", "create", "--name", name]))
        .await
        .trim()
        .to_owned()
}

impl Hearth {
    /// Starts on `home` (writing `config` as its hearth.toml when given).
    pub async fn start(home: &Path, config: Option<&str>) -> Hearth {
        Self::start_with(home, config, &[]).await
    }

    /// Starts with extra environment variables.
    pub async fn start_with(home: &Path, config: Option<&str>, env: &[(&str, &str)]) -> Hearth {
        std::fs::create_dir_all(home).unwrap();
        if let Some(c) = config {
            std::fs::write(home.join("hearth.toml"), c).unwrap();
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(home.join("serve.log"))
            .unwrap();
        let mut cmd = command(home);
        cmd.args(["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let url = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(u) = line.strip_prefix("hearth listening on ") {
                    return u.to_owned();
                }
            }
            let log = std::fs::read_to_string(home.join("serve.log")).unwrap_or_default();
            panic!("hearth exited before listening; log:\n{log}");
        })
        .await
        .expect("hearth did not start within 30 s");
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Hearth {
            url,
            home: home.to_owned(),
            http: reqwest::Client::new(),
            child,
        }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }

    /// SIGTERM and the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("hearth did not exit within 30 s of SIGTERM")
            .unwrap()
    }

    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// POST /v1/messages; returns status and body.
    pub async fn post(&self, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, "/v1/messages", body).await
    }

    /// `method` on `path` with a JSON body; returns status and body.
    pub async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .http
            .request(method, self.at(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        let s = r.status().as_u16();
        (s, r.json().await.unwrap())
    }

    /// Sends `text` on `thread` and waits for the answer (200 expected).
    pub async fn ask(&self, thread: &str, text: &str) -> Value {
        let (s, v) = self
            .post(json!({ "text": text, "thread_key": thread, "wait": true }))
            .await;
        assert_eq!(s, 200, "{v}");
        v
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        let r = self.http.get(self.at(path)).send().await.unwrap();
        let s = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            s,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Waits until the run is terminal (through the API's own wait).
    pub async fn wait_run(&self, run_id: &str) -> Value {
        for _ in 0..10 {
            let (s, v) = self.get(&format!("/v1/runs/{run_id}")).await;
            assert_eq!(s, 200, "{v}");
            if matches!(
                v["status"].as_str(),
                Some("succeeded" | "failed" | "cancelled")
            ) {
                return v;
            }
            // Follow the event stream to its end instead of polling on a timer.
            let _ = self.events(run_id, None).await;
        }
        panic!("run {run_id} did not finish");
    }

    /// The whole SSE stream of a run as (id, event, data) triples.
    pub async fn events(
        &self,
        run_id: &str,
        last_event_id: Option<u64>,
    ) -> Vec<(u64, String, Value)> {
        let mut rb = self.http.get(self.at(&format!("/v1/runs/{run_id}/events")));
        if let Some(id) = last_event_id {
            rb = rb.header("Last-Event-ID", id.to_string());
        }
        let r = tokio::time::timeout(Duration::from_secs(60), async {
            rb.send().await.unwrap().text().await.unwrap()
        })
        .await
        .expect("event stream did not end");
        parse_sse(&r)
    }
}

/// Polls `check` until it gives a value, for at most `within`; for states
/// the API offers no event for (an outbox item marked delivered after its
/// send returned). Panics naming `what`, with the last value seen.
pub async fn poll<T, E: std::fmt::Debug, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match check().await {
            Ok(v) => return v,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("{what} not within {within:?}; last seen: {last:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Parses an SSE body (the fields hearth sends).
pub fn parse_sse(body: &str) -> Vec<(u64, String, Value)> {
    let mut out = Vec::new();
    for block in body.split("\n\n") {
        let (mut id, mut ev, mut data) = (None, None, String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().parse().ok();
            } else if let Some(v) = line.strip_prefix("event:") {
                ev = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.strip_prefix(' ').unwrap_or(v));
            }
        }
        if let (Some(id), Some(ev)) = (id, ev) {
            // A bad event is a server bug the test must see, not a Null.
            let value = serde_json::from_str(&data)
                .unwrap_or_else(|e| panic!("event {id} ({ev}) data is not JSON: {data} ({e})"));
            out.push((id, ev, value));
        }
    }
    out
}

/// The user-message texts of a fake-provider request, in order.
pub fn user_texts(req: &Value) -> Vec<String> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
#[should_panic(expected = "not JSON: {\"run_id\": \"run_1\", oops")]
fn parse_sse_fails_on_bad_event_json_and_shows_the_raw_text() {
    parse_sse("id: 1\nevent: run.queued\ndata: {\"run_id\": \"run_1\", oops\n\n");
}

#[test]
fn parse_sse_reads_each_event() {
    let events = parse_sse(
        "id: 1\nevent: run.queued\ndata: {\"run_id\":\"r\"}\n\n: keep-alive\n\n\
         id: 2\nevent: run.succeeded\ndata: {\"output\":{\"text\":\"hi\"}}\n\n",
    );
    assert_eq!(events.len(), 2);
    assert_eq!(
        events[0],
        (1, "run.queued".to_owned(), json!({ "run_id": "r" }))
    );
    assert_eq!(events[1].2["output"]["text"], "hi");
}

/// The tool names a provider request offered the model.
pub fn offered_tools(req: &serde_json::Value) -> Vec<String> {
    req["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the CLI against `h` (`HEARTH_URL` set to it): exit code, stdout
/// and stderr.
pub async fn hearth(h: &Hearth, args: &[&str]) -> (i32, String, String) {
    let out = command(&h.home)
        .env("HEARTH_URL", &h.url)
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
