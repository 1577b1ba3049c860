//! What a `delegate` call costs over a plain run, in hearth's own time.
//!
//! The runtime runs in-process over a SQLite home (the same builder as
//! `hearth serve`), against the zero-latency fake provider on loopback. Each
//! iteration is one message on a new thread, waited for to its end:
//!
//! - `plain`: one model call, then the answer;
//! - `read_tool`: a model call asking for a no-op read-class tool, the call,
//!   a second model call, the answer;
//! - `delegate`: the same with `delegate` (`wait: true`) in place of the
//!   no-op tool: the child run (stored, claimed, its one model call, its
//!   end) runs inside the call;
//! - `fake_request`: one chat request to the fake provider, from a client
//!   like hearth's: the provider's own share of a model call.
//!
//! What one child costs hearth is `delegate - read_tool - fake_request`
//! (the child's run beyond the tool call it replaces, less its model
//! call's provider time). Target (issue 22): under 1 ms per child. After
//! criterion's wall times, the same cases are run again and timed in the
//! process's CPU time, which a busy machine inflates far less. Run with
//! `cargo bench -p hearth-bench --bench delegate`; a quick check that it
//! works: `cargo bench -p hearth-bench --bench delegate -- --quick`.

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark unwraps what it set up; a failure there is a broken benchmark"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hearth_core::{DeliveryMode, Inbound, RunStatus};
use hearth_runtime::testing::{self, TestRuntime};
use hearth_runtime::{Runtime, WaitOutcome};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError};
use serde_json::{Value, json};

/// A read-class tool that does nothing: the baseline a `delegate` replaces.
struct Noop {
    spec: hearth_core::ToolSpec,
}

#[async_trait::async_trait]
impl Tool for Noop {
    fn spec(&self) -> &hearth_core::ToolSpec {
        &self.spec
    }
    fn class(&self) -> ToolClass {
        ToolClass::Read
    }
    async fn call(&self, _ctx: &ToolContext, _args: Value) -> Result<Value, ToolError> {
        Ok(json!({ "ok": true }))
    }
}

/// The parent (`m`) asks for what its message names, once; the child
/// (`small`) answers at once.
fn script(fake: &FakeOpenAi) {
    fake.respond_with(|body| {
        let messages = body["messages"].as_array()?;
        let asked = messages
            .iter()
            .rfind(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        let answered = messages.iter().any(|m| m["role"] == "tool");
        let call = |name: &str, args: Value| {
            Reply::tool_calls(vec![ToolCallSpec::new("c1", name, args.to_string())])
        };
        Some(match (body["model"].as_str(), asked, answered) {
            (Some("small"), _, _) | (_, "plain", _) | (_, _, true) => Reply::text("done"),
            (_, "read_tool", false) => call("noop", json!({})),
            (_, _, false) => call("delegate", json!({"task": "answer", "model": "fake/small"})),
        })
    });
}

/// One message `text` on a new thread, to its end; its run id.
async fn one_run(rt: &Runtime, n: &AtomicU64, text: &str) -> String {
    let thread = format!("bench:{}", n.fetch_add(1, Ordering::Relaxed));
    let env = rt
        .ingest(Inbound {
            source: "bench".into(),
            thread_key: testing::thread(thread),
            user_key: testing::user("bench:user:1"),
            text: text.into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    match rt.wait(&env.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) if e.status == RunStatus::Succeeded => env.run_id,
        other => panic!("{text}: the run did not succeed: {other:?}"),
    }
}

fn delegate(c: &mut Criterion) {
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let fake = tokio.block_on(FakeOpenAi::start());
    script(&fake);
    let toml = testing::fake_toml(&fake.base_url(), "models = [\"m\", \"small\"]", "");
    // The fake's default `models` line is replaced by the one above.
    let toml = toml.replacen("models = [\"m\"]\n", "", 1);
    let noop: Arc<dyn Tool> = Arc::new(Noop {
        spec: hearth_core::ToolSpec {
            name: "noop".into(),
            description: "does nothing".into(),
            parameters: json!({"type": "object"}),
        },
    });
    let t = tokio.block_on(TestRuntime::build_with(&toml, |b| b.tool(noop)));
    tokio.block_on(t.runtime.start()).unwrap();
    let rt = &t.runtime;
    let n = AtomicU64::new(0);
    // Once each before timing: a set-up failure shows as a failure.
    for text in ["plain", "read_tool", "delegate"] {
        let run_id = tokio.block_on(one_run(rt, &n, text));
        let children = tokio.block_on(rt.get_run(&run_id)).unwrap().children;
        assert_eq!(children.len(), usize::from(text == "delegate"), "{text}");
    }

    let mut group = c.benchmark_group("delegate");
    for text in ["plain", "read_tool", "delegate"] {
        group.bench_function(text, |b| {
            b.iter(|| tokio.block_on(one_run(rt, &n, text)));
        });
    }
    let client = reqwest::Client::new();
    let url = format!("{}/chat/completions", fake.base_url());
    let request = json!({"model": "m", "messages": [{"role": "user", "content": "plain"}]});
    let mut fake_request = || {
        tokio.block_on(async {
            let r = client
                .post(&url)
                .bearer_auth("test-key")
                .json(&request)
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
            r.bytes().await.unwrap();
        });
    };
    group.bench_function("fake_request", |b| b.iter(fake_request));
    group.finish();

    // The same in CPU time, every thread of the process (the runtime, the
    // store's threads, the fake): on a machine busy with other work, wall
    // time also counts the waits for a core; CPU time barely moves.
    let args: Vec<String> = std::env::args().collect();
    let profiling = args.iter().any(|a| a == "--profile-time" || a == "--quick");
    if args.iter().any(|a| a == "--bench") && !profiling {
        let per = |what: &str, f: &mut dyn FnMut()| {
            let start = cpu_ms();
            for _ in 0..CPU_ITERATIONS {
                f();
            }
            let ms = (cpu_ms() - start) / f64::from(CPU_ITERATIONS);
            println!("delegate/{what:<13} cpu: {ms:.3} ms per iteration");
            ms
        };
        let plain = per("plain", &mut || {
            tokio.block_on(one_run(rt, &n, "plain"));
        });
        let read_tool = per("read_tool", &mut || {
            tokio.block_on(one_run(rt, &n, "read_tool"));
        });
        let delegate = per("delegate", &mut || {
            tokio.block_on(one_run(rt, &n, "delegate"));
        });
        let fake = per("fake_request", &mut fake_request);
        println!(
            "cpu: a plain run {:.3} ms, one child {:.3} ms of hearth's own (delegate - read_tool - fake_request)",
            plain - fake,
            delegate - read_tool - fake
        );
    }
}

/// Iterations of each case in the CPU-time pass.
const CPU_ITERATIONS: u32 = 2_000;

/// CPU time this process used so far (user and system, all threads), in ms.
fn cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command (which may hold spaces) in `(...)`; utime and
    // stime are the 14th and 15th fields, in ticks of 1/100 s (USER_HZ).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 * 10.0
}

criterion_group!(benches, delegate);
criterion_main!(benches);
