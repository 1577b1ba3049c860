//! Client commands: talk to a running server over its HTTP API.

use futures_util::StreamExt;
use hearth_core::{RunEnvelope, RunStatus};
use hearth_llm::sse::SseDecoder;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::Exit;
use crate::cli::{Command, Global, ModelCommand, PermissionsCommand, RunCommand, ThinkingCommand};

/// A thin HTTP client of the API.
struct Api {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Api {
    fn new(g: &Global) -> Result<Self, Exit> {
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| Exit::from(anyhow::anyhow!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            http,
            base: g.url.trim_end_matches('/').to_owned(),
            token: g.token.clone(),
        })
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self.http.request(method, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        rb
    }

    async fn send(&self, rb: reqwest::RequestBuilder) -> Result<(StatusCode, Value), Exit> {
        let resp = rb.send().await.map_err(|e| {
            anyhow::anyhow!(
                "cannot reach hearth at {}: {} (is `hearth serve` running? set --url or HEARTH_URL)",
                self.base,
                e.without_url()
            )
        })?;
        let status = resp.status();
        let body: Value = resp.json().await.map_err(|e| {
            anyhow::anyhow!(
                "hearth sent a response that is not JSON: {}",
                e.without_url()
            )
        })?;
        if !status.is_success() {
            let code = body["error"]["code"].as_str().unwrap_or("error");
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("request failed");
            return Err(anyhow::anyhow!("{message} ({code}, HTTP {})", status.as_u16()).into());
        }
        Ok((status, body))
    }

    async fn get(&self, path: &str) -> Result<Value, Exit> {
        Ok(self.send(self.request(Method::GET, path)).await?.1)
    }

    async fn put(&self, path: &str, body: Value) -> Result<Value, Exit> {
        Ok(self
            .send(self.request(Method::PUT, path).json(&body))
            .await?
            .1)
    }

    /// Follows a run's events until its terminal event.
    async fn follow(&self, run_id: &str) -> Result<(), Exit> {
        let resp = self
            .request(Method::GET, &format!("/v1/runs/{}/events", enc(run_id)))
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("cannot follow run {run_id}: {}", e.without_url()))?;
        if !resp.status().is_success() {
            let (_, _) = self
                .send(self.request(Method::GET, &format!("/v1/runs/{}", enc(run_id))))
                .await?;
            return Ok(());
        }
        let mut stream = resp.bytes_stream();
        let mut dec = SseDecoder::new();
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| anyhow::anyhow!("event stream broke: {}", e.without_url()))?;
            dec.push(&chunk);
            while let Some(ev) = dec
                .next_event()
                .map_err(|e| anyhow::anyhow!("bad event stream: {e}"))?
            {
                if matches!(
                    ev.event.as_deref(),
                    Some(
                        "run.succeeded" | "run.failed" | "run.cancelled" | "confirmation.required"
                    )
                ) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~:".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
    );
}

/// Prints a run for people (the answer, or the status) or as JSON; a failed
/// or cancelled run is an error exit.
fn print_run(v: &Value, json_out: bool) -> Result<(), Exit> {
    if json_out {
        print_json(v);
    }
    let env: RunEnvelope = serde_json::from_value(v.clone())
        .map_err(|e| anyhow::anyhow!("unexpected run envelope from hearth: {e}"))?;
    match env.status {
        RunStatus::Succeeded => {
            if !json_out {
                println!("{}", env.output.map(|o| o.text).unwrap_or_default());
            }
            Ok(())
        }
        RunStatus::Failed => {
            let e = env
                .error
                .map(|e| format!("{} ({})", e.message, e.code))
                .unwrap_or_default();
            Err(anyhow::anyhow!("run {} failed: {e}", env.run_id).into())
        }
        RunStatus::Cancelled => Err(anyhow::anyhow!("run {} was cancelled", env.run_id).into()),
        RunStatus::AwaitingConfirmation => {
            if !json_out {
                let (summary, token) = env
                    .confirmation
                    .map(|c| (c.summary, c.token))
                    .unwrap_or_default();
                println!("run {} awaits confirmation: {summary}", env.run_id);
                match token {
                    Some(t) => println!("answer with: hearth confirm {t}   (or: hearth deny {t})"),
                    // After a restart only the token's hash is kept; the
                    // token shown when it was asked still works.
                    None => println!("answer with the token given when it was asked"),
                }
            }
            Ok(())
        }
        RunStatus::Queued | RunStatus::Running => {
            if !json_out {
                println!("{} {}", env.run_id, env.status.as_str());
            }
            Ok(())
        }
    }
}

/// Runs a client command.
pub async fn run(g: &Global, command: Command) -> Result<(), Exit> {
    let api = Api::new(g)?;
    match command {
        Command::Message {
            text,
            thread,
            user,
            wait,
            timeout,
            idempotency_key,
        } => {
            let mut body = json!({
                "text": text, "thread_key": thread, "user_key": user, "source": "cli",
                "wait": wait, "wait_timeout_secs": timeout.min(600),
            });
            if let Some(k) = idempotency_key {
                body["idempotency_key"] = Value::String(k);
            }
            let (_, v) = api
                .send(api.request(Method::POST, "/v1/messages").json(&body))
                .await?;
            print_run(&v, g.json)
        }
        Command::Run { command } => match command {
            RunCommand::Get { run_id } => {
                let v = api.get(&format!("/v1/runs/{}", enc(&run_id))).await?;
                if g.json {
                    print_json(&v);
                    Ok(())
                } else {
                    print_run(&v, false)
                }
            }
            RunCommand::Wait { run_id } => {
                let v = api.get(&format!("/v1/runs/{}", enc(&run_id))).await?;
                let done = v["status"]
                    .as_str()
                    .and_then(RunStatus::parse)
                    .is_some_and(RunStatus::is_terminal);
                let v = if done {
                    v
                } else {
                    api.follow(&run_id).await?;
                    api.get(&format!("/v1/runs/{}", enc(&run_id))).await?
                };
                print_run(&v, g.json)
            }
            RunCommand::Cancel { run_id } => {
                let (_, v) = api
                    .send(api.request(Method::POST, &format!("/v1/runs/{}/cancel", enc(&run_id))))
                    .await?;
                if g.json {
                    print_json(&v);
                } else {
                    println!("{} {}", run_id, v["status"].as_str().unwrap_or("?"));
                }
                Ok(())
            }
        },
        Command::Model { command } => match command {
            ModelCommand::List => {
                let v = api.get("/v1/models").await?;
                if g.json {
                    print_json(&v);
                } else {
                    let default = v["default"].as_str().unwrap_or_default();
                    for m in v["models"].as_array().into_iter().flatten() {
                        let id = m["id"].as_str().unwrap_or_default();
                        let mark = if id == default { "*" } else { " " };
                        println!("{mark} {id}");
                    }
                }
                Ok(())
            }
            ModelCommand::Get { thread } => {
                let v = api
                    .get(&format!("/v1/threads/{}/runtime", enc(&thread)))
                    .await?;
                print_field(&v, "model", g.json);
                Ok(())
            }
            ModelCommand::Status { thread } => {
                let rt = api
                    .get(&format!("/v1/threads/{}/runtime", enc(&thread)))
                    .await?;
                let models = api.get("/v1/models").await?;
                let usage = api.get("/v1/usage?group_by=model&since=today").await?;
                let model = rt["model"].as_str().unwrap_or_default().to_owned();
                let caps = models["models"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|m| m["id"] == model.as_str())
                    .map(|m| m["capabilities"].clone())
                    .unwrap_or(Value::Null);
                let today = usage["rows"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|r| r["key"] == model.as_str())
                    .cloned()
                    .unwrap_or(Value::Null);
                if g.json {
                    print_json(
                        &json!({ "thread_key": thread, "model": model, "thinking": rt["thinking"],
                                        "capabilities": caps, "today": today }),
                    );
                    return Ok(());
                }
                println!("thread        {thread}");
                println!("model         {model}");
                println!("thinking      {}", rt["thinking"].as_str().unwrap_or("off"));
                let on: Vec<&str> = caps
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| v.as_bool() == Some(true))
                    .map(|(k, _)| k.as_str())
                    .collect();
                println!(
                    "capabilities  {}",
                    if on.is_empty() {
                        "none".to_owned()
                    } else {
                        on.join(", ")
                    }
                );
                if today.is_null() {
                    println!("today         no calls");
                } else {
                    println!(
                        "today         {} calls, {} in / {} out tokens, cost {}",
                        today["calls"],
                        today["input_tokens"],
                        today["output_tokens"],
                        cost_text(&today)
                    );
                }
                Ok(())
            }
            ModelCommand::Set { model, thread } => {
                let v = api
                    .put(
                        &format!("/v1/threads/{}/model", enc(&thread)),
                        json!({ "model": model }),
                    )
                    .await?;
                print_field(&v, "model", g.json);
                Ok(())
            }
        },
        Command::Thinking { command } => match command {
            ThinkingCommand::Get { thread } => {
                let v = api
                    .get(&format!("/v1/threads/{}/runtime", enc(&thread)))
                    .await?;
                print_field(&v, "thinking", g.json);
                Ok(())
            }
            ThinkingCommand::Set { level, thread } => {
                let v = api
                    .put(
                        &format!("/v1/threads/{}/thinking", enc(&thread)),
                        json!({ "level": level }),
                    )
                    .await?;
                print_field(&v, "thinking", g.json);
                Ok(())
            }
        },
        Command::Incognito { state, thread } => {
            let path = format!("/v1/threads/{}/incognito", enc(&thread));
            let v = match state.as_str() {
                "status" => {
                    api.get(&format!("/v1/threads/{}/runtime", enc(&thread)))
                        .await?
                }
                s => api.put(&path, json!({ "enabled": s == "on" })).await?,
            };
            if g.json {
                print_json(&v);
            } else {
                let on = v["incognito"].as_bool().unwrap_or(false);
                println!("incognito {}", if on { "on" } else { "off" });
            }
            Ok(())
        }
        Command::Confirm { confirmation, user } => {
            answer(&api, g, &confirmation, &user, true).await
        }
        Command::Deny { confirmation, user } => answer(&api, g, &confirmation, &user, false).await,
        Command::New { thread } => {
            let (_, v) = api
                .send(api.request(
                    Method::DELETE,
                    &format!("/v1/threads/{}/session", enc(&thread)),
                ))
                .await?;
            if g.json {
                print_json(&v);
            } else {
                println!("new session on {thread}");
            }
            Ok(())
        }
        Command::Health => {
            let h = api.get("/healthz").await?;
            let (status, r) = {
                let resp = api
                    .request(Method::GET, "/readyz")
                    .send()
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot reach hearth: {}", e.without_url()))?;
                let s = resp.status();
                let v: Value = resp.json().await.unwrap_or(Value::Null);
                (s, v)
            };
            if g.json {
                print_json(&json!({ "health": h, "ready": r }));
            } else {
                println!(
                    "hearth {} {}",
                    h["version"].as_str().unwrap_or("?"),
                    r["status"].as_str().unwrap_or("unknown")
                );
            }
            if status.is_success() {
                Ok(())
            } else {
                Err(anyhow::anyhow!("hearth is not ready: {r}").into())
            }
        }
        Command::Usage { since, until, by } => {
            let mut path = format!("/v1/usage?group_by={}&since={}", enc(&by), enc(&since));
            if let Some(u) = until {
                path.push_str(&format!("&until={}", enc(&u)));
            }
            let v = api.get(&path).await?;
            if g.json {
                print_json(&v);
                return Ok(());
            }
            let rows = v["rows"].as_array().cloned().unwrap_or_default();
            if rows.is_empty() {
                println!("no model calls since {since}");
                return Ok(());
            }
            println!(
                "{:<36} {:>7} {:>12} {:>12} {:>12} {:>10}",
                by, "calls", "input", "output", "cached", "cost"
            );
            for r in rows {
                println!(
                    "{:<36} {:>7} {:>12} {:>12} {:>12} {:>10}",
                    r["key"].as_str().unwrap_or_default(),
                    r["calls"],
                    r["input_tokens"],
                    r["output_tokens"],
                    r["cached_tokens"],
                    cost_text(&r)
                );
            }
            Ok(())
        }
        Command::Permissions { command } => permissions(&api, command, g.json).await,
        Command::Audit { limit } => {
            let v = api.get(&format!("/v1/audit?limit={limit}")).await?;
            if g.json {
                print_json(&v);
                return Ok(());
            }
            let events = v["events"].as_array().cloned().unwrap_or_default();
            if events.is_empty() {
                println!("no audit events");
            }
            for e in events {
                let s = |k: &str| e[k].as_str().unwrap_or("-").to_owned();
                println!(
                    "{}  {}  {}  {}  {}  {}  {}",
                    s("at"),
                    s("actor"),
                    s("action"),
                    s("target"),
                    s("outcome"),
                    s("capability"),
                    s("scope")
                );
            }
            Ok(())
        }
        Command::Serve { .. }
        | Command::Token { .. }
        | Command::Secrets { .. }
        | Command::Memory { .. } => Ok(()),
    }
}

/// `hearth permissions ...`
async fn permissions(api: &Api, command: PermissionsCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        PermissionsCommand::Grant {
            subject,
            capability,
            scope,
        } => {
            let body = json!({ "subject": subject, "capability": capability, "scope": scope });
            let (_, v) = api
                .send(
                    api.request(Method::POST, "/v1/permissions/grants")
                        .json(&body),
                )
                .await?;
            if json_out {
                print_json(&v);
            } else {
                println!("granted {capability} to {subject} in {scope}");
            }
        }
        PermissionsCommand::Revoke {
            subject,
            capability,
            scope,
        } => {
            let body = json!({ "subject": subject, "capability": capability, "scope": scope });
            let (_, v) = api
                .send(
                    api.request(Method::DELETE, "/v1/permissions/grants")
                        .json(&body),
                )
                .await?;
            if json_out {
                print_json(&v);
            } else {
                println!("revoked {capability} from {subject} in {scope}");
            }
        }
        PermissionsCommand::List { scope } => {
            let v = api
                .get(&format!("/v1/permissions?scope={}", enc(&scope)))
                .await?;
            if json_out {
                print_json(&v);
                return Ok(());
            }
            println!(
                "scope {}, default preset {}",
                v["scope"].as_str().unwrap_or_default(),
                v["default_preset"].as_str().unwrap_or_default()
            );
            let grants = v["grants"].as_array().cloned().unwrap_or_default();
            if grants.is_empty() {
                println!("no grants");
            }
            for g in grants {
                println!(
                    "{:<40} {:<28} {}",
                    g["subject"].as_str().unwrap_or_default(),
                    g["capability"].as_str().unwrap_or_default(),
                    g["granted_at"].as_str().unwrap_or_default()
                );
            }
        }
        PermissionsCommand::Check {
            user_key,
            capability,
            scope,
        } => {
            let v = api
                .get(&format!(
                    "/v1/permissions/check?user_key={}&capability={}&scope={}",
                    enc(&user_key),
                    enc(&capability),
                    enc(&scope)
                ))
                .await?;
            if json_out {
                print_json(&v);
            } else if v["allowed"].as_bool() == Some(true) {
                println!("allowed (via {})", v["via"].as_str().unwrap_or("?"));
            } else {
                println!("denied");
            }
        }
    }
    Ok(())
}

/// A usage row's cost for people: dollars, or why there is none.
fn cost_text(row: &Value) -> String {
    match row["cost_usd"].as_f64() {
        Some(c) => format!("${c:.4}"),
        None if row["calls"] == row["untracked_calls"] => "not tracked".to_owned(),
        None => "not priced".to_owned(),
    }
}

/// Answers a confirmation as `user`.
async fn answer(api: &Api, g: &Global, token: &str, user: &str, approve: bool) -> Result<(), Exit> {
    let (_, v) = api
        .send(
            api.request(Method::POST, &format!("/v1/confirmations/{}", enc(token)))
                .json(&json!({ "user_key": user, "approve": approve })),
        )
        .await?;
    if g.json {
        print_json(&v);
    } else {
        let verb = if approve { "approved" } else { "denied" };
        println!(
            "{verb}; run {} is {}",
            v["run_id"].as_str().unwrap_or("?"),
            v["status"].as_str().unwrap_or("?")
        );
    }
    Ok(())
}

fn print_field(v: &Value, field: &str, json_out: bool) {
    if json_out {
        print_json(v);
    } else {
        println!("{}", v[field].as_str().unwrap_or_default());
    }
}
