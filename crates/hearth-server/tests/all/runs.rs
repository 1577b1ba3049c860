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
