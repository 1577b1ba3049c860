//! `/mcp`: the MCP server on the main listener, spoken to as raw JSON-RPC
//! over streamable HTTP (so the wire itself is what is checked), with the
//! fake OpenAI-compatible provider answering runs.

use hearth_server::{AllowedHosts, Routes, ServeLimits, hash_token};
use hearth_store::{NewMemory, NewToken};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::harness::{self, Server, code};

/// A server whose runs are answered by `fake`, `/mcp` accepting `hosts`.
async fn start(fake: &FakeOpenAi, hosts: AllowedHosts) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    let toml = format!(
        "[llm]\ndefault_model = \"fake/fake-model\"\n\
         [llm.providers.fake]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"fake-model\"]\n",
        fake.base_url()
    );
    let runtime = harness::runtime(dir.path(), &toml, &store, |b| b).await;
    let app = hearth_server::with_state(
        Routes::build().with_allowed_hosts(hosts),
        harness::state(runtime),
        1 << 20,
    );
    Server::serve(app, ServeLimits::default(), store, dir).await
}

async fn fake() -> FakeOpenAi {
    FakeOpenAi::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// One MCP client session over HTTP.
struct Client<'a> {
    server: &'a Server,
    token: Option<String>,
    session: Option<String>,
    next_id: u64,
}

/// What one POST brought back.
struct Answer {
    status: u16,
    session: Option<String>,
    /// The JSON-RPC messages of the body (a JSON body or SSE `data:`).
    messages: Vec<Value>,
    body: String,
}

impl<'a> Client<'a> {
    fn new(server: &'a Server) -> Self {
        Self {
            server,
            token: None,
            session: None,
            next_id: 1,
        }
    }

    async fn post_with(&self, body: &Value, headers: &[(&str, &str)]) -> Answer {
        let mut rb = self
            .server
            .http
            .post(self.server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(body);
        if let Some(t) = &self.token {
            rb = rb.bearer_auth(t);
        }
        if let Some(s) = &self.session {
            rb = rb
                .header("mcp-session-id", s)
                .header("mcp-protocol-version", "2025-06-18");
        }
        for (k, v) in headers {
            rb = rb.header(*k, *v);
        }
        let r = rb.send().await.unwrap();
        let status = r.status().as_u16();
        let session = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_owned());
        let sse = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        let body = r.text().await.unwrap();
        let messages = if sse {
            body.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(|d| serde_json::from_str(d).unwrap())
                .collect()
        } else if body.trim_start().starts_with('{') && status == 200 {
            vec![serde_json::from_str(&body).unwrap()]
        } else {
            Vec::new()
        };
        Answer {
            status,
            session,
            messages,
            body,
        }
    }

    /// A request; returns its one answer message.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let a = self
            .post_with(
                &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
                &[],
            )
            .await;
        assert_eq!(a.status, 200, "{method}: {}", a.body);
        let answer: Vec<&Value> = a.messages.iter().filter(|m| m["id"] == json!(id)).collect();
        assert_eq!(answer.len(), 1, "{method}: {}", a.body);
        answer[0].clone()
    }

    async fn initialize(&mut self) -> Value {
        let a = self
            .post_with(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "hearth-test", "version": "0"}
                }}),
                &[],
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        self.session = a.session;
        assert!(self.session.is_some(), "no session id");
        let note = self
            .post_with(
                &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                &[],
            )
            .await;
        assert_eq!(note.status, 202, "{}", note.body);
        a.messages[0].clone()
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let m = self
            .call("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        m["result"].clone()
    }
}

#[tokio::test]
async fn initialize_offers_exactly_hearths_tools() {
    let fake = fake().await;
    let s = start(&fake, AllowedHosts::default()).await;
    let mut c = Client::new(&s);
    let init = c.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "hearth");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );

    let pong = c.call("ping", json!({})).await;
    assert_eq!(pong["result"], json!({}));

    let list = c.call("tools/list", json!({})).await;
    let tools = list["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "send_message",
            "get_run",
            "list_threads",
            "memory_search",
            "list_tools"
        ]
    );
    let send = &tools[0];
    assert_eq!(send["inputSchema"]["required"], json!(["text"]));
    assert_eq!(
        send["inputSchema"]["properties"]["wait"]["default"],
        json!(true)
    );
    assert_eq!(tools[1]["annotations"]["readOnlyHint"], json!(true));
}

#[tokio::test]
async fn send_message_answers_with_the_text_and_the_run_envelope() {
    let fake = fake().await;
    fake.push(Reply::text("the answer from the fake"));
    let s = start(&fake, AllowedHosts::default()).await;
    let mut c = Client::new(&s);
    c.initialize().await;

    let r = c
        .tool(
            "send_message",
            json!({"thread_key": "mcp:t1", "text": "what is it?"}),
        )
        .await;
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(
        r["content"],
        json!([{"type": "text", "text": "the answer from the fake"}])
    );
    let env = &r["structuredContent"];
    assert_eq!(env["status"], "succeeded");
    assert_eq!(env["thread_key"], "mcp:t1");
    assert_eq!(env["user_key"], "mcp:user:local");
    assert_eq!(env["output"]["text"], "the answer from the fake");
    // The provider saw the message the MCP client sent.
    let asked = fake.requests();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].to_string().contains("what is it?"), "{}", asked[0]);

    let run_id = env["run_id"].as_str().unwrap();
    let got = c.tool("get_run", json!({"run_id": run_id})).await;
    assert_eq!(&got["structuredContent"], env);

    let threads = c.tool("list_threads", json!({})).await;
    let listed = &threads["structuredContent"]["threads"][0];
    assert_eq!(listed["thread_key"], "mcp:t1");
    assert_eq!(listed["last_run_id"], run_id);

    // Without waiting, the run comes back queued or running, and finishes.
    let r = c
        .tool(
            "send_message",
            json!({"thread_key": "mcp:t1", "text": "again", "wait": false}),
        )
        .await;
    let status = r["structuredContent"]["status"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        ["queued", "running", "succeeded"].contains(&status.as_str()),
        "{r}"
    );
}

#[tokio::test]
async fn bad_calls_are_errors_the_caller_can_read() {
    let fake = fake().await;
    let s = start(&fake, AllowedHosts::default()).await;
    let mut c = Client::new(&s);
    c.initialize().await;

    let unknown = c
        .call("tools/call", json!({"name": "rm_rf", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], json!(-32602), "{unknown}");

    let r = c.tool("send_message", json!({"txt": "typo"})).await;
    assert_eq!(r["isError"], json!(true));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{r}"
    );

    let r = c.tool("get_run", json!({"run_id": "run_missing"})).await;
    assert_eq!(r["isError"], json!(true));
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("run_missing"),
        "{r}"
    );
}

#[tokio::test]
async fn the_caller_is_the_token_holder_and_sees_only_their_memory() {
    let fake = fake().await;
    fake.push(Reply::text("hi laptop"));
    let s = start(&fake, AllowedHosts::default()).await;
    s.store
        .create_token(NewToken {
            id: "tok_1".into(),
            name: "laptop".into(),
            hash_hex: hash_token("secret-1"),
            created_at: 1,
            user_key: None,
        })
        .await
        .unwrap();
    for (user, text) in [
        ("mcp:user:laptop", "likes green tea"),
        ("mcp:user:other", "likes black tea"),
    ] {
        s.store
            .save_memory(NewMemory {
                user_key: user.into(),
                thread_key: None,
                text: text.into(),
                run_id: None,
                at: hearth_core::now_ms(),
            })
            .await
            .unwrap();
    }

    // With a token existing, no token (or a wrong one) is refused before MCP.
    let mut anon = Client::new(&s);
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let a = anon.post_with(&init, &[]).await;
    assert_eq!(a.status, 401, "{}", a.body);
    assert_eq!(
        code(&serde_json::from_str(&a.body).unwrap()),
        "unauthorized"
    );
    anon.token = Some("wrong".into());
    assert_eq!(anon.post_with(&init, &[]).await.status, 401);

    let mut c = Client::new(&s);
    c.token = Some("secret-1".into());
    c.initialize().await;
    let r = c.tool("send_message", json!({"text": "hello"})).await;
    assert_eq!(r["structuredContent"]["user_key"], "mcp:user:laptop", "{r}");
    assert_eq!(r["structuredContent"]["thread_key"], "mcp:default");

    let found = c.tool("memory_search", json!({"query": "tea"})).await;
    let texts: Vec<&str> = found["structuredContent"]["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["likes green tea"]);
}

#[tokio::test]
async fn other_hosts_and_origins_get_403() {
    let fake = fake().await;
    let s = start(&fake, AllowedHosts::new(None, &["hearth.lan".into()])).await;
    let c = Client::new(&s);
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let port = s.addr.port().to_string();
    let another_port = format!("http://127.0.0.1:{}", s.addr.port().wrapping_add(1));
    for (headers, want) in [
        (vec![("host", "evil.example")], "forbidden_host"),
        (vec![("host", "evil.example:7777")], "forbidden_host"),
        (vec![("origin", "http://evil.example")], "forbidden_origin"),
        (vec![("origin", "null")], "forbidden_origin"),
        (
            vec![("origin", "null"), ("sec-fetch-site", "same-origin")],
            "forbidden_origin",
        ),
        // Another local program's page is another origin.
        (vec![("origin", another_port.as_str())], "forbidden_origin"),
        (
            vec![("host", "hearth.lan"), ("origin", "https://evil.example")],
            "forbidden_origin",
        ),
    ] {
        let a = c.post_with(&ping, &headers).await;
        assert_eq!(a.status, 403, "{headers:?}: {}", a.body);
        assert_eq!(code(&serde_json::from_str(&a.body).unwrap()), want);
    }
    // MCP asks for the Origin check on every request, GETs (the SSE
    // stream) and DELETEs (ending a session) included.
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = s
            .http
            .request(method.clone(), s.url("/mcp"))
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{method}");
    }
    // Allowed names pass the check (and reach MCP, which wants a session).
    let own = format!("http://127.0.0.1:{port}");
    for headers in [
        vec![("host", "localhost:7777")],
        vec![("host", "hearth.lan"), ("origin", "https://hearth.lan")],
        vec![("origin", own.as_str())],
    ] {
        let a = c.post_with(&ping, &headers).await;
        assert_ne!(a.status, 403, "{headers:?}: {}", a.body);
    }
}

#[tokio::test]
async fn a_post_that_is_not_json_is_415() {
    let fake = fake().await;
    let s = start(&fake, AllowedHosts::default()).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    for ct in ["text/plain", "application/x-www-form-urlencoded"] {
        let r = s
            .http
            .post(s.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("content-type", ct)
            .body(ping.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 415, "{ct}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(code(&v), "unsupported_media_type", "{v}");
    }
}
