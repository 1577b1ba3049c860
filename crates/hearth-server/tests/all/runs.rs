//! The run envelope and trace over HTTP when the model call fails: the model
//! that answered, the one asked for, and the provider's words in the trace.

use hearth_server::ServeLimits;
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::{Value, json};

use crate::harness::{Server, runtime, state};

/// A key-shaped string a provider might echo back in its error.
const ECHOED_KEY: &str = "sk-proj-Abcdefghijklmnopqrstuvwxyz0123456789ABCD";

async fn two_providers(primary: &FakeOpenAi, backup: &FakeOpenAi) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    let toml = format!(
        "[llm]\ndefault_model = \"primary/m\"\nfallback = [\"backup/b\"]\n\
         [llm.providers.primary]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"m\"]\n\
         [llm.providers.backup]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\nmodels = [\"b\"]\n",
        primary.base_url(),
        backup.base_url()
    );
    let rt = runtime(dir.path(), &toml, &store, |b| b).await;
    let app = hearth_server::router(state(rt), 1 << 20);
    Server::serve(app, ServeLimits::default(), store, dir).await
}

async fn ask(s: &Server, text: &str) -> Value {
    let (status, _, v) = s
        .send(
            s.http
                .post(s.url("/v1/messages"))
                .json(&json!({ "text": text, "thread_key": "api:t", "wait": true })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    v
}

#[tokio::test]
async fn a_failed_over_run_names_both_models_and_its_trace_says_why() {
    let primary = FakeOpenAi::start().await;
    let backup = FakeOpenAi::start().await;
    let s = two_providers(&primary, &backup).await;
    // A refused key fails over at once (no retry on the same model).
    primary.push(Reply::http_error(
        401,
        json!({ "error": { "message": format!("Incorrect API key provided: {ECHOED_KEY}") } }),
    ));
    let run = ask(&s, "hello").await;
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["model"], "backup/b", "{run}");
    assert_eq!(run["requested_model"], "primary/m", "{run}");
    let id = run["run_id"].as_str().unwrap();
    let (_, _, got) = s.send(s.http.get(s.url(&format!("/v1/runs/{id}")))).await;
    assert_eq!(
        (&got["model"], &got["requested_model"]),
        (&json!("backup/b"), &json!("primary/m")),
        "{got}"
    );

    let (status, _, trace) = s
        .send(s.http.get(s.url(&format!("/v1/runs/{id}/trace"))))
        .await;
    assert_eq!(status, 200, "{trace}");
    let failed = &trace["steps"][0];
    assert_eq!(
        (&failed["name"], &failed["status"]),
        (&json!("primary/m"), &json!("failed")),
        "{trace}"
    );
    assert_eq!(failed["detail"]["kind"], "auth", "{trace}");
    let message = failed["detail"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("Incorrect API key provided"),
        "the provider's words: {trace}"
    );
    assert!(
        !trace.to_string().contains(ECHOED_KEY),
        "no secret: {trace}"
    );
    assert!(message.contains("REDACTED"), "{message}");
    // A model call that answered describes nothing (its payload is the answer).
    assert_eq!(trace["steps"][1]["status"], "succeeded", "{trace}");
    assert!(trace["steps"][1]["detail"].is_null(), "{trace}");

    // A run its own model answered has no `requested_model` at all.
    let plain = ask(&s, "again").await;
    assert_eq!(plain["model"], "primary/m", "{plain}");
    assert!(plain.get("requested_model").is_none(), "{plain}");
}

/// A run that delegated: `GET /v1/runs/{id}` lists its child, the child's
/// envelope names its parent, and the parent's trace shows the call as a
/// `delegate` step naming the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegating_run_lists_its_child_and_traces_a_delegate_step() {
    use hearth_testkit::ToolCallSpec;
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|body| {
        let answered = body["messages"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        match (body["model"].as_str(), answered) {
            (Some("m"), false) => Some(Reply::tool_calls(vec![ToolCallSpec::new(
                "c1",
                "delegate",
                json!({"task": "sum 2 and 2", "model": "fake/small"}).to_string(),
            )])),
            (Some("m"), true) => Some(Reply::text("the child says 4")),
            (Some("small"), _) => Some(Reply::text("4")),
            _ => None,
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    let toml = format!(
        "[llm]\ndefault_model = \"fake/m\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
         headers = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\n\
         models = [\"m\", \"small\"]\n",
        fake.base_url()
    );
    let rt = runtime(dir.path(), &toml, &store, |b| b.subagent_tools()).await;
    let app = hearth_server::router(state(rt), 1 << 20);
    let s = Server::serve(app, ServeLimits::default(), store, dir).await;

    let run = ask(&s, "what is 2 and 2?").await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let id = run["run_id"].as_str().unwrap();
    let (_, _, got) = s.send(s.http.get(s.url(&format!("/v1/runs/{id}")))).await;
    let children = got["children"].as_array().cloned().unwrap_or_default();
    assert_eq!(children.len(), 1, "{got}");
    let child = &children[0];
    assert_eq!(child["model"], "fake/small", "{got}");
    assert_eq!(child["status"], "succeeded", "{got}");
    assert!(
        child["thread_key"]
            .as_str()
            .unwrap()
            .starts_with("api:t/sub/"),
        "{got}"
    );
    let child_id = child["run_id"].as_str().unwrap();
    let (_, _, c) = s
        .send(s.http.get(s.url(&format!("/v1/runs/{child_id}"))))
        .await;
    assert_eq!(c["parent_run_id"], id, "{c}");
    assert_eq!(c["source"], "delegate", "{c}");

    let (status, _, trace) = s
        .send(s.http.get(s.url(&format!("/v1/runs/{id}/trace"))))
        .await;
    assert_eq!(status, 200, "{trace}");
    let step = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "delegate")
        .unwrap_or_else(|| panic!("no delegate step: {trace}"));
    assert_eq!(step["detail"]["child_run_id"], child_id, "{trace}");
    assert_eq!(step["detail"]["model"], "fake/small", "{trace}");
    assert_eq!(step["detail"]["status"], "succeeded", "{trace}");
    assert!(step["detail"]["steps"].as_u64() >= Some(1), "{trace}");
    assert!(step["detail"].get("cost_usd").is_some(), "{trace}");

    // The dashboard nests them: the parent's page links its sub-agent, the
    // child's page its parent.
    let page = |run: String| {
        let http = s.http.clone();
        let url = s.url(&format!("/ui/runs/{run}"));
        async move { http.get(url).send().await.unwrap().text().await.unwrap() }
    };
    let parent_page = page(id.to_owned()).await;
    assert!(
        parent_page.contains("<h2>Sub-agents</h2>")
            && parent_page.contains(&format!("href=\"/ui/runs/{child_id}\"")),
        "{parent_page}"
    );
    let child_page = page(child_id.to_owned()).await;
    assert!(
        child_page.contains("Sub-agent of")
            && child_page.contains(&format!("href=\"/ui/runs/{id}\"")),
        "{child_page}"
    );
}
