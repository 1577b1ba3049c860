//! Permission modes: for each mode, a model turn asking for one read call,
//! one edit call and one other write call gets exactly the confirmations
//! the mode asks for, the tools it offers, and a trace of what it decided;
//! a mode never grants what the capabilities lack.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_agent::policy::{PolicyConfig, Preset};
use hearth_agent::{
    Candidate, ConfirmPolicy, Engine, EventSink, Limits, Outcome, RunInput, ToolMode,
};
use hearth_core::{ModelRef, PermissionMode, RunEventKind, ThinkingLevel, ToolSpec};
use hearth_llm::{OpenAiCompatConfig, OpenAiCompatProvider};
use hearth_store::{Durability, SqliteStore, StepKind, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolError, ToolRegistry};
use serde_json::{Value, json};

const READ: &str = "fs__read_file";
const EDIT: &str = "fs__write_file";
const OTHER: &str = "notes_delete";
/// A write-class tool that needs `memory.write`.
const GATED: &str = "gated_write";

/// Records the confirmations asked for.
#[derive(Default)]
struct Asked(Mutex<Vec<String>>);

impl EventSink for Asked {
    fn emit(&self, kind: RunEventKind, data: Value) {
        if kind == RunEventKind::ConfirmationRequired {
            let tool = data["tool"].as_str().unwrap_or_default().to_owned();
            self.0.lock().unwrap().push(tool);
        }
    }
}

/// A tool that answers `{"done": <name>}`.
struct Named {
    spec: ToolSpec,
    class: ToolClass,
    capability: Option<&'static str>,
}

#[async_trait::async_trait]
impl Tool for Named {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        self.class
    }
    fn capability(&self) -> Option<&'static str> {
        self.capability
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "done": self.spec.name }))
    }
}

fn tool(name: &str, class: ToolClass, capability: Option<&'static str>) -> Arc<dyn Tool> {
    Arc::new(Named {
        spec: ToolSpec {
            name: name.into(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object"}),
        },
        class,
        capability,
    })
}

fn engine(store: &Arc<dyn Store>, always_ask: &[&str], preset: Preset) -> Engine {
    let mut r = ToolRegistry::new();
    r.register(tool(READ, ToolClass::Read, None));
    r.register(tool(EDIT, ToolClass::Write, None));
    r.register(tool(OTHER, ToolClass::Write, None));
    r.register(tool(GATED, ToolClass::Write, Some("memory.write")));
    Engine::new(store.clone(), r, Limits::default(), "sys".into())
        .with_policy(PolicyConfig {
            default_preset: preset,
            admins: Vec::new(),
        })
        .with_confirmations(ConfirmPolicy {
            // Unanswered, a question expires quickly: the call is then not done.
            ttl: Duration::from_millis(150),
            always_ask: always_ask.iter().map(|s| s.to_string()).collect(),
            ..ConfirmPolicy::default()
        })
}

/// What one run in `mode` did.
struct Seen {
    asked: Vec<String>,
    /// Tool names offered to the model on its first call.
    offered: Vec<String>,
    /// The first call's system prompt.
    system: String,
    /// Each tool step's name, mode and decision.
    decisions: Vec<(String, String, String)>,
    /// The tool results the model got, by call id.
    results: Vec<String>,
}

async fn run(
    engine: &Engine,
    store: &Arc<dyn Store>,
    mode: PermissionMode,
    calls: &[&str],
) -> Seen {
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::tool_calls(
        calls
            .iter()
            .enumerate()
            .map(|(i, name)| ToolCallSpec::new(format!("c{i}"), *name, "{}"))
            .collect(),
    ));
    fake.push(Reply::text("ok"));
    let run_id = hearth_core::new_run_id();
    store
        .create_run(hearth_store::NewRun {
            run_id: run_id.clone(),
            thread_key: "api:modes".into(),
            user_key: "test:user:m".into(),
            source: "test".into(),
            input: "go".into(),
            idempotency_key: None,
            created_at: hearth_core::now_ms(),
            scope: None,
            roles: Vec::new(),
            parent_run_id: None,
        })
        .await
        .unwrap();
    let provider = OpenAiCompatProvider::new(
        {
            let mut cfg = OpenAiCompatConfig::new("fake", fake.base_url());
            cfg.api_key = Some("test-key".into());
            cfg
        },
        reqwest::Client::new(),
    )
    .unwrap();
    let sink = Asked::default();
    let result = engine
        .run(
            RunInput {
                run_id: run_id.clone(),
                thread_key: "api:modes".into(),
                text: "go".into(),
                user_key: "test:user:m".into(),
                scope: "global".into(),
                roles: Vec::new(),
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
                mode,
                tools: None,
                max_steps: None,
                asker: None,
                family: None,
                fresh: false,
                history_seen: None,
            },
            &sink,
        )
        .await;
    assert_eq!(result.outcome, Outcome::Succeeded("ok".into()), "{mode}");
    let requests = fake.requests();
    let first = &requests[0];
    let offered = first["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let system = first["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let last = requests.last().unwrap();
    let results = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    let decisions = store
        .steps(&run_id)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.kind == StepKind::Tool)
        .map(|s| {
            let d = &s.payload["detail"];
            (
                s.name,
                d["mode"].as_str().unwrap_or("?").to_owned(),
                d["decision"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    let asked = sink.0.lock().unwrap().clone();
    Seen {
        asked,
        offered,
        system,
        decisions,
        results,
    }
}

fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("m.db"), Durability::Normal).unwrap());
    (dir, store)
}

/// A mode, the confirmations it asks, the tools it offers, and its
/// decisions of the read, the edit and the other write call.
type Case = (
    PermissionMode,
    &'static [&'static str],
    &'static [&'static str],
    [&'static str; 3],
);

#[tokio::test]
async fn each_mode_asks_exactly_what_it_should() {
    let (_dir, store) = store();
    let engine = engine(&store, &["memory_forget", "cancel_job"], Preset::Member);
    const ALL: &[&str] = &[READ, EDIT, OTHER, GATED];
    let cases: [Case; 6] = [
        (PermissionMode::Deny, &[], &[], ["not_offered"; 3]),
        (
            PermissionMode::Plan,
            &[],
            &[READ],
            ["ran", "not_offered", "not_offered"],
        ),
        (
            PermissionMode::Ask,
            &[EDIT, OTHER],
            ALL,
            ["ran", "asked", "asked"],
        ),
        (
            PermissionMode::AcceptEdits,
            &[OTHER],
            ALL,
            ["ran", "ran", "asked"],
        ),
        (PermissionMode::Auto, &[], ALL, ["ran", "ran", "ran"]),
        (PermissionMode::Bypass, &[], ALL, ["ran", "ran", "ran"]),
    ];
    for (mode, asked, offered, decisions) in cases {
        let seen = run(&engine, &store, mode, &[READ, EDIT, OTHER]).await;
        assert_eq!(seen.asked, asked, "{mode}: confirmations");
        let mut want: Vec<&str> = offered.to_vec();
        want.sort_unstable();
        let mut got = seen.offered.clone();
        got.sort_unstable();
        assert_eq!(got, want, "{mode}: offered tools");
        let expected: Vec<(String, String, String)> = [READ, EDIT, OTHER]
            .iter()
            .zip(decisions)
            .map(|(t, d)| (t.to_string(), mode.to_string(), d.to_string()))
            .collect();
        assert_eq!(seen.decisions, expected, "{mode}: trace");
        // What was not offered was not done, and the model is told why.
        for (result, decision) in seen.results.iter().zip(decisions) {
            if decision == "not_offered" {
                assert!(
                    result.contains(&format!("permission mode {mode}")),
                    "{mode}: {result}"
                );
            }
        }
        if mode == PermissionMode::Plan {
            assert!(seen.system.contains("plan mode"), "{}", seen.system);
        } else {
            assert!(
                !seen.system.contains("plan mode"),
                "{mode}: {}",
                seen.system
            );
        }
    }
}

#[tokio::test]
async fn always_ask_still_asks_in_auto_and_accept_edits_but_not_in_bypass() {
    let (_dir, store) = store();
    let engine = engine(&store, &["notes_*"], Preset::Member);
    for (mode, asked) in [
        (PermissionMode::Auto, &[OTHER][..]),
        (PermissionMode::AcceptEdits, &[OTHER][..]),
        (PermissionMode::Bypass, &[][..]),
    ] {
        let seen = run(&engine, &store, mode, &[READ, EDIT, OTHER]).await;
        assert_eq!(seen.asked, asked, "{mode}");
    }
}

#[tokio::test]
async fn no_mode_grants_what_the_capabilities_lack() {
    let (_dir, store) = store();
    // `none`: the gated tool needs memory.write, which nobody holds.
    let engine = engine(&store, &[], Preset::None);
    for mode in PermissionMode::ALL {
        let seen = run(&engine, &store, mode, &[GATED]).await;
        assert!(seen.asked.is_empty(), "{mode}: {:?}", seen.asked);
        assert!(!seen.offered.iter().any(|t| t == GATED), "{mode}: offered");
        assert!(
            seen.results[0].contains("missing capability memory.write"),
            "{mode}: {}",
            seen.results[0]
        );
        assert_eq!(
            seen.decisions,
            [(GATED.to_owned(), mode.to_string(), "refused".to_owned())],
            "{mode}"
        );
    }
}
