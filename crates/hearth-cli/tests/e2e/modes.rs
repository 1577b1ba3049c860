//! Permission modes end to end: `hearth mode set|show`, a `plan` run that
//! is offered only read tools and asked for a plan, `--run-plan` sending
//! that plan back, and the mode and decision in a run's trace.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::Value;

use crate::harness::{Hearth, fake_config, hearth, offered_tools, user_texts};

#[tokio::test]
async fn plan_then_run_the_plan_and_the_trace_shows_the_mode() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    // Nothing always asks here: auto then runs memory_forget unasked.
    let config = format!(
        "{}\n[permissions]\nalways_ask = []\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;

    let (code, out, err) = hearth(&h, &["mode", "show"]).await;
    assert_eq!((code, out.trim()), (0, "mode ask"), "{err}");
    let (code, out, err) = hearth(&h, &["mode", "set", "plan"]).await;
    assert_eq!((code, out.trim()), (0, "mode plan"), "{err}");
    let (code, _, err) = hearth(&h, &["mode", "set", "sideways"]).await;
    assert_eq!(code, 2, "clap refuses an unknown mode: {err}");

    fake.push(Reply::text("1. Read the notes.\n2. Delete the old ones."));
    let (code, out, err) = hearth(&h, &["message", "--wait", "tidy my notes"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("1. Read the notes."), "{out}");
    let first = fake.requests().remove(0);
    let offered = offered_tools(&first);
    assert!(offered.contains(&"memory_search".to_owned()), "{offered:?}");
    // memory_forget is write-class (memory_save only adds, and reads as such).
    assert!(
        !offered.contains(&"memory_forget".to_owned()),
        "{offered:?}"
    );
    let system = first["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("plan mode"), "{system}");

    // Approving the plan: the mode changes and the plan goes back.
    fake.push(Reply::text("done as planned"));
    let (code, out, err) = hearth(&h, &["mode", "set", "auto", "--run-plan"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("mode auto"), "{out}");
    assert!(out.contains("done as planned"), "{out}");
    let approved = fake.requests().last().unwrap().clone();
    assert!(offered_tools(&approved).contains(&"memory_forget".to_owned()));
    let texts = user_texts(&approved);
    let last = texts.last().unwrap();
    assert!(
        last.contains("The plan is approved") && last.contains("2. Delete the old ones."),
        "{texts:?}"
    );
    let (_, v) = h.get("/v1/threads/cli:local").await;
    assert_eq!(v["mode"], "auto", "{v}");

    // In auto a write-class call runs without asking; the trace says so.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        r#"{"id": 1}"#,
    )]));
    fake.push(Reply::text("forgotten"));
    let v = h.ask("cli:local", "remember it").await;
    assert_eq!(v["status"], "succeeded", "{v}");
    let run_id = v["run_id"].as_str().unwrap();
    let (_, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    let tool: Vec<&Value> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool")
        .collect();
    assert_eq!(tool.len(), 1, "{trace}");
    assert_eq!(tool[0]["detail"]["mode"], "auto", "{trace}");
    assert_eq!(tool[0]["detail"]["decision"], "ran", "{trace}");

    // Every change is in the audit log.
    let (code, out, err) = hearth(&h, &["audit"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("mode.set") && out.contains("plan->auto"),
        "{out}"
    );
}
