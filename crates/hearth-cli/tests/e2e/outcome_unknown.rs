//! The headline guarantee: a write-class step that started and has no
//! recorded outcome is never executed again after a crash; the model (and so
//! the user) is told its outcome is unknown.
//!
//! To kill hearth while the write runs, every fsync of the process is slowed
//! by an LD_PRELOAD shim (the load driver's, from hearth-bench) and the store
//! runs in strict durability: each commit then takes two seconds, so the
//! `tool.started` event, sent once the call is journaled as started, leaves
//! at least two seconds before the tool's own write is synced and the
//! outcome can follow it (room for a loaded CI machine to deliver the kill).
//! The write must change something: a commit that changes nothing syncs
//! nothing, and the outcome then follows within a millisecond (the memory the
//! tool forgets is saved first, at normal speed).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures_util::StreamExt;
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config};

/// Builds the fsync-delay shim with the system C compiler.
fn build_shim(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("fsync_delay.c");
    std::fs::write(&src, include_str!("../../../hearth-bench/fsync_delay.c")).unwrap();
    let lib = dir.join("fsync_delay.so");
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&lib)
        .arg(&src)
        .arg("-ldl")
        .stderr(Stdio::inherit())
        .status()
        .expect("running cc to build the fsync-delay shim");
    assert!(status.success(), "cc could not build the fsync-delay shim");
    lib
}

#[tokio::test]
async fn a_write_cut_by_sigkill_is_not_run_again_and_is_reported_unknown() {
    let fake = FakeOpenAi::start().await;
    // At normal speed: the memory the cut write forgets (the first, id 1).
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c0",
        "memory_save",
        r#"{"text": "my parking spot is B12"}"#,
    )]));
    fake.push(Reply::text("Saved."));
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "c1",
        "memory_forget",
        r#"{"id": 1}"#,
    )]));
    let dir = tempfile::tempdir().unwrap();
    let shim_dir = tempfile::tempdir().unwrap();
    let shim = build_shim(shim_dir.path());
    let config = format!(
        "{}\n[store]\ndurability = \"strict\"\n[tools]\nno_confirm = [\"memory_forget\"]\n",
        fake_config(&fake.base_url())
    );
    let slow = [
        ("LD_PRELOAD", shim.to_str().unwrap()),
        ("HEARTH_FSYNC_DELAY_US", "2000000"),
    ];
    // The database is created and migrated, and the memory saved, at
    // normal speed first.
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, saved) = h
        .post(json!({ "text": "remember my parking spot", "thread_key": "api:seed", "wait": true }))
        .await;
    assert_eq!(s, 200, "{saved}");
    assert_eq!(saved["status"], "succeeded", "{saved}");
    h.kill().await;
    let before = fake.requests().len();
    let h = Hearth::start_with(dir.path(), Some(&config), &slow).await;
    let (s, run) = h
        .post(json!({ "text": "forget memory 4242", "thread_key": "api:cut" }))
        .await;
    assert_eq!(s, 202, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();

    // Follow the run live and kill hearth the moment the write has started.
    let resp = h
        .http
        .get(h.at(&format!("/v1/runs/{run_id}/events")))
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(chunk) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
            if seen.contains("event: tool.started") {
                return;
            }
        }
        panic!("the stream ended before the tool started: {seen}");
    })
    .await
    .expect("the write-class call did not start");
    h.kill().await;

    // After a restart (at normal speed) the run resumes without the write.
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let env = h.wait_run(&run_id).await;
    assert_eq!(env["status"], "succeeded", "{env}");
    let requests = &fake.requests()[before..];
    assert_eq!(
        requests.len(),
        2,
        "one model call before the crash, one after"
    );
    let tool_results: Vec<&Value> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_results.len(), 1, "{tool_results:?}");
    let result = tool_results[0]["content"].as_str().unwrap();
    assert!(
        result.contains("outcome unknown") && result.contains("not repeated"),
        "the model was not told the outcome is unknown: {result}"
    );
    // The journal holds the one call, still without an outcome: it never ran again.
    let (_, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    let tools: Vec<(String, String)> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool")
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        tools,
        [("memory_forget".to_owned(), "started".to_owned())],
        "{trace}"
    );
    h.kill().await;
}
