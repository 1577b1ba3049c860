//! Compaction through the fake provider: long threads stay under the
//! window, stated facts survive summaries of summaries, tool calls stay
//! with their results, incognito summaries never reach the disk.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use std::sync::Arc;

use hearth_agent::budget::{Budget, FreeModels, PoolKind, PoolSpec, Scope, Window};
use hearth_agent::compaction::{PREVIOUS_SUMMARY_HEADING, SUMMARY_INSTRUCTIONS};
use hearth_agent::{
    Candidate, CompactionConfig, Engine, EventSink, Limits, Outcome, RunInput, ToolMode,
};
use hearth_core::{Message, ModelRef, Role, RunEventKind, RunStatus, ThinkingLevel, ToolSpec};
use hearth_llm::{OpenAiCompatConfig, OpenAiCompatProvider};
use hearth_store::{Durability, RunFinish, SUMMARY_ROLE, SqliteStore, StepKind, StepStatus, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolError, ToolRegistry};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// The window of the fake model, in tokens.
const WINDOW: u32 = 6000;

struct Sink;
impl EventSink for Sink {
    fn emit(&self, _kind: RunEventKind, _data: Value) {}
}

/// True for a summarizing request (its system prompt is the instructions).
fn is_compaction(req: &Value) -> bool {
    req["messages"][0]["content"]
        .as_str()
        .is_some_and(|s| s.starts_with(SUMMARY_INSTRUCTIONS))
}

/// The fake summarizer: keeps every line of the previous summary and every
/// user line that states a fact ("my ... is ..."), drops everything else.
fn summarize(req: &Value) -> Reply {
    let text = req["messages"][1]["content"].as_str().unwrap_or_default();
    let mut facts: Vec<String> = Vec::new();
    let mut in_previous = false;
    for line in text.lines() {
        if line.starts_with("## ") {
            in_previous = line == PREVIOUS_SUMMARY_HEADING;
            continue;
        }
        let fact = if in_previous {
            line.strip_prefix("- ").map(str::to_owned)
        } else if let Some(result) = line.strip_prefix("tool result: ") {
            // A fact a tool returned, at the end of its output.
            result
                .rfind("my ")
                .and_then(|at| result[at..].split('"').next())
                .filter(|f| f.contains(" is "))
                .map(str::to_owned)
        } else {
            line.strip_prefix("user: ")
                .filter(|l| l.contains("my ") && l.contains(" is "))
                .map(str::to_owned)
        };
        if let Some(f) = fact
            && !facts.contains(&f)
        {
            facts.push(f);
        }
    }
    if facts.is_empty() {
        facts.push("nothing to remember".into());
    }
    Reply::text(
        facts
            .iter()
            .map(|f| format!("- {f}"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

/// Estimated tokens of a whole request body: its JSON bytes over four, an
/// over-estimate (the framing counts too).
fn request_tokens(req: &Value) -> usize {
    req.to_string().len() / 4
}

struct Thread {
    engine: Engine,
    store: Arc<dyn Store>,
    fake: FakeOpenAi,
    _dir: tempfile::TempDir,
}

async fn thread(tools: ToolRegistry) -> Thread {
    thread_with(tools, None).await
}

/// A thread whose engine reserves every model call from `budget`, if given.
async fn thread_with(tools: ToolRegistry, budget: Option<Arc<Budget>>) -> Thread {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("c.db"), Durability::Normal).unwrap());
    let confirm = hearth_agent::ConfirmPolicy {
        confirm_writes: false,
        ..Default::default()
    };
    let mut engine = Engine::new(store.clone(), tools, Limits::default(), "sys".into())
        .with_confirmations(confirm)
        .with_compaction(CompactionConfig::default());
    if let Some(budget) = budget {
        engine = engine.with_budget(budget);
    }
    Thread {
        engine,
        store,
        fake: FakeOpenAi::start().await,
        _dir: dir,
    }
}

impl Thread {
    /// One run of `text` on thread `t`, committed as the runtime commits it;
    /// with `memory`, an incognito run kept in that store.
    async fn say(&self, text: &str, memory: Option<&Arc<dyn Store>>) -> (String, Outcome) {
        self.run(text, memory, None, CancellationToken::new()).await
    }

    /// As `say`, with `history` supplied by the client (as the OpenAI
    /// surface supplies it) in place of the thread's.
    async fn say_with_history(&self, text: &str, history: Vec<Message>) -> (String, Outcome) {
        self.run(text, None, Some(history), CancellationToken::new())
            .await
    }

    async fn run(
        &self,
        text: &str,
        memory: Option<&Arc<dyn Store>>,
        history: Option<Vec<Message>>,
        cancel: CancellationToken,
    ) -> (String, Outcome) {
        let store = memory.unwrap_or(&self.store);
        let run_id = hearth_core::new_run_id();
        store
            .create_run(hearth_store::NewRun {
                run_id: run_id.clone(),
                thread_key: "t".into(),
                user_key: "u".into(),
                source: "test".into(),
                input: text.into(),
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
                // The fake, like OpenAI, refuses a call without a key.
                let mut cfg = OpenAiCompatConfig::new("fake", self.fake.base_url());
                cfg.api_key = Some("test-key".into());
                cfg
            },
            reqwest::Client::new(),
        )
        .unwrap();
        let input = RunInput {
            run_id: run_id.clone(),
            thread_key: "t".into(),
            text: text.into(),
            user_key: "test:user:1".into(),
            scope: "global".into(),
            roles: Vec::new(),
            candidates: vec![Candidate {
                model: ModelRef::parse("fake/m").unwrap(),
                provider: Arc::new(provider),
                tools: ToolMode::Send,
                thinking: false,
                context_window: Some(WINDOW),
            }],
            thinking: ThinkingLevel::Off,
            cancel,
            steer: None,
            incognito: memory.is_some(),
            journal: memory.cloned(),
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
        };
        let result = self.engine.run_with_history(input, history, &Sink).await;
        let outcome = result.outcome.clone();
        let finished = store.finish_run(ended_as(&run_id, result)).await.unwrap();
        assert!(finished);
        (run_id, outcome)
    }
}

/// The end of `run_id` as the runtime stores it after the engine's `result`:
/// its status and answer or error, its messages and its last steps.
pub(super) fn ended_as(run_id: &str, result: hearth_agent::RunResult) -> RunFinish {
    let (status, output, error) = match result.outcome {
        Outcome::Succeeded(t) => (RunStatus::Succeeded, Some(t), None),
        Outcome::Failed(e) => (RunStatus::Failed, None, Some(e)),
        Outcome::Cancelled => (RunStatus::Cancelled, None, None),
    };
    RunFinish {
        run_id: run_id.to_owned(),
        status,
        output,
        error_code: error.as_ref().map(|e| e.code.clone()),
        error_message: error.map(|e| e.message),
        messages: result.messages,
        steps: result.steps,
        follow_ups: Vec::new(),
        finished_at: hearth_core::now_ms(),
        last_event_seq: None,
        outbox: Vec::new(),
        arm_observations: Vec::new(),
        model: None,
        requested_model: None,
        executed_elsewhere: false,
    }
}

/// Filler that makes each turn cost about 60 tokens.
fn small_talk(i: usize) -> String {
    format!("turn {i}: tell me something about the weather today, any little detail will do")
}

/// The `logs` tool's output: 200 KiB with a fact at its very end, the part
/// a summary that cuts long turns at their end loses.
fn long_log() -> String {
    let mut log = "log line: all quiet\n".repeat(10 * 1024);
    log.push_str("my parking spot is B12");
    log
}

/// A read tool whose output is 200 KiB.
struct Logs(ToolSpec);

#[async_trait::async_trait]
impl Tool for Logs {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "log": long_log() }))
    }
}

fn logs_tool() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Logs(ToolSpec {
        name: "logs".into(),
        description: "reads the logs".into(),
        parameters: json!({"type": "object"}),
    })));
    tools
}

/// True when the request's last message is a tool result.
fn answers_a_tool(req: &Value) -> bool {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool")
}

#[tokio::test]
async fn facts_survive_three_hundred_turns_and_repeated_compaction() {
    let t = thread(logs_tool()).await;
    // Summaries as `summarize` writes them; "look at the logs" calls the
    // `logs` tool, whose 200 KiB output ends with a fact.
    t.fake.respond_with(|req| {
        if is_compaction(req) {
            return Some(summarize(req));
        }
        let last = req["messages"].as_array()?.last()?;
        if last["role"] == "tool" {
            return Some(Reply::text("read them"));
        }
        last["content"]
            .as_str()?
            .contains("look at the logs")
            .then(|| Reply::tool_calls(vec![ToolCallSpec::new("c", "logs", "{}")]))
    });
    let facts = [
        (0, "my locker code is 4417"),
        (7, "my cat is called Miso"),
        (120, "my flight is on 12 March"),
    ];
    let tool_fact = "my parking spot is B12";
    let mut compaction_runs = Vec::new();
    for i in 0..320 {
        let text = match facts.iter().find(|(at, _)| *at == i) {
            Some((_, f)) => (*f).to_owned(),
            None if i == 150 => "please look at the logs".to_owned(),
            None => small_talk(i),
        };
        let before = t.fake.request_count();
        let (run_id, outcome) = t.say(&text, None).await;
        assert!(
            matches!(outcome, Outcome::Succeeded(_)),
            "turn {i}: {outcome:?}"
        );
        if t.fake.request_count() - before > 1 && i != 150 {
            compaction_runs.push(run_id);
        }
    }
    let requests = t.fake.requests();
    assert!(t.fake.violations().is_empty(), "{:?}", t.fake.violations());
    for (i, r) in requests.iter().enumerate() {
        let tokens = request_tokens(r);
        // The call that reads the logs carries them whole; every other one,
        // summarizing calls included, fits the window.
        assert!(
            tokens < WINDOW as usize || answers_a_tool(r),
            "request {i} is {tokens} tokens"
        );
    }
    let compactions: Vec<&Value> = requests.iter().filter(|r| is_compaction(r)).collect();
    assert!(
        compactions.len() >= 3,
        "only {} compactions",
        compactions.len()
    );
    // A later compaction gets the earlier summary, facts included, the one
    // at the end of the 200 KiB tool result too.
    let last = compactions.last().unwrap().to_string();
    for fact in facts.iter().map(|(_, f)| *f).chain([tool_fact]) {
        assert!(last.contains(fact), "the last compaction lost {fact:?}");
    }
    assert!(last.contains(PREVIOUS_SUMMARY_HEADING));
    // The last ordinary request still carries every fact, though their turns
    // were replaced long ago.
    let final_request = requests.iter().rev().find(|r| !is_compaction(r)).unwrap();
    let sent = final_request.to_string();
    for fact in facts.iter().map(|(_, f)| *f).chain([tool_fact]) {
        assert!(sent.contains(fact), "the last request lost {fact:?}");
    }
    assert!(!sent.contains("turn 5:"), "old small talk was replaced");
    assert!(!sent.contains("all quiet"), "the long log was replaced");

    // Nothing deleted: 640 messages (the logs turn has two more: the call
    // and its result) plus one summary per compaction.
    let mut all = Vec::new();
    let mut before = None;
    loop {
        let page = t.store.history_page("t", 1000, before).await.unwrap();
        all.extend(page.messages);
        match page.next_before {
            Some(b) => before = Some(b),
            None => break,
        }
    }
    let summaries = all.iter().filter(|m| m.role == SUMMARY_ROLE).count();
    assert_eq!(summaries, compactions.len());
    assert_eq!(all.len() - summaries, 642);
    assert!(all.iter().any(|m| m.compacted));
    assert!(!all[0].compacted, "the newest message is sent as it is");
    let first = all.last().unwrap();
    assert_eq!(first.text.as_deref(), Some("my locker code is 4417"));
    assert!(first.compacted);

    // Each compaction is a trace step with its token figures, and counted as
    // a model call.
    let steps = t.store.steps(&compaction_runs[0]).await.unwrap();
    let step = steps
        .iter()
        .find(|s| s.kind == StepKind::Compaction)
        .unwrap();
    assert_eq!(step.status, StepStatus::Succeeded);
    let detail = &step.payload["detail"];
    let (b, a) = (
        detail["tokens_before"].as_u64().unwrap(),
        detail["tokens_after"].as_u64().unwrap(),
    );
    assert!(b > u64::from(WINDOW) * 3 / 4 && a < b * 2 / 3, "{detail}");
    let usage = t
        .store
        .usage(&hearth_store::UsageQuery {
            since: None,
            until: None,
            group_by: hearth_store::UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage[0].calls as usize, requests.len());
}

/// A read tool whose output is long enough to fill the window fast.
struct Lookup(ToolSpec);

#[async_trait::async_trait]
impl Tool for Lookup {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    async fn call(
        &self,
        _ctx: &hearth_tools::ToolContext,
        _args: Value,
    ) -> Result<Value, ToolError> {
        Ok(json!({ "found": "x".repeat(600) }))
    }
}

#[tokio::test]
async fn a_tool_call_is_never_separated_from_its_result() {
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Lookup(ToolSpec {
        name: "lookup".into(),
        description: "looks up".into(),
        parameters: json!({"type": "object"}),
    })));
    let t = thread(tools).await;
    // Every turn: a tool call, then an answer once its result is in.
    t.fake.respond_with(|req| {
        if is_compaction(req) {
            return Some(summarize(req));
        }
        let last = req["messages"].as_array()?.last()?;
        Some(if last["role"] == "tool" {
            Reply::text("done")
        } else {
            Reply::tool_calls(vec![ToolCallSpec::new("c", "lookup", "{}")])
        })
    });
    for i in 0..60 {
        let (_, outcome) = t.say(&small_talk(i), None).await;
        assert_eq!(outcome, Outcome::Succeeded("done".into()), "turn {i}");
    }
    let requests = t.fake.requests();
    assert!(requests.iter().filter(|r| is_compaction(r)).count() >= 2);
    // The fake checks that every tool message answers a call earlier in
    // the same request.
    assert!(t.fake.violations().is_empty(), "{:?}", t.fake.violations());
    for r in requests.iter().filter(|r| !is_compaction(r)) {
        let msgs = r["messages"].as_array().unwrap();
        assert_eq!(msgs[1]["role"], "user", "history starts with a whole turn");
        assert!(request_tokens(r) < WINDOW as usize);
    }
}

#[tokio::test]
async fn an_incognito_thread_compacts_in_memory_only() {
    let t = thread(ToolRegistry::new()).await;
    t.fake
        .respond_with(|req| is_compaction(req).then(|| summarize(req)));
    let memory: Arc<dyn Store> = Arc::new(SqliteStore::open_in_memory().unwrap());
    t.say("my locker code is 4417", Some(&memory)).await;
    for i in 1..120 {
        t.say(&small_talk(i), Some(&memory)).await;
    }
    let requests = t.fake.requests();
    let compactions = requests.iter().filter(|r| is_compaction(r)).count();
    assert!(compactions >= 2, "only {compactions} compactions");
    let last = requests.iter().rev().find(|r| !is_compaction(r)).unwrap();
    assert!(last.to_string().contains("my locker code is 4417"));
    for store in [&t.store, &memory] {
        let page = store.history_page("t", 1000, None).await.unwrap();
        assert!(
            page.messages
                .iter()
                .all(|m| m.role != SUMMARY_ROLE && !m.compacted),
            "a summary was stored"
        );
    }
    assert!(
        t.store
            .history_page("t", 10, None)
            .await
            .unwrap()
            .messages
            .is_empty(),
        "nothing of the thread reached the disk"
    );
}

#[tokio::test]
async fn a_run_that_fits_does_no_compaction() {
    let t = thread(ToolRegistry::new()).await;
    for i in 0..5 {
        t.say(&small_talk(i), None).await;
    }
    assert_eq!(t.fake.request_count(), 5);
    assert!(!t.fake.requests().iter().any(is_compaction));
}

/// About 220 tokens of filler, so a few turns fill the window.
fn long_talk(i: usize) -> String {
    format!(
        "turn {i}: {}",
        "tell me something about the weather today, any little detail will do ".repeat(12)
    )
}

/// A budget with one global pool over every model.
fn budget(name: &str, kind: PoolKind, limit: f64) -> Arc<Budget> {
    Arc::new(Budget::new(
        vec![PoolSpec {
            name: name.into(),
            kind,
            limit,
            window: Window::Day,
            scope: Scope::Global,
            models: vec!["*".into()],
        }],
        hearth_llm::prices::PriceTable::new(Default::default()),
        FreeModels::default(),
        1000,
    ))
}

fn compactions(fake: &FakeOpenAi) -> usize {
    fake.requests().iter().filter(|r| is_compaction(r)).count()
}

#[tokio::test]
async fn compaction_calls_draw_from_the_budget() {
    let calls = budget("calls", PoolKind::Requests, 10_000.0);
    let t = thread_with(ToolRegistry::new(), Some(calls.clone())).await;
    t.fake
        .respond_with(|req| is_compaction(req).then(|| summarize(req)));
    for i in 0..20 {
        let (_, outcome) = t.say(&long_talk(i), None).await;
        assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    }
    assert!(compactions(&t.fake) >= 1);
    let status = &calls.status()[0];
    assert_eq!(
        (status.used, status.reserved),
        (t.fake.request_count() as f64, 0.0),
        "every call counts, the summarizing ones included"
    );
}

/// A history of `turns` long turns, a fact stated in the first.
fn long_history(turns: usize) -> Vec<Message> {
    let mut history = vec![
        Message::text(Role::User, "my locker code is 4417"),
        Message::text(Role::Assistant, "noted"),
    ];
    for i in 1..turns {
        history.push(Message::text(Role::User, long_talk(i)));
        history.push(Message::text(Role::Assistant, format!("answer {i}")));
    }
    history
}

#[tokio::test]
async fn a_compaction_the_budget_cannot_afford_is_not_sent() {
    let tiny = budget("tiny", PoolKind::Tokens, 100.0);
    let t = thread_with(ToolRegistry::new(), Some(tiny.clone())).await;
    t.fake
        .respond_with(|req| is_compaction(req).then(|| summarize(req)));
    // A history far over the window: the run must compact first.
    let (_, outcome) = t.say_with_history("hello", long_history(30)).await;
    let Outcome::Failed(e) = outcome else {
        panic!("{outcome:?}");
    };
    assert_eq!(e.code, "budget_exceeded", "{e:?}");
    assert!(e.message.contains("\"tiny\""), "{}", e.message);
    assert_eq!(
        t.fake.request_count(),
        0,
        "nothing was sent, no summarizing call either"
    );
    assert_eq!(tiny.status()[0].used, 0.0);
}

#[tokio::test]
async fn a_compaction_cut_off_by_a_cancel_is_charged_and_journaled() {
    let calls = budget("calls", PoolKind::Requests, 10_000.0);
    let t = thread_with(ToolRegistry::new(), Some(calls.clone())).await;
    let stalled = Arc::new(tokio::sync::Notify::new());
    let notify = stalled.clone();
    // Every summarizing call streams its first chunk, then nothing.
    t.fake.respond_with(move |req| {
        is_compaction(req).then(|| {
            notify.notify_one();
            Reply::text("- nothing").stalling_after(1)
        })
    });
    let mut cut = None;
    for i in 0..20 {
        let cancel = CancellationToken::new();
        let text = long_talk(i);
        let run = t.run(&text, None, None, cancel.clone());
        tokio::pin!(run);
        tokio::select! {
            _ = &mut run => {}
            () = stalled.notified() => {
                cancel.cancel();
                let (run_id, outcome) = run.await;
                assert_eq!(outcome, Outcome::Cancelled);
                cut = Some(run_id);
                break;
            }
        }
    }
    let run_id = cut.expect("no run compacted");
    let steps = t.store.steps(&run_id).await.unwrap();
    let step = steps
        .iter()
        .find(|s| s.kind == StepKind::Compaction)
        .expect("the cut-off compaction is journaled");
    assert_eq!(step.status, StepStatus::Failed);
    assert_eq!(step.payload["error"]["kind"], "cancelled");
    let status = &calls.status()[0];
    assert_eq!(
        (status.used, status.reserved),
        (t.fake.request_count() as f64, 0.0),
        "the cut-off call counts"
    );
    let usage = t
        .store
        .usage(&hearth_store::UsageQuery {
            since: None,
            until: None,
            group_by: hearth_store::UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage[0].calls as usize, t.fake.request_count());
}

#[tokio::test]
async fn a_supplied_history_is_summarized_once() {
    let t = thread(ToolRegistry::new()).await;
    t.fake
        .respond_with(|req| is_compaction(req).then(|| summarize(req)));
    let mut history = long_history(30);
    let question = "what is my locker code?";
    let (_, outcome) = t.say_with_history(question, history.clone()).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    let first = compactions(&t.fake);
    assert!(first >= 1, "the supplied history was compacted");
    // The client sends the same conversation again (a retry, a regenerated
    // answer, a background title request): the summary is reused.
    let (_, outcome) = t.say_with_history(question, history.clone()).await;
    assert!(matches!(outcome, Outcome::Succeeded(_)), "{outcome:?}");
    assert_eq!(compactions(&t.fake), first, "summarized again");
    let requests = t.fake.requests();
    let sent = requests.last().unwrap().to_string();
    assert!(sent.contains("4417"), "the summary is sent: {sent}");
    assert!(!sent.contains("turn 1:"), "the old turns are not");
    // The next message of the conversation carries the same history plus
    // the last exchange: what was summarized is not summarized again.
    history.push(Message::text(Role::User, question));
    history.push(Message::text(Role::Assistant, "4417"));
    t.say_with_history("thanks", history.clone()).await;
    assert_eq!(compactions(&t.fake), first, "summarized again");
    // Another history is summarized on its own.
    history[0] = Message::text(Role::User, "my locker code is 5528");
    t.say_with_history(question, history).await;
    assert!(compactions(&t.fake) > first);
    assert!(
        t.fake
            .requests()
            .last()
            .unwrap()
            .to_string()
            .contains("5528"),
        "a summary is never shared by different histories"
    );
}
