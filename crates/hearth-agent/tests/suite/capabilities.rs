//! Every capability-gated tool hearth ships: refused (and audited) without
//! its capability, run with it.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::sync::Arc;
use std::time::Duration;

use hearth_agent::policy::{PolicyConfig, Preset};
use hearth_agent::{Candidate, ConfirmPolicy, Engine, Limits, Outcome, RunInput, ToolMode};
use hearth_core::{ModelRef, RunEventKind, ThinkingLevel};
use hearth_llm::{OpenAiCompatConfig, OpenAiCompatProvider};
use hearth_store::{Durability, Grant, SqliteStore, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::ToolRegistry;
use hearth_tools::web::search::{SearchBackend, WebSearch, WebSearchConfig};
use serde_json::Value;

const USER: &str = "test:user:cap";

struct NoEvents;

impl hearth_agent::EventSink for NoEvents {
    fn emit(&self, _kind: RunEventKind, _data: Value) {}
}

/// Every shipped tool that needs a capability, with arguments that pass its schema.
fn gated() -> Vec<(&'static str, &'static str, &'static str)> {
    vec![
        ("web_fetch", r#"{"url": "http://10.0.0.1/"}"#, "web.fetch"),
        ("web_search", r#"{"query": "rust"}"#, "web.search"),
        ("memory_save", r#"{"text": "a fact"}"#, "memory.write"),
        ("memory_search", r#"{"query": "fact"}"#, "memory.read"),
        ("memory_list", "{}", "memory.read"),
        ("memory_forget", r#"{"id": 1}"#, "memory.write"),
    ]
}

fn registry(store: &Arc<dyn Store>) -> ToolRegistry {
    let mut r = ToolRegistry::with_builtins();
    for t in hearth_tools::memory::tools(store.clone()) {
        r.register(t);
    }
    // Never reached: nothing listens on port 9 of loopback.
    r.register(Arc::new(WebSearch::new(WebSearchConfig::new(
        SearchBackend::Searxng {
            base_url: "http://127.0.0.1:9".into(),
        },
    ))));
    r
}

/// Runs one call of `tool` for [`USER`] and returns the result the model got.
async fn call(
    engine: &Engine,
    store: &Arc<dyn Store>,
    fake: &FakeOpenAi,
    tool: &str,
    args: &str,
) -> String {
    call_in(engine, store, fake, (tool, args), "global", &[]).await
}

/// [`call`] in `scope`, with [`USER`] holding `roles`.
async fn call_in(
    engine: &Engine,
    store: &Arc<dyn Store>,
    fake: &FakeOpenAi,
    (tool, args): (&str, &str),
    scope: &str,
    roles: &[&str],
) -> String {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new("c", tool, args)]));
    fake.push(Reply::text("ok"));
    let run_id = hearth_core::new_run_id();
    store
        .create_run(hearth_store::NewRun {
            run_id: run_id.clone(),
            thread_key: "api:cap".into(),
            user_key: USER.into(),
            source: "test".into(),
            input: "go".into(),
            idempotency_key: None,
            created_at: hearth_core::now_ms(),
            scope: Some(scope.into()),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            parent_run_id: None,
        })
        .await
        .unwrap();
    let provider = OpenAiCompatProvider::new(
        {
            // The fake, like OpenAI, refuses a call without a key.
            let mut cfg = OpenAiCompatConfig::new("fake", fake.base_url());
            cfg.api_key = Some("test-key".into());
            cfg
        },
        reqwest::Client::new(),
    )
    .unwrap();
    let result = engine
        .run(
            RunInput {
                run_id,
                thread_key: "api:cap".into(),
                text: "go".into(),
                user_key: USER.into(),
                scope: scope.into(),
                roles: roles.iter().map(|r| r.to_string()).collect(),
                candidates: vec![Candidate {
                    model: ModelRef::parse("fake/m").unwrap(),
                    provider: Arc::new(provider),
                    tools: ToolMode::Send,
                    thinking: false,
                    context_window: None,
                }],
                thinking: ThinkingLevel::Off,
                cancel: Default::default(),
                steer: None,
                incognito: false,
                journal: None,
                replies: None,
                pinned: false,
                first_step: 0,
                mode: hearth_core::PermissionMode::Ask,
                tools: None,
                max_steps: None,
                asker: None,
                family: None,
                fresh: false,
                history_seen: None,
            },
            &NoEvents,
        )
        .await;
    assert_eq!(result.outcome, Outcome::Succeeded("ok".into()));
    let last = fake.requests().pop().unwrap();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap()
}

#[tokio::test]
async fn each_gated_tool_is_refused_without_its_capability_and_runs_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("c.db"), Durability::Normal).unwrap());
    let engine = Engine::new(
        store.clone(),
        registry(&store),
        Limits {
            tool_timeout: Duration::from_secs(10),
            ..Limits::default()
        },
        "sys".into(),
    )
    .with_policy(PolicyConfig {
        default_preset: Preset::None,
        admins: Vec::new(),
    })
    .with_confirmations(ConfirmPolicy {
        confirm_writes: false,
        ..Default::default()
    });
    let fake = FakeOpenAi::start().await;
    for (tool, args, cap) in gated() {
        let out = call(&engine, &store, &fake, tool, args).await;
        assert!(
            out.contains(&format!("missing capability {cap}")),
            "{tool} without {cap}: {out}"
        );
    }
    let audit = store.list_audit(100).await.unwrap();
    for (tool, _, cap) in gated() {
        assert!(
            audit.iter().any(|e| e.target == tool
                && e.outcome == "denied"
                && e.actor == USER
                && e.capability.as_deref() == Some(cap)),
            "no audited denial of {tool}: {audit:?}"
        );
    }
    for cap in ["web.fetch", "web.search", "memory.read", "memory.write"] {
        store
            .add_grant(Grant {
                subject: format!("user:{USER}"),
                capability: cap.into(),
                scope: "global".into(),
                granted_at: 0,
                granted_by: "test".into(),
            })
            .await
            .unwrap();
    }
    for (tool, args, cap) in gated() {
        let out = call(&engine, &store, &fake, tool, args).await;
        assert!(
            !out.contains("missing capability"),
            "{tool} with {cap} was refused: {out}"
        );
    }
}

#[tokio::test]
async fn a_tool_the_channel_lacks_is_not_offered_and_a_call_is_refused_and_audited() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("c.db"), Durability::Normal).unwrap());
    let mut profiles = hearth_tools::ToolProfiles::new();
    profiles.insert(
        "api",
        hearth_tools::ToolProfile::new(vec!["*".into()], vec!["web_*".into()]),
    );
    let engine = Engine::new(
        store.clone(),
        registry(&store).with_profiles(profiles),
        Limits::default(),
        "sys".into(),
    );
    let fake = FakeOpenAi::start().await;
    let out = call(
        &engine,
        &store,
        &fake,
        "web_fetch",
        r#"{"url": "http://10.0.0.1/"}"#,
    )
    .await;
    assert!(out.contains("not available on channel api"), "{out}");
    let first = &fake.requests()[0];
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"memory_save"), "{offered:?}");
    assert!(
        !offered.iter().any(|t| t.starts_with("web_")),
        "{offered:?}"
    );
    let audit = store.list_audit(10).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|e| e.target == "web_fetch" && e.outcome == "denied" && e.capability.is_none()),
        "{audit:?}"
    );
}

#[tokio::test]
async fn a_grant_to_a_role_in_a_scope_applies_to_holders_of_the_role_there_only() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("c.db"), Durability::Normal).unwrap());
    let engine = Engine::new(
        store.clone(),
        registry(&store),
        Limits::default(),
        "sys".into(),
    )
    .with_policy(PolicyConfig {
        default_preset: Preset::None,
        admins: Vec::new(),
    });
    store
        .add_grant(Grant {
            subject: "role:111".into(),
            capability: "memory.read".into(),
            scope: "discord:guild:9".into(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap();
    let fake = FakeOpenAi::start().await;
    let list = ("memory_list", "{}");
    let with_role = call_in(
        &engine,
        &store,
        &fake,
        list,
        "discord:guild:9",
        &["5", "111"],
    )
    .await;
    assert!(!with_role.contains("missing capability"), "{with_role}");
    let other_role = call_in(&engine, &store, &fake, list, "discord:guild:9", &["222"]).await;
    assert!(
        other_role.contains("missing capability memory.read"),
        "{other_role}"
    );
    let elsewhere = call_in(&engine, &store, &fake, list, "discord:guild:8", &["111"]).await;
    assert!(
        elsewhere.contains("missing capability memory.read"),
        "{elsewhere}"
    );
}
