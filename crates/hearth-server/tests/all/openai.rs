//! The OpenAI-compatible surface over HTTP, with the fake OpenAI-compatible
//! provider behind hearth: shapes, streaming, history, threads, refusals.

use hearth_server::ServeLimits;
use hearth_store::NewToken;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::ToolRegistry;
use serde_json::{Value, json};

use crate::harness::{self, Server};

pub(crate) struct Setup {
    pub(crate) s: Server,
    pub(crate) fake: FakeOpenAi,
}

/// hearth on 127.0.0.1 whose default model `fake/fake-model` is the fake.
pub(crate) async fn setup() -> Setup {
    let fake = FakeOpenAi::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let toml = format!(
        "[llm]\ndefault_model = \"fake/fake-model\"\n[llm.providers.fake]\n\
         type = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"fake-model\", \"other-model\"]\n",
        fake.base_url()
    );
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    // The memory tools give a write-class tool that asks for confirmation.
    let mut tools = ToolRegistry::with_builtins();
    for t in hearth_tools::memory::tools(store.clone()) {
        tools.register(t);
    }
    let runtime = harness::runtime(dir.path(), &toml, &store, |b| b.tools(tools)).await;
    let app = hearth_server::router(harness::state(runtime), 1 << 20);
    let s = Server::serve(app, ServeLimits::default(), store, dir).await;
    Setup { s, fake }
}

impl Setup {
    pub(crate) async fn chat(&self, body: Value) -> (u16, reqwest::header::HeaderMap, Value) {
        self.s
            .send(
                self.s
                    .http
                    .post(self.s.url("/openai/v1/chat/completions"))
                    .json(&body),
            )
            .await
    }

    /// A run's envelope from `/v1/runs/{run_id}`.
    pub(crate) async fn run(&self, run_id: &str) -> Value {
        let (status, _, run) = self
            .s
            .send(self.s.http.get(self.s.url(&format!("/v1/runs/{run_id}"))))
            .await;
        assert_eq!(status, 200, "{run}");
        run
    }

    /// A streamed completion: the content it carried, and its run's id.
    pub(crate) async fn stream(&self, body: Value) -> (String, String) {
        let r = self
            .s
            .http
            .post(self.s.url("/openai/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let run_id = r.headers()["x-hearth-run-id"].to_str().unwrap().to_owned();
        let datas = datas(&r.text().await.unwrap());
        assert_eq!(
            datas.last().map(String::as_str),
            Some("[DONE]"),
            "{datas:?}"
        );
        let text = datas[..datas.len() - 1]
            .iter()
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .filter_map(|c| {
                c["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        (text, run_id)
    }

    /// The messages of the last request the fake provider got, as (role, text).
    fn last_provider_messages(&self) -> Vec<(String, String)> {
        let reqs = self.fake.requests();
        let last = reqs.last().expect("the provider got no request");
        last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect()
    }
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(r, t)| ((*r).to_owned(), (*t).to_owned()))
        .collect()
}

/// The `data:` payloads of an SSE body, in order.
pub(crate) fn datas(body: &str) -> Vec<String> {
    body.split("\n\n")
        .flat_map(|block| block.lines())
        .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn models_lists_hearth_and_each_configured_model() {
    let t = setup().await;
    let (status, _, v) = t.s.send(t.s.http.get(t.s.url("/openai/v1/models"))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["object"], "list");
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    // The echo provider is always there beside the configured ones.
    assert_eq!(
        ids,
        [
            "hearth",
            "hearth/echo/echo",
            "hearth/fake/fake-model",
            "hearth/fake/other-model"
        ]
    );
    assert_eq!(
        v["data"][2],
        json!({"id": "hearth/fake/fake-model", "object": "model", "created": 0, "owned_by": "fake"})
    );
}

#[tokio::test]
async fn a_completion_uses_the_requests_messages_as_history() {
    let t = setup().await;
    let (status, headers, v) = t
        .chat(
            json!({"model": "hearth", "user": "alice", "temperature": 0.3, "messages": [
                {"role": "system", "content": "answer in French"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "salut"},
                {"role": "user", "content": "how are you"},
            ]}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let run_id = headers["x-hearth-run-id"].to_str().unwrap().to_owned();
    assert_eq!(v["id"], format!("chatcmpl-{run_id}"));
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "hearth");
    assert_eq!(
        v["choices"],
        json!([{"index": 0, "message": {"role": "assistant", "content": "echo: how are you", "refusal": null},
                "logprobs": null, "finish_reason": "stop"}])
    );
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19})
    );
    assert_eq!(
        t.last_provider_messages(),
        pairs(&[
            ("system", "be brief"),
            ("user", "answer in French\n\nhi"),
            ("assistant", "salut"),
            ("user", "how are you"),
        ])
    );
    // Stored on the user's OpenAI thread, as the user.
    let (_, _, run) =
        t.s.send(t.s.http.get(t.s.url(&format!("/v1/runs/{run_id}"))))
            .await;
    assert_eq!(
        (&run["thread_key"], &run["user_key"]),
        (&json!("openai:alice"), &json!("openai:user:alice"))
    );

    // A second conversation of the same user does not see the first: the
    // request's messages are the whole history.
    let (status, _, v) = t
        .chat(json!({"model": "hearth", "user": "alice", "messages": [{"role": "user", "content": "new chat"}]}))
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        t.last_provider_messages(),
        pairs(&[("system", "be brief"), ("user", "new chat")])
    );
}

#[tokio::test]
async fn a_stream_sends_chunks_then_usage_then_done() {
    let t = setup().await;
    let r =
        t.s.http
            .post(t.s.url("/openai/v1/chat/completions"))
            .json(&json!({"model": "hearth/fake/fake-model", "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "stream me"}]}))
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let datas = datas(&r.text().await.unwrap());
    assert_eq!(
        datas.last().map(String::as_str),
        Some("[DONE]"),
        "{datas:?}"
    );
    let chunks: Vec<Value> = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk", "{c}");
        assert_eq!(c["model"], "hearth/fake/fake-model", "{c}");
        assert_eq!(c["id"], chunks[0]["id"], "{c}");
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "echo: stream me");
    let (usage, body) = chunks.split_last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19})
    );
    let (finish, deltas) = body.split_last().unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(
        deltas
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null() && c["usage"].is_null())
    );
    assert_eq!(t.fake.requests().last().unwrap()["model"], "fake-model");
}

#[tokio::test]
async fn without_include_usage_a_stream_has_no_usage_at_all() {
    let t = setup().await;
    let r = t
        .s
        .http
        .post(t.s.url("/openai/v1/chat/completions"))
        .json(&json!({"model": "hearth", "stream": true, "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    let datas = datas(&r.text().await.unwrap());
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
    for d in &datas[..datas.len() - 1] {
        let c: Value = serde_json::from_str(d).unwrap();
        assert!(c.get("usage").is_none(), "{c}");
        assert_eq!(c["choices"].as_array().unwrap().len(), 1, "{c}");
    }
}

#[tokio::test]
async fn a_named_thread_keeps_its_history_and_gets_only_the_last_message() {
    let t = setup().await;
    let (status, _, _) =
        t.s.send(
            t.s.http
                .post(t.s.url("/v1/messages"))
                .json(&json!({"text": "my name is Ada", "thread_key": "api:ada", "wait": true})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, headers, v) =
        t.s.send(
            t.s.http
                .post(t.s.url("/openai/v1/chat/completions"))
                .header("X-Hearth-Thread", "api:ada")
                .json(&json!({"model": "hearth", "messages": [
                    {"role": "user", "content": "what the client remembers"},
                    {"role": "assistant", "content": "ignored"},
                    {"role": "user", "content": "what is my name?"},
                ]})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        t.last_provider_messages(),
        pairs(&[
            ("system", "be brief"),
            ("user", "my name is Ada"),
            ("assistant", "echo: my name is Ada"),
            ("user", "what is my name?"),
        ])
    );
    let run_id = headers["x-hearth-run-id"].to_str().unwrap();
    let (_, _, run) =
        t.s.send(t.s.http.get(t.s.url(&format!("/v1/runs/{run_id}"))))
            .await;
    assert_eq!(run["thread_key"], "api:ada");

    // A title request from the same client leaves the named thread alone.
    let count = |v: &Value| v["message_count"].as_u64().unwrap();
    let url = t.s.url("/v1/threads/api:ada/runtime");
    let before = count(&t.s.send(t.s.http.get(&url)).await.2);
    let (status, headers, v) =
        t.s.send(
            t.s.http
                .post(t.s.url("/openai/v1/chat/completions"))
                .header("X-Hearth-Thread", "api:ada")
                .json(&json!({"model": "hearth", "messages": [{"role": "user",
                    "content": "### Task:\nGenerate a concise, 3-5 word title for the chat."}]})),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(count(&t.s.send(t.s.http.get(&url)).await.2), before);
    let run_id = headers["x-hearth-run-id"].to_str().unwrap();
    let thread = t.run(run_id).await["thread_key"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        thread.starts_with("openai:anonymous:") && thread.ends_with(":tasks"),
        "{thread}"
    );
}

#[tokio::test]
async fn client_tools_and_unsupported_input_are_400_naming_the_field() {
    let t = setup().await;
    let user = json!([{"role": "user", "content": "x"}]);
    let cases = [
        (
            json!({"tools": [{"type": "function", "function": {"name": "f"}}]}),
            "tools",
        ),
        (json!({"functions": [{"name": "f"}]}), "functions"),
        (json!({"tool_choice": "required"}), "tool_choice"),
        (json!({"n": 3}), "n"),
    ];
    for (extra, param) in cases {
        let mut body = json!({"model": "hearth", "messages": user});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, _, v) = t.chat(body).await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        assert_eq!(v["error"]["param"], param, "{v}");
        assert!(v["error"].get("code").is_some() && v["error"]["message"].is_string());
    }
    let (status, _, v) = t.chat(json!({"model": "gpt-4o", "messages": user})).await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (404, &json!("model_not_found")),
        "{v}"
    );
    let (status, _, v) = t
        .chat(json!({"model": "hearth/fake/nope", "messages": user}))
        .await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (404, &json!("model_not_found")),
        "{v}"
    );
    let (status, _, v) = t.chat(json!({"model": "hearth"})).await;
    assert_eq!(
        (status, &v["error"]["type"]),
        (400, &json!("invalid_request_error")),
        "{v}"
    );
    let (status, _, v) =
        t.s.send(
            t.s.http
                .post(t.s.url("/openai/v1/chat/completions"))
                .header("content-type", "application/json")
                .body("{"),
        )
        .await;
    assert_eq!(status, 400, "{v}");
    // Nothing reached the provider.
    assert!(t.fake.requests().is_empty());
    // Wrong method and unknown path answer in OpenAI's envelope too.
    let (status, headers, v) =
        t.s.send(t.s.http.get(t.s.url("/openai/v1/chat/completions")))
            .await;
    assert_eq!(
        (status, &v["error"]["code"]),
        (405, &json!("method_not_allowed")),
        "{v}"
    );
    assert_eq!(headers["allow"], "POST");
    let (status, _, v) =
        t.s.send(t.s.http.get(t.s.url("/openai/v1/embeddings")))
            .await;
    assert_eq!(
        (status, &v["error"]["type"]),
        (404, &json!("invalid_request_error")),
        "{v}"
    );
}

#[tokio::test]
async fn a_failed_run_is_an_openai_error_not_retried() {
    let t = setup().await;
    t.fake.push(Reply::http_error(
        400,
        json!({"error": {"message": "bad thing", "type": "invalid_request_error"}}),
    ));
    let (status, headers, v) = t
        .chat(json!({"model": "hearth", "messages": [{"role": "user", "content": "x"}]}))
        .await;
    assert_eq!(status, 500, "{v}");
    assert_eq!(v["error"]["type"], "server_error");
    assert!(
        v["error"]["code"]
            .as_str()
            .unwrap()
            .starts_with("provider_"),
        "{v}"
    );
    assert_eq!(headers["x-should-retry"], "false");

    t.fake.push(Reply::http_error(
        400,
        json!({"error": {"message": "bad thing", "type": "invalid_request_error"}}),
    ));
    let r = t
        .s
        .http
        .post(t.s.url("/openai/v1/chat/completions"))
        .json(&json!({"model": "hearth", "stream": true, "messages": [{"role": "user", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    let datas = datas(&r.text().await.unwrap());
    let err: Value = serde_json::from_str(&datas[datas.len() - 2]).unwrap();
    assert_eq!(err["error"]["type"], "server_error", "{datas:?}");
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn the_bearer_token_is_checked_as_on_v1() {
    let t = setup().await;
    let token = "hth_openai_test_token";
    // Open (loopback, no token yet): OpenAI clients always send a key, and any passes.
    let (status, _, v) =
        t.s.send(
            t.s.http
                .get(t.s.url("/openai/v1/models"))
                .bearer_auth("sk-anything"),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    t.s.store
        .create_token(NewToken {
            id: "tok_openai".into(),
            name: "t".into(),
            hash_hex: hearth_server::hash_token(token),
            created_at: 0,
            user_key: None,
        })
        .await
        .unwrap();
    let body = json!({"model": "hearth", "messages": [{"role": "user", "content": "x"}]});
    for (url, key) in [
        ("/openai/v1/models", None),
        ("/openai/v1/chat/completions", None),
        ("/openai/v1/chat/completions", Some("sk-anything")),
    ] {
        let mut rb = t.s.http.post(t.s.url(url)).json(&body);
        if let Some(k) = key {
            rb = rb.bearer_auth(k);
        }
        let (status, _, v) = t.s.send(rb).await;
        assert_eq!(status, 401, "{url}: {v}");
        assert_eq!(v["error"]["code"], "invalid_api_key");
        assert_eq!(v["error"]["type"], "invalid_request_error");
    }
    let (status, _, v) =
        t.s.send(
            t.s.http
                .get(t.s.url("/openai/v1/models"))
                .bearer_auth(token),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let (status, _, v) =
        t.s.send(
            t.s.http
                .post(t.s.url("/openai/v1/chat/completions"))
                .bearer_auth(token)
                .json(&body),
        )
        .await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test]
async fn a_confirmation_is_asked_and_answered_in_the_chat() {
    let t = setup().await;
    t.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    t.fake.push(Reply::text("forgotten"));
    let ask = json!([{"role": "user", "content": "forget the cat"}]);
    let (status, _, v) = t
        .chat(json!({"model": "hearth", "user": "carol", "messages": ask}))
        .await;
    assert_eq!(status, 200, "{v}");
    let prompt = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(prompt.contains("memory_forget"), "{prompt}");
    let token = prompt
        .split("`confirm ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no token in {prompt:?}"));

    // The client resends the conversation with the answer; the waiting run
    // goes on, and its answer is streamed (nothing of the earlier prompt).
    let r =
        t.s.http
            .post(t.s.url("/openai/v1/chat/completions"))
            .json(
                &json!({"model": "hearth", "user": "carol", "stream": true, "messages": [
                    {"role": "user", "content": "forget the cat"},
                    {"role": "assistant", "content": prompt},
                    {"role": "user", "content": format!("confirm {token}")},
                ]}),
            )
            .send()
            .await
            .unwrap();
    let datas = datas(&r.text().await.unwrap());
    assert_eq!(datas.last().map(String::as_str), Some("[DONE]"));
    let text: String = datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(text, "forgotten");
    // One run answered both requests.
    let (_, _, runs) =
        t.s.send(t.s.http.get(t.s.url("/v1/runs?thread_key=openai:carol")))
            .await;
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");
}

/// A model turn that says something, then calls `current_time` (read-only,
/// no confirmation): the text of a turn that is not the answer.
fn text_then_tool_call(text: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
               "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let frames = [
        chunk(json!({"role": "assistant", "content": text}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_t", "type": "function",
                "function": {"name": "current_time", "arguments": "{}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ];
    let body: String = frames.iter().map(|f| format!("data: {f}\n\n")).collect();
    Reply::raw_sse(format!("{body}data: [DONE]\n\n"))
}

#[tokio::test]
async fn the_streamed_answer_is_the_plain_answer_also_after_a_tool_call() {
    let t = setup().await;
    for _ in 0..2 {
        t.fake
            .push(text_then_tool_call("Let me look at the clock. "));
        t.fake.push(Reply::text("It is noon."));
    }
    let ask = json!([{"role": "user", "content": "what time is it?"}]);
    let (status, _, v) = t.chat(json!({"model": "hearth", "messages": ask})).await;
    assert_eq!(status, 200, "{v}");
    let plain = v["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(plain, "It is noon.");
    let (streamed, _) = t
        .stream(json!({"model": "hearth", "stream": true, "messages": ask}))
        .await;
    assert_eq!(
        streamed, plain,
        "the stream carries the answer, not the text of the turn before the tool call"
    );
}

#[tokio::test]
async fn strangers_are_refused_in_openais_envelope() {
    let t = setup().await;
    let body = json!({"model": "hearth", "messages": [{"role": "user", "content": "hi"}]});
    let post = || {
        t.s.http
            .post(t.s.url("/openai/v1/chat/completions"))
            .body(body.to_string())
    };
    let cases = [
        (
            post()
                .header("content-type", "application/json")
                .header("host", "evil.example"),
            403,
            "forbidden_host",
        ),
        (
            post()
                .header("content-type", "application/json")
                .header("origin", "https://evil.example"),
            403,
            "forbidden_origin",
        ),
        (
            post().header("content-type", "text/plain"),
            415,
            "unsupported_media_type",
        ),
        (
            t.s.http
                .get(t.s.url("/openai/v1/models"))
                .header("host", "evil.example"),
            403,
            "forbidden_host",
        ),
    ];
    for (rb, status, code) in cases {
        let (got, _, v) = t.s.send(rb).await;
        assert_eq!(got, status, "{v}");
        assert_eq!(
            (&v["error"]["code"], &v["error"]["type"]),
            (&json!(code), &json!("invalid_request_error")),
            "{v}"
        );
        assert!(
            v["error"].get("param").is_some(),
            "OpenAI's four fields: {v}"
        );
    }
    assert!(
        t.fake.requests().is_empty(),
        "a refused request reached the model"
    );
}
