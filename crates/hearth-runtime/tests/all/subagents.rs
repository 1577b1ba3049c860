//! Sub-agents: a run's `delegate` calls start child runs on another model,
//! in parallel, within `[agent.subagents]` limits, with no tool their parent
//! lacks, once per call (also for a parent resumed after a crash), and
//! spending from the parent's budget pools.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hearth_core::{Content, DeliveryMode, Inbound, Message, Role, RunEnvelope, RunStatus};
use hearth_runtime::{Runtime, WaitOutcome, testing};
use hearth_store::{NewRun, RunFilter, StepKind, StepRecord, StepStatus, Store};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError, ToolRegistry};
use serde_json::{Value, json};

use crate::common;

pub(crate) const USER: &str = "test:user:1";

/// A tool that counts its calls; `capability` as given.
struct Counted {
    spec: hearth_core::ToolSpec,
    class: ToolClass,
    capability: Option<&'static str>,
    calls: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl Tool for Counted {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        self.class
    }
    fn capability(&self) -> Option<&'static str> {
        self.capability
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(json!({ "found": "a fact" }))
    }
}

/// Calls of each test tool.
#[derive(Default, Clone)]
pub(crate) struct Calls {
    pub(crate) lookup: Arc<AtomicUsize>,
    pub(crate) delete: Arc<AtomicUsize>,
    pub(crate) secret: Arc<AtomicUsize>,
}

pub(crate) fn tools(calls: &Calls) -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    let tool = |name: &str, class, capability, calls: &Arc<AtomicUsize>| {
        Arc::new(Counted {
            spec: hearth_core::ToolSpec {
                name: name.into(),
                description: format!("{name} something"),
                parameters: json!({"type": "object"}),
            },
            class,
            capability,
            calls: calls.clone(),
        })
    };
    tools.register(tool("lookup", ToolClass::Read, None, &calls.lookup));
    tools.register(tool("delete_file", ToolClass::Write, None, &calls.delete));
    // `jobs.manage` is not in the default `member` preset.
    tools.register(tool(
        "secret",
        ToolClass::Read,
        Some("jobs.manage"),
        &calls.secret,
    ));
    tools
}

pub(crate) fn toml(fake: &FakeOpenAi, extra: &str) -> String {
    format!(
        "[llm]\ndefault_model = \"fake/m\"\n[llm.providers.fake]\ntype = \"openai_compat\"\n\
         headers = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{}\"\n\
         models = [\"m\", \"small\"]\n{extra}\n",
        fake.base_url()
    )
}

pub(crate) async fn runtime(
    dir: &std::path::Path,
    store: &Arc<dyn Store>,
    toml: &str,
    calls: &Calls,
) -> Runtime {
    let rt = common::build(
        common::builder(dir, toml, store)
            .tools(tools(calls))
            .subagent_tools(),
    )
    .await;
    rt.start().await.unwrap();
    rt
}

/// The tool results in a request, in order.
pub(crate) fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// The first user message of a request (a child's task).
pub(crate) fn task(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

pub(crate) fn delegate(id: &str, args: Value) -> ToolCallSpec {
    ToolCallSpec::new(id, "delegate", args.to_string())
}

pub(crate) async fn ask(rt: &Runtime, thread: &str) -> RunEnvelope {
    let env = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread(thread),
            user_key: testing::user(USER),
            text: "research three things".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    finished(rt, &env.run_id).await
}

pub(crate) async fn finished(rt: &Runtime, run_id: &str) -> RunEnvelope {
    match rt.wait(run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("run not finished: {e:?}"),
    }
}

/// The parent (model `m`) asks for `calls` in its first turn and then
/// answers with every tool result it got; a child (model `small`) runs
/// `child`.
pub(crate) fn script(fake: &FakeOpenAi, calls: Vec<ToolCallSpec>, child: fn(&Value) -> Reply) {
    fake.respond_with(move |body| {
        let results = tool_results(body);
        match body["model"].as_str() {
            Some("m") if results.is_empty() => Some(Reply::tool_calls(calls.clone())),
            Some("m") => Some(Reply::text(format!("all done: {}", results.join(" | ")))),
            Some("small") => Some(child(body)),
            _ => None,
        }
    });
}

pub(crate) fn answers_its_task(body: &Value) -> Reply {
    Reply::text(format!("answer to [{}]", task(body)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_delegating_three_tasks_in_parallel_gets_three_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = (1..=3)
        .map(|i| {
            delegate(
                &format!("c{i}"),
                json!({"task": format!("task {i}"), "model": "fake/small", "wait": true}),
            )
        })
        .collect();
    script(&fake, calls, answers_its_task);
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &Calls::default()).await;

    let parent = ask(&rt, "t:fan").await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    let text = parent.output.unwrap().text;
    for i in 1..=3 {
        assert!(text.contains(&format!("answer to [task {i}]")), "{text}");
    }
    // Three children, on the small model, each in its own thread.
    let env = rt.get_run(&parent.run_id).await.unwrap();
    assert_eq!(env.children.len(), 3, "{env:?}");
    for child in &env.children {
        assert_eq!(child.model.as_deref(), Some("fake/small"));
        assert_eq!(child.status, RunStatus::Succeeded);
        assert!(
            child.thread_key.starts_with("t:fan/sub/"),
            "{}",
            child.thread_key
        );
        let c = rt.get_run(&child.run_id).await.unwrap();
        assert_eq!(c.parent_run_id.as_deref(), Some(parent.run_id.as_str()));
    }
    // A child's model saw its task alone, not the parent's conversation.
    for req in fake.requests().iter().filter(|r| r["model"] == "small") {
        let roles: Vec<&str> = req["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["role"].as_str())
            .filter(|r| *r != "system")
            .collect();
        assert_eq!(roles, ["user"], "{req}");
        assert!(task(req).starts_with("task "), "{req}");
    }
    // The parent's trace names each child.
    let trace = rt.trace(&parent.run_id).await.unwrap();
    let delegated: Vec<_> = trace
        .iter()
        .filter(|s| s.name == "delegate")
        .map(|s| s.payload["detail"].clone())
        .collect();
    assert_eq!(delegated.len(), 3);
    for d in &delegated {
        assert_eq!(d["model"], "fake/small");
        assert_eq!(d["status"], "succeeded");
        assert!(
            d["child_run_id"].is_string() && d["steps"].as_u64() >= Some(1),
            "{d}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_out_past_max_children_is_refused_with_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = (1..=3)
        .map(|i| {
            delegate(
                &format!("c{i}"),
                json!({"task": format!("task {i}"), "model": "fake/small"}),
            )
        })
        .collect();
    script(&fake, calls, answers_its_task);
    let extra = "[agent.subagents]\nmax_children = 2\n";
    let rt = runtime(dir.path(), &store, &toml(&fake, extra), &Calls::default()).await;

    let parent = ask(&rt, "t:fan-limit").await;
    let text = parent.output.unwrap().text;
    assert_eq!(text.matches("answer to [task").count(), 2, "{text}");
    assert!(text.contains("max_children = 2"), "{text}");
    assert_eq!(rt.get_run(&parent.run_id).await.unwrap().children.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_parallel_is_refused_and_a_child_left_running_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = (1..=2)
        .map(|i| {
            delegate(
                &format!("c{i}"),
                json!({"task": format!("task {i}"), "model": "fake/small", "wait": false}),
            )
        })
        .collect();
    // The children take their time: the first is running when the second is asked for.
    script(&fake, calls, |_| {
        Reply::text("late").with_delay(Duration::from_secs(60))
    });
    let extra = "[agent.subagents]\nmax_parallel = 1\n";
    let rt = runtime(dir.path(), &store, &toml(&fake, extra), &Calls::default()).await;

    let parent = ask(&rt, "t:parallel-limit").await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    let text = parent.output.unwrap().text;
    assert!(text.contains("max_parallel = 1"), "{text}");
    let children = rt.get_run(&parent.run_id).await.unwrap().children;
    assert_eq!(children.len(), 1, "{children:?}");
    // Its parent ended without waiting for it: nobody reads its answer.
    let child = finished(&rt, &children[0].run_id).await;
    assert_eq!(child.status, RunStatus::Cancelled, "{child:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_at_max_depth_may_not_delegate() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "dig deeper", "model": "fake/small"}),
    )];
    script(&fake, calls, |body| {
        let results = tool_results(body);
        if results.is_empty() {
            Reply::tool_calls(vec![delegate("g1", json!({"task": "deeper still"}))])
        } else {
            Reply::text(format!("child saw: {}", results.join(" | ")))
        }
    });
    let extra = "[agent.subagents]\nmax_depth = 1\n";
    let rt = runtime(dir.path(), &store, &toml(&fake, extra), &Calls::default()).await;

    let parent = ask(&rt, "t:deep").await;
    let text = parent.output.unwrap().text;
    assert!(text.contains("delegate refused"), "{text}");
    assert!(text.contains("max_depth = 1"), "{text}");
    let env = rt.get_run(&parent.run_id).await.unwrap();
    assert_eq!(env.children.len(), 1);
    let child = rt.get_run(&env.children[0].run_id).await.unwrap();
    assert!(child.children.is_empty(), "no grandchild: {child:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_call_a_tool_its_parent_lacks_nor_one_it_was_not_given() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "try everything", "model": "fake/small", "tools": ["lookup", "secret"]}),
    )];
    script(&fake, calls, |body| {
        if tool_results(body).is_empty() {
            Reply::tool_calls(vec![
                ToolCallSpec::new("t1", "secret", "{}"),
                ToolCallSpec::new("t2", "delete_file", "{}"),
                ToolCallSpec::new("t3", "lookup", "{}"),
            ])
        } else {
            Reply::text(format!("child saw: {}", tool_results(body).join(" | ")))
        }
    });
    let counts = Calls::default();
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &counts).await;

    let parent = ask(&rt, "t:narrow").await;
    let text = parent.output.unwrap().text;
    assert_eq!(counts.secret.load(Ordering::SeqCst), 0, "{text}");
    assert_eq!(counts.delete.load(Ordering::SeqCst), 0, "{text}");
    assert_eq!(counts.lookup.load(Ordering::SeqCst), 1, "{text}");
    assert!(text.contains("missing capability jobs.manage"), "{text}");
    assert!(
        text.contains("delete_file is not among the tools this sub-agent was given"),
        "{text}"
    );
    // The child was offered only what it may call.
    let offered = crate::common::offered_to(&fake, "small");
    assert_eq!(offered, ["lookup"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_resumed_after_a_crash_starts_no_second_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    script(&fake, Vec::new(), |body| {
        let results = tool_results(body);
        if results.is_empty() {
            Reply::tool_calls(vec![ToolCallSpec::new("t1", "lookup", "{}")])
        } else {
            Reply::text(format!(
                "answer to [{}]: {}",
                task(body),
                results.join(" | ")
            ))
        }
    });
    // A dead process left a parent whose model asked for `delegate` (c1,
    // giving the child only `secret`), and the child that call started,
    // both running.
    let now = hearth_core::now_ms();
    let parent_id = hearth_core::new_run_id();
    let parent = store
        .create_run(new_run(&parent_id, "t:crash", "test", "go", None))
        .await
        .unwrap();
    let hearth_store::CreateRunOutcome::Created(parent) = parent else {
        panic!("the parent exists already");
    };
    store
        .claim_run_with_model(
            &parent_id,
            "dead-process",
            now + 3_600_000,
            now,
            "fake/m",
            Some("ask"),
        )
        .await
        .unwrap();
    let asked = Message {
        role: Role::Assistant,
        content: vec![Content::ToolCall {
            id: "c1".into(),
            name: "delegate".into(),
            arguments: json!({"task": "the task", "model": "fake/small", "tools": ["secret"]})
                .to_string(),
        }],
    };
    store
        .put_step(StepRecord {
            run_id: parent_id.clone(),
            index: 0,
            kind: StepKind::Llm,
            name: "fake/m".into(),
            status: StepStatus::Succeeded,
            started_at: now,
            finished_at: Some(now),
            tokens: None,
            payload: json!({ "message": asked, "steered": [] }),
        })
        .await
        .unwrap();
    let child_thread = format!("t:crash/sub/{}.1", parent.seq);
    let child_id = hearth_core::new_run_id();
    // Stored as `delegate` stores it: claimed, with its model and its
    // parent's mode, its thread without settings of its own.
    store
        .create_claimed_run(
            NewRun {
                parent_run_id: Some(parent_id.clone()),
                ..new_run(
                    &child_id,
                    &child_thread,
                    hearth_core::DELEGATE_SOURCE,
                    "the task",
                    Some(hearth_core::delegate_key(&parent_id, "c1")),
                )
            },
            "dead-process",
            now + 3_600_000,
            "fake/small",
            Some("ask"),
        )
        .await
        .unwrap();

    let counts = Calls::default();
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &counts).await;
    let parent = finished(&rt, &parent_id).await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    let text = parent.output.unwrap().text;
    assert!(text.contains("answer to [the task]"), "{text}");
    // The recovered child still has only the tools its parent chose.
    assert!(
        text.contains("not among the tools this sub-agent was given"),
        "{text}"
    );
    assert_eq!(counts.lookup.load(Ordering::SeqCst), 0);
    let env = rt.get_run(&parent_id).await.unwrap();
    assert_eq!(env.children.len(), 1, "one child: {:?}", env.children);
    assert_eq!(env.children[0].run_id, child_id);
    // Its model read again from the parent's call, not its thread's default.
    assert_eq!(env.children[0].model.as_deref(), Some("fake/small"));
    let small_calls = fake
        .requests()
        .iter()
        .filter(|r| r["model"] == "small")
        .count();
    assert_eq!(small_calls, 2, "the child ran once: a call and its answer");
    let next = RunFilter {
        thread_key: Some(format!(
            "t:crash/sub/{}.2",
            env_seq(&store, &parent_id).await
        )),
        status: None,
        limit: 10,
        ..RunFilter::default()
    };
    assert!(store.list_runs(&next).await.unwrap().is_empty());
}

async fn env_seq(store: &Arc<dyn Store>, run_id: &str) -> i64 {
    store.get_run(run_id).await.unwrap().unwrap().seq
}

pub(crate) fn new_run(
    id: &str,
    thread: &str,
    source: &str,
    input: &str,
    key: Option<String>,
) -> NewRun {
    NewRun {
        run_id: id.into(),
        thread_key: thread.into(),
        user_key: USER.into(),
        source: source.into(),
        input: input.into(),
        idempotency_key: key,
        created_at: hearth_core::now_ms(),
        scope: None,
        roles: Vec::new(),
        parent_run_id: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_pool_of_the_parents_thread_stops_parent_and_child() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "look it up", "model": "fake/small"}),
    )];
    script(&fake, calls, |body| {
        if tool_results(body).is_empty() {
            Reply::tool_calls(vec![ToolCallSpec::new("t1", "lookup", "{}")])
        } else {
            Reply::text("found it")
        }
    });
    // Two calls for the conversation: the parent's first and the child's first.
    let pool =
        "[[budget.pools]]\nname = \"two\"\nkind = \"requests\"\nlimit = 2\nscope = \"thread\"\n";
    let rt = runtime(dir.path(), &store, &toml(&fake, pool), &Calls::default()).await;

    let parent = ask(&rt, "t:budget").await;
    assert_eq!(parent.status, RunStatus::Failed, "{parent:?}");
    assert_eq!(parent.error.as_ref().unwrap().code, "budget_exceeded");
    let env = rt.get_run(&parent.run_id).await.unwrap();
    let child = rt.get_run(&env.children[0].run_id).await.unwrap();
    assert_eq!(child.status, RunStatus::Failed, "{child:?}");
    assert_eq!(child.error.as_ref().unwrap().code, "budget_exceeded");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_parent_cancels_its_children() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![
        delegate(
            "c1",
            json!({"task": "slow one", "model": "fake/small", "wait": false}),
        ),
        delegate("c2", json!({"task": "slow two", "model": "fake/small"})),
    ];
    // The children never answer.
    script(&fake, calls, |_| Reply::hang());
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &Calls::default()).await;
    let env = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread("t:stop"),
            user_key: testing::user(USER),
            text: "start two".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    // Both children asked their model.
    fake.wait_for_requests(3).await;
    let children = rt.get_run(&env.run_id).await.unwrap().children;
    assert_eq!(children.len(), 2, "{children:?}");

    let parent = rt.cancel(&env.run_id).await.unwrap();
    assert_eq!(parent.status, RunStatus::Cancelled, "{parent:?}");
    for child in children {
        let c = finished(&rt, &child.run_id).await;
        assert_eq!(c.status, RunStatus::Cancelled, "{c:?}");
    }
}

#[tokio::test]
async fn a_message_from_outside_cannot_pose_as_a_sub_agent() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &Calls::default()).await;
    let err = rt
        .ingest(Inbound {
            source: hearth_core::DELEGATE_SOURCE.into(),
            thread_key: testing::thread("t:x/sub/1.1"),
            user_key: testing::user(USER),
            text: "hi".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: Some("delegate:run_x:c1".into()),
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("reserved for sub-agents"), "{err}");
    // Nor may another source write into a sub-agent's thread: its runs
    // spend from the root thread's pools.
    let err = rt
        .ingest(Inbound {
            source: "api".into(),
            thread_key: testing::thread("t:x/sub/1.1"),
            user_key: testing::user(USER),
            text: "hi".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("sub-agent's thread"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incognito_parent_has_incognito_children() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "quietly", "model": "fake/small"}),
    )];
    script(&fake, calls, answers_its_task);
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &Calls::default()).await;
    rt.set_incognito(&testing::thread("t:quiet"), true)
        .await
        .unwrap();

    let parent = ask(&rt, "t:quiet").await;
    assert_eq!(parent.status, RunStatus::Succeeded, "{parent:?}");
    let children = rt.get_run(&parent.run_id).await.unwrap().children;
    assert_eq!(children.len(), 1, "{children:?}");
    let child = &children[0];
    assert_eq!(child.status, RunStatus::Succeeded);
    // Neither run reached the disk.
    assert!(store.get_run(&child.run_id).await.unwrap().is_none());
    assert!(store.get_run(&parent.run_id).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_stops_at_the_steps_its_parent_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    let calls = vec![delegate(
        "c1",
        json!({"task": "look twice", "model": "fake/small", "max_steps": 1}),
    )];
    script(&fake, calls, |_| {
        Reply::tool_calls(vec![ToolCallSpec::new("t1", "lookup", "{}")])
    });
    let counts = Calls::default();
    let rt = runtime(dir.path(), &store, &toml(&fake, ""), &counts).await;

    let parent = ask(&rt, "t:short").await;
    let text = parent.output.unwrap().text;
    assert!(text.contains("\"status\":\"failed\""), "{text}");
    assert!(text.contains("max_steps = 1"), "{text}");
    assert_eq!(counts.lookup.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_child_is_routed_by_its_own_task() {
    let dir = tempfile::tempdir().unwrap();
    let store = common::store(dir.path());
    let fake = FakeOpenAi::start().await;
    // Whichever arm the router picks, the parent delegates and the child answers.
    fake.respond_with(|body| {
        let results = tool_results(body);
        Some(match task(body).as_str() {
            "route me" if results.is_empty() => Reply::tool_calls(vec![delegate(
                "c1",
                json!({"task": "child task", "model": "auto"}),
            )]),
            "route me" => Reply::text(format!("all done: {}", results.join(" | "))),
            _ => Reply::text("child answer"),
        })
    });
    let router = "[router]\nstrategy = \"cheapest\"\n[[router.arms]]\nmodel = \"fake/m\"\n\
                  [[router.arms]]\nmodel = \"fake/small\"\n";
    let rt = runtime(dir.path(), &store, &toml(&fake, router), &Calls::default()).await;
    let env = rt
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread("t:auto"),
            user_key: testing::user(USER),
            text: "route me".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    let parent = finished(&rt, &env.run_id).await;
    assert!(parent.output.unwrap().text.contains("child answer"));
    let child = &rt.get_run(&env.run_id).await.unwrap().children[0];
    // The router chose the child's model: its journal starts with a route step.
    let trace = rt.trace(&child.run_id).await.unwrap();
    assert_eq!(trace[0].kind, StepKind::Route, "{trace:?}");
}
