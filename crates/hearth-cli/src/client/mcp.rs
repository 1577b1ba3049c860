//! `hearth mcp list|call|probe`: the MCP client, for debugging.
//!
//! `list` and `call` ask the running hearth over HTTP (`GET /v1/mcp/servers`,
//! `POST /v1/mcp/servers/{name}/call`), so they see the servers hearth
//! started. `probe <url>` connects to a streamable HTTP MCP server itself
//! (no hearth needed), lists its tools and calls the ones asked for; the
//! conformance suite's client mode runs it with the scenario's URL last.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal, Write};

use hearth_core::{RunEnvelope, RunStatus};
use hearth_server::routes::mcp::McpServerList;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Api, enc};
use crate::Exit;
use crate::cli::{Global, McpCommand};

/// The body of `POST /v1/mcp/servers/{name}/call`.
#[derive(serde::Serialize)]
struct CallBody<'a> {
    tool: &'a str,
    arguments: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_key: Option<&'a str>,
}

/// Parses a tool's arguments: a JSON object, `{}` when empty.
fn arguments(raw: &str) -> Result<Map<String, Value>, Exit> {
    if raw.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(anyhow::anyhow!(
            "the arguments must be a JSON object, like '{{\"path\": \"a.txt\"}}'"
        )
        .into()),
        Err(e) => Err(anyhow::anyhow!("the arguments are not valid JSON: {e}").into()),
    }
}

/// Runs `hearth mcp <command>` (all but `serve`).
pub async fn run(g: &Global, command: McpCommand) -> Result<(), Exit> {
    match command {
        McpCommand::List => list(g).await,
        McpCommand::Call {
            server,
            tool,
            args,
            yes,
            user,
        } => call(g, &server, &tool, &args, yes, user.as_deref()).await,
        McpCommand::Probe {
            url,
            call,
            call_all,
            args,
        } => probe(g, &url, call, call_all, &args).await,
        McpCommand::Serve => Err(anyhow::anyhow!(
            "internal: `mcp serve` reached the MCP client; please report this"
        )
        .into()),
    }
}

async fn list(g: &Global) -> Result<(), Exit> {
    let api = Api::new(g)?;
    let servers: McpServerList = api.get("/v1/mcp/servers").await?;
    if g.json {
        // Re-read as plain JSON: the list type only serialises.
        crate::output::print_json(&servers);
        return Ok(());
    }
    if servers.servers.is_empty() {
        println!("no MCP servers are configured ([mcp.servers.<name>] in hearth.toml)");
        return Ok(());
    }
    let rows: Vec<Vec<String>> = servers
        .servers
        .iter()
        .map(|s| {
            vec![
                s.name.clone(),
                s.transport.to_owned(),
                s.state.to_owned(),
                s.tools.to_string(),
                s.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    println!(
        "{}",
        crate::output::table(
            &["SERVER", "TRANSPORT", "STATE", "TOOLS", "LAST ERROR"],
            &[false, false, false, true, false],
            &rows
        )
    );
    Ok(())
}

async fn call(
    g: &Global,
    server: &str,
    tool: &str,
    args: &str,
    yes: bool,
    user: Option<&str>,
) -> Result<(), Exit> {
    let api = Api::new(g)?;
    let body = CallBody {
        tool,
        arguments: arguments(args)?,
        user_key: user,
    };
    let mut env: RunEnvelope = api
        .post(&format!("/v1/mcp/servers/{}/call", enc(server)), &body)
        .await?;
    if env.status == RunStatus::AwaitingConfirmation {
        env = confirm(&api, g, env, yes).await?;
    } else if !env.status.is_terminal() {
        env = super::runs::wait(&api, &env.run_id, None).await?;
    }
    print_call(g, &env)
}

/// Answers the call's confirmation (with `--yes`, or as the person at the
/// terminal says) and waits for the call's end. Without a terminal and
/// without `--yes`, says how to answer and exits 3.
async fn confirm(api: &Api, g: &Global, env: RunEnvelope, yes: bool) -> Result<RunEnvelope, Exit> {
    let (summary, token) = env
        .confirmation
        .as_ref()
        .map(|c| (c.summary.clone(), c.token.clone()))
        .unwrap_or_default();
    let Some(token) = token else {
        return Err(Exit::pending(anyhow::anyhow!(
            "run {} awaits a confirmation whose token this answer does not carry; answer with the token given when it was asked",
            env.run_id
        )));
    };
    let approve = if yes {
        true
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        eprint!("hearth asks before it runs this: {summary}\nrun it? [y/N] ");
        std::io::stderr().flush().map_err(anyhow::Error::new)?;
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(anyhow::Error::new)?;
        matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
    } else {
        if g.json {
            crate::output::print_json(&env);
        } else {
            println!("run {} awaits confirmation: {summary}", env.run_id);
            println!(
                "answer with: hearth confirm {token} --user {} --wait   (or: hearth deny {token} --user {})",
                env.user_key, env.user_key
            );
        }
        return Err(Exit::pending(anyhow::anyhow!(
            "the call waits for a confirmation (pass --yes to approve it when calling)"
        )));
    };
    let _: RunEnvelope = api
        .post(
            &format!("/v1/confirmations/{}", enc(&token)),
            &json!({ "user_key": env.user_key, "approve": approve }),
        )
        .await?;
    super::runs::wait(api, &env.run_id, Some(&token)).await
}

/// Prints the call's result: its text (or JSON) on success, the run with
/// `--json`; a failed call is an error exit.
fn print_call(g: &Global, env: &RunEnvelope) -> Result<(), Exit> {
    if g.json {
        crate::output::print_json(env);
    }
    match env.status {
        RunStatus::Succeeded => {
            if !g.json {
                let text = env.output.as_ref().map_or("", |o| o.text.as_str());
                match serde_json::from_str::<Value>(text) {
                    Ok(Value::Object(map)) if map.len() == 1 && map["text"].is_string() => {
                        let text = map["text"].as_str().unwrap_or_default();
                        println!("{}", crate::output::shown(text));
                    }
                    Ok(v) => crate::output::print_json(&v),
                    Err(_) => println!("{}", crate::output::shown(text)),
                }
            }
            Ok(())
        }
        RunStatus::Failed => {
            let (code, message) = env
                .error
                .as_ref()
                .map(|e| (e.code.as_str(), e.message.as_str()))
                .unwrap_or(("failed", "the call failed"));
            Err(anyhow::anyhow!("the call failed ({code}): {message}").into())
        }
        RunStatus::Cancelled => {
            Err(anyhow::anyhow!("the call (run {}) was cancelled", env.run_id).into())
        }
        RunStatus::AwaitingConfirmation | RunStatus::Queued | RunStatus::Running => {
            Err(Exit::pending(anyhow::anyhow!(
                "run {id} is still {status}; follow it with `hearth run wait {id}`",
                id = env.run_id,
                status = env.status.as_str()
            )))
        }
    }
}

/// Prints a `tools/call` result: the JSON with `--json`, else its text blocks.
fn print_result(g: &Global, result: &Value) {
    if g.json {
        crate::output::print_json(result);
        return;
    }
    let (text, _) = hearth_mcp::render::render(result, usize::MAX);
    println!("{}", crate::output::shown(&text));
}

/// A tool as `tools/list` gives it, the fields `probe` prints.
#[derive(Deserialize)]
struct Listed {
    name: String,
    #[serde(default)]
    description: Option<String>,
}

/// Arguments that satisfy `schema`'s required properties with a plain
/// value of each one's type (for `--call-all`, which only exercises the
/// protocol).
fn example_arguments(schema: &Value) -> Map<String, Value> {
    let mut args = Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let Some(name) = name.as_str() else { continue };
        let value = match schema["properties"][name]["type"].as_str() {
            Some("number" | "integer") => json!(1),
            Some("boolean") => json!(true),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("hearth"),
        };
        args.insert(name.to_owned(), value);
    }
    args
}

async fn probe(
    g: &Global,
    url: &str,
    calls: Vec<String>,
    call_all: bool,
    args: &str,
) -> Result<(), Exit> {
    let http = hearth_http::client_builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .build()
        .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))?;
    let target = hearth_mcp::Target::Http {
        url: url.to_owned(),
        headers: BTreeMap::new(),
        client: http,
    };
    let conn = hearth_mcp::connect("probe", &target)
        .await
        .map_err(|e| anyhow::anyhow!("{url}: {e}"))?;
    let tools = conn
        .client
        .list_tools()
        .await
        .map_err(|e| anyhow::anyhow!("listing the tools of {url}: {e}"))?;
    let listed: Vec<Listed> = tools
        .iter()
        .filter_map(|t| serde_json::from_value(t.clone()).ok())
        .collect();
    let mut results = Vec::new();
    let mut plan: Vec<(String, Map<String, Value>)> = Vec::new();
    for name in &calls {
        plan.push((name.clone(), arguments(args)?));
    }
    if call_all {
        for t in &tools {
            if let Some(name) = t.get("name").and_then(Value::as_str) {
                plan.push((name.to_owned(), example_arguments(&t["inputSchema"])));
            }
        }
    }
    for (name, arguments) in plan {
        let result = conn
            .client
            .call_tool(&name, arguments)
            .await
            .map_err(|e| anyhow::anyhow!("calling {name}: {e}"))?;
        results.push(json!({ "tool": name, "result": result }));
    }
    if g.json {
        crate::output::print_json(&json!({ "tools": tools, "calls": results }));
    } else {
        for t in &listed {
            println!("{}\t{}", t.name, t.description.as_deref().unwrap_or(""));
        }
        for r in &results {
            println!("--- {}", r["tool"].as_str().unwrap_or(""));
            print_result(g, &r["result"]);
        }
    }
    Ok(())
}
