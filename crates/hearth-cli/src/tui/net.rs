//! The TUI's side of the API: each request runs in its own task and
//! reports back on the app's channel, so the screen never waits on the
//! network. A run's events are followed over SSE and, when the connection
//! drops (a server restart), followed again from the last event id seen.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use hearth_core::{RunEnvelope, RunEventKind};
use hearth_llm::sse::SseDecoder;
use hearth_server::dto::{History, HistoryMessage, Models, RunList, ThreadRuntime, UsageRows};
use reqwest::Method;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use crate::client::{Api, enc};

/// Who the TUI speaks as, as `hearth message` does.
pub(super) const USER_KEY: &str = "cli:user:local";

/// Longest wait between two attempts to reach a server that went away.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// How often the connection is checked while nothing else talks to the
/// server (rare: an idle TUI costs next to nothing).
pub(super) const HEALTH_EVERY: Duration = Duration::from_secs(5);

/// What the network tells the app.
#[derive(Debug)]
pub(super) enum Net {
    /// The thread's settings.
    Thread(ThreadInfo),
    /// The configured models' ids.
    Models(Vec<String>),
    /// A page of history, newest first; `older` when it was asked for by
    /// scrolling up.
    History {
        messages: Vec<HistoryMessage>,
        next_before: Option<String>,
        older: bool,
    },
    /// Tokens of the thread today by model (all of them with `replace`,
    /// else one run's to add), and each model's cost per token today.
    Usage {
        tokens: BTreeMap<String, u64>,
        rates: BTreeMap<String, f64>,
        replace: bool,
    },
    /// A message was accepted: the run it started or steered.
    Accepted { run_id: String, steered: bool },
    /// One event of a followed run.
    Event {
        run_id: String,
        kind: RunEventKind,
        data: Value,
    },
    /// A followed run ended; its envelope holds the final answer.
    Ended {
        run_id: String,
        envelope: Option<Box<RunEnvelope>>,
    },
    /// Whether the server answers.
    Connection(bool),
    /// Something asked for failed: words for the user.
    Failed(String),
    /// Words for the user (a command's answer).
    Info(String),
    /// A new session started: the screen empties.
    Cleared,
}

/// A thread's settings as the status line shows them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct ThreadInfo {
    pub(super) model: String,
    pub(super) thinking: String,
    pub(super) mode: String,
    pub(super) mode_expires_at: Option<String>,
    pub(super) incognito: bool,
}

impl From<ThreadRuntime> for ThreadInfo {
    fn from(t: ThreadRuntime) -> Self {
        Self {
            mode: serde_json::to_value(t.mode)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            model: t.model,
            thinking: t.thinking,
            mode_expires_at: t.mode_expires_at,
            incognito: t.incognito,
        }
    }
}

/// The API of one thread, shared by the tasks that talk to it.
#[derive(Clone)]
pub(super) struct Remote {
    api: Arc<Api>,
    thread: Arc<str>,
    tx: UnboundedSender<Net>,
}

impl Remote {
    pub(super) fn new(api: Api, thread: &str, tx: UnboundedSender<Net>) -> Self {
        Self {
            api: Arc::new(api),
            thread: Arc::from(thread),
            tx,
        }
    }

    fn tell(&self, n: Net) {
        // The app is gone only while the TUI exits: nothing left to tell.
        let _ = self.tx.send(n);
    }

    fn path(&self, what: &str) -> String {
        match what {
            "" => format!("/v1/threads/{}", enc(&self.thread)),
            w => format!("/v1/threads/{}/{w}", enc(&self.thread)),
        }
    }

    /// Runs `work` in its own task; its error is told to the user.
    fn spawn<F>(&self, work: impl FnOnce(Remote) -> F + Send + 'static)
    where
        F: std::future::Future<Output = Result<(), String>> + Send + 'static,
    {
        let me = self.clone();
        tokio::spawn(async move {
            let tx = me.tx.clone();
            if let Err(why) = work(me).await {
                let _ = tx.send(Net::Failed(why));
            }
        });
    }

    /// The thread's settings, the models, the last page of history and
    /// today's usage: what the first screen shows.
    pub(super) fn load(&self) {
        self.refresh_thread();
        self.spawn(|r| async move {
            let models: Models = r.api.get("/v1/models").await.map_err(words)?;
            r.tell(Net::Models(
                models.models.into_iter().map(|m| m.id).collect(),
            ));
            Ok(())
        });
        self.history(None);
        self.usage(None);
        // An answer already being written (the TUI opened again mid-run)
        // is followed.
        self.spawn(|r| async move {
            let path = format!("/v1/runs?thread_key={}&limit=1", enc(&r.thread));
            let runs: RunList = r.api.get(&path).await.map_err(words)?;
            if let Some(run) = runs.runs.into_iter().find(|e| !e.status.is_terminal()) {
                r.tell(Net::Accepted {
                    run_id: run.run_id,
                    steered: false,
                });
            }
            Ok(())
        });
    }

    pub(super) fn refresh_thread(&self) {
        self.spawn(|r| async move {
            let t: ThreadRuntime = r.api.get(&r.path("")).await.map_err(words)?;
            r.tell(Net::Thread(t.into()));
            Ok(())
        });
    }

    /// A page of history older than `before` (the newest page without).
    pub(super) fn history(&self, before: Option<String>) {
        self.spawn(|r| async move {
            let mut path = format!("{}?limit=100", r.path("history"));
            let older = before.is_some();
            if let Some(b) = before {
                path.push_str(&format!("&before={}", enc(&b)));
            }
            let page: History = r.api.get(&path).await.map_err(words)?;
            r.tell(Net::History {
                messages: page.messages,
                next_before: page.next_before,
                older,
            });
            Ok(())
        });
    }

    /// The thread's tokens today by model, from the traces of its runs of
    /// today (or, with `run`, of that run only, to add), with each model's
    /// cost per token today to estimate their cost.
    pub(super) fn usage(&self, run: Option<String>) {
        self.spawn(|r| async move {
            let replace = run.is_none();
            let runs = match run {
                Some(run) => vec![run],
                None => {
                    let today = jiff::Timestamp::now().strftime("%Y-%m-%d").to_string();
                    let path = format!("/v1/runs?thread_key={}&limit=50", enc(&r.thread));
                    let list: RunList = r.api.get(&path).await.map_err(words)?;
                    list.runs
                        .into_iter()
                        .filter(|e| e.created_at.starts_with(&today))
                        .map(|e| e.run_id)
                        .collect()
                }
            };
            let mut tokens = BTreeMap::new();
            for run_id in runs {
                let path = format!("/v1/runs/{}/trace", enc(&run_id));
                let trace: Trace = r.api.get(&path).await.map_err(words)?;
                for step in trace.steps.iter().filter(|s| s.kind == "llm") {
                    let t = step.tokens.as_ref();
                    let n = |k: &str| t.and_then(|t| t[k].as_u64()).unwrap_or(0);
                    *tokens.entry(step.name.clone()).or_default() +=
                        n("input_tokens") + n("output_tokens");
                }
            }
            let rows: UsageRows = r
                .api
                .get("/v1/usage?group_by=model&since=today")
                .await
                .map_err(words)?;
            let rates = rows
                .rows
                .iter()
                .filter_map(|row| {
                    let all = row.input_tokens + row.output_tokens;
                    (all > 0).then_some((row.key.clone(), row.cost_usd? / all as f64))
                })
                .collect();
            r.tell(Net::Usage {
                tokens,
                rates,
                replace,
            });
            Ok(())
        });
    }

    /// Sends `text`: a new run, or with `steer` into the running one.
    pub(super) fn send(&self, text: String, steer: bool) {
        self.spawn(move |r| async move {
            let body = json!({
                "text": text,
                "thread_key": &*r.thread,
                "user_key": USER_KEY,
                "source": "cli",
                "delivery_mode": if steer { "steer" } else { "follow_up" },
            });
            let env: RunEnvelope = r.api.post("/v1/messages", &body).await.map_err(words)?;
            r.tell(Net::Accepted {
                run_id: env.run_id.clone(),
                steered: steer,
            });
            Ok(())
        });
    }

    /// Follows `run_id`'s events from its first, again from the last id
    /// seen whenever the connection drops, until its terminal event.
    pub(super) fn follow(&self, run_id: String) {
        let r = self.clone();
        tokio::spawn(async move {
            let mut last = 0;
            let mut wait = Duration::from_millis(100);
            loop {
                match r.stream(&run_id, &mut last).await {
                    Ok(true) => break,
                    // Ended without its end: a server that restarted
                    // numbers a recovered run's events anew, so its end
                    // may be at or before the last id seen. The run says
                    // whether it ended; else follow it again.
                    Ok(false) => {
                        let path = format!("/v1/runs/{}", enc(&run_id));
                        match r.api.get::<RunEnvelope>(&path).await {
                            Ok(env) if env.status.is_terminal() => break,
                            Ok(_) | Err(_) => {}
                        }
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(MAX_BACKOFF);
                    }
                    Err(Gone::NoRun(why)) => {
                        r.tell(Net::Failed(why));
                        break;
                    }
                    Err(Gone::Connection) => {
                        r.tell(Net::Connection(false));
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(MAX_BACKOFF);
                    }
                }
            }
            let envelope = r
                .api
                .get::<RunEnvelope>(&format!("/v1/runs/{}", enc(&run_id)))
                .await
                .ok()
                .map(Box::new);
            r.tell(Net::Ended { run_id, envelope });
        });
    }

    /// One connection to the event stream; `Ok(true)` once the terminal
    /// event came.
    async fn stream(&self, run_id: &str, last: &mut u64) -> Result<bool, Gone> {
        let mut rb = self
            .api
            .request(Method::GET, &format!("/v1/runs/{}/events", enc(run_id)));
        if *last > 0 {
            rb = rb.header("Last-Event-ID", last.to_string());
        }
        let resp = rb.send().await.map_err(|_| Gone::Connection)?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Err(Gone::NoRun(format!(
                "run {run_id} is not known to the server"
            )));
        }
        if !resp.status().is_success() {
            return Err(Gone::Connection);
        }
        self.tell(Net::Connection(true));
        let mut body = resp.bytes_stream();
        let mut dec = SseDecoder::new();
        while let Some(chunk) = body.next().await {
            let Ok(chunk) = chunk else {
                return Err(Gone::Connection);
            };
            dec.push(&chunk);
            while let Ok(Some(ev)) = dec.next_event() {
                let id = ev.id.as_deref().and_then(|i| i.parse().ok());
                if let Some(id) = id {
                    *last = id;
                }
                let Some(kind) = ev
                    .event
                    .and_then(|e| serde_json::from_value::<RunEventKind>(Value::String(e)).ok())
                else {
                    continue;
                };
                let data = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
                let terminal = matches!(
                    kind,
                    RunEventKind::Succeeded | RunEventKind::Failed | RunEventKind::Cancelled
                );
                self.tell(Net::Event {
                    run_id: run_id.to_owned(),
                    kind,
                    data,
                });
                if terminal {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    pub(super) fn cancel(&self, run_id: String) {
        self.spawn(move |r| async move {
            let _: RunEnvelope = r
                .api
                .call(
                    r.api
                        .request(Method::POST, &format!("/v1/runs/{}/cancel", enc(&run_id))),
                )
                .await
                .map_err(words)?;
            Ok(())
        });
    }

    /// Answers a confirmation; `accept_edits` also switches the thread to
    /// that mode (the `a` answer).
    pub(super) fn confirm(&self, token: String, approve: bool, accept_edits: bool) {
        self.spawn(move |r| async move {
            if accept_edits {
                r.put_mode("accept_edits").await?;
            }
            let body = json!({ "user_key": USER_KEY, "approve": approve });
            let _: RunEnvelope = r
                .api
                .post(&format!("/v1/confirmations/{}", enc(&token)), &body)
                .await
                .map_err(words)?;
            Ok(())
        });
    }

    async fn put_mode(&self, mode: &str) -> Result<(), String> {
        let _: Value = self
            .api
            .put(&self.path("mode"), &json!({ "mode": mode }))
            .await
            .map_err(words)?;
        let t: ThreadRuntime = self.api.get(&self.path("")).await.map_err(words)?;
        self.tell(Net::Thread(t.into()));
        Ok(())
    }

    /// Switches to `mode`, then (only once that is done) sends `text`.
    pub(super) fn run_plan(&self, mode: String, text: String) {
        self.spawn(move |r| async move {
            r.put_mode(&mode).await?;
            r.send(text, false);
            Ok(())
        });
    }

    pub(super) fn set_mode(&self, mode: String) {
        self.spawn(move |r| async move { r.put_mode(&mode).await });
    }

    pub(super) fn set_model(&self, model: String) {
        self.spawn(move |r| async move {
            let t: ThreadRuntime = r
                .api
                .put(&r.path("model"), &json!({ "model": model }))
                .await
                .map_err(words)?;
            r.tell(Net::Thread(t.into()));
            Ok(())
        });
    }

    pub(super) fn set_thinking(&self, level: String) {
        self.spawn(move |r| async move {
            let t: ThreadRuntime = r
                .api
                .put(&r.path("thinking"), &json!({ "level": level }))
                .await
                .map_err(words)?;
            r.tell(Net::Thread(t.into()));
            Ok(())
        });
    }

    pub(super) fn set_incognito(&self, on: bool) {
        self.spawn(move |r| async move {
            let t: ThreadRuntime = r
                .api
                .put(&r.path("incognito"), &json!({ "enabled": on }))
                .await
                .map_err(words)?;
            r.tell(Net::Thread(t.into()));
            Ok(())
        });
    }

    pub(super) fn new_session(&self) {
        self.spawn(|r| async move {
            let t: ThreadRuntime = r
                .api
                .call(r.api.request(Method::DELETE, &r.path("session")))
                .await
                .map_err(words)?;
            r.tell(Net::Cleared);
            r.tell(Net::Thread(t.into()));
            r.usage(None);
            Ok(())
        });
    }

    /// The steps of `run_id`, one line each, for `/trace`.
    pub(super) fn trace(&self, run_id: String) {
        self.spawn(move |r| async move {
            let trace: Trace = r
                .api
                .get(&format!("/v1/runs/{}/trace", enc(&run_id)))
                .await
                .map_err(words)?;
            let mut lines = vec![format!("trace of {run_id}:")];
            for s in trace.steps {
                let mut line = format!("  {} {} {} {}", s.index, s.kind, s.name, s.status);
                if let Some(d) = s.detail.as_ref().filter(|_| s.kind == "tool") {
                    line.push_str(&format!(
                        " (mode {}, {})",
                        d["mode"].as_str().unwrap_or("?"),
                        d["decision"].as_str().unwrap_or("?")
                    ));
                }
                lines.push(line);
            }
            r.tell(Net::Info(lines.join("\n")));
            Ok(())
        });
    }

    /// Whether the server answers; told only when it changed is the app's
    /// business.
    pub(super) fn health(&self) {
        let r = self.clone();
        tokio::spawn(async move {
            let up = r
                .api
                .send(r.api.request(Method::GET, "/healthz"))
                .await
                .is_ok_and(|resp| resp.status().is_success());
            r.tell(Net::Connection(up));
        });
    }
}

/// Why a stream ended early.
enum Gone {
    /// The server cannot be reached (or broke off): try again.
    Connection,
    /// The server does not know the run: trying again will not help.
    NoRun(String),
}

/// `GET /v1/runs/{id}/trace`, as far as the TUI reads it (the server's
/// own type only serialises).
#[derive(serde::Deserialize)]
struct Trace {
    steps: Vec<Step>,
}

#[derive(serde::Deserialize)]
struct Step {
    index: u32,
    kind: String,
    name: String,
    status: String,
    tokens: Option<Value>,
    detail: Option<Value>,
}

/// An error of the client, as words for the user.
fn words(e: crate::Exit) -> String {
    format!("{:#}", e.error)
}
