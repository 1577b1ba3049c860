//! Several replicas of the real binary on one PostgreSQL database (the
//! throw-away cluster `.ci/test` starts; skipped without one, except under
//! CI): a run of a replica that dies is finished by another, once, and the
//! thread's order holds between replicas.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::json;

use crate::harness::{Hearth, fake_config, user_texts};

/// The fake provider's config on PostgreSQL, with short leases so a dead
/// replica's runs are taken over quickly.
fn config(base_url: &str) -> String {
    format!(
        "{}[store]\nbackend = \"postgres\"\nlease_secs = 2\n",
        fake_config(base_url)
    )
}

/// GET `path` until `ok` holds of the answer, for at most `within`.
async fn poll(
    h: &Hearth,
    path: &str,
    within: Duration,
    ok: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let (s, v) = h.get(path).await;
        if s == 200 && ok(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never became right: {s} {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh database for a binary built with PostgreSQL; `None` (said on
/// stderr) when the binary or the test server lacks it.
async fn database() -> Option<String> {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return None;
    }
    hearth_store::postgres::testing::fresh_database_url().await
}

#[tokio::test]
async fn a_killed_replicas_run_is_finished_by_another_once_and_in_order() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    // The first call hangs until its replica is killed; the one made after
    // the take-over gets the default (echo) answer.
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    let config = config(&fake.base_url());
    let env = [("HEARTH_DATABASE_URL", url.as_str())];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Hearth::start_with(dir_a.path(), Some(&config), &env).await;
    let b = Hearth::start_with(dir_b.path(), Some(&config), &env).await;

    let (_, ready) = b.get("/readyz").await;
    assert_eq!(ready["store"], "postgres", "{ready}");
    let (_, cluster) = b.get("/v1/cluster").await;
    assert_eq!(cluster["backend"], "postgres", "{cluster}");
    let ids: Vec<_> = cluster["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2, "both replicas heartbeat: {cluster}");
    assert!(ids.contains(&ready["replica"].as_str().unwrap().to_owned()));

    let (s, first) = a
        .post(json!({ "text": "first", "thread_key": "api:shared" }))
        .await;
    assert_eq!(s, 202, "{first}");
    fake.wait_for_requests(1).await;
    // The same thread through the other replica: stored, and held back
    // behind the run replica a executes.
    let (s, second) = b
        .post(json!({ "text": "second", "thread_key": "api:shared" }))
        .await;
    assert_eq!(s, 202, "{second}");
    assert_eq!(second["status"], "queued", "{second}");
    a.kill().await;

    // Replica b takes the dead replica's run over once its lease lapses,
    // then runs the second message, which saw the first exchange once.
    let first_id = first["run_id"].as_str().unwrap();
    let done = poll(
        &b,
        &format!("/v1/runs/{first_id}?wait=20"),
        Duration::from_secs(30),
        |v| v["status"] == "succeeded",
    )
    .await;
    assert_eq!(done["output"]["text"], "echo: first", "{done}");
    let second_id = second["run_id"].as_str().unwrap();
    let done = poll(
        &b,
        &format!("/v1/runs/{second_id}?wait=20"),
        Duration::from_secs(30),
        |v| v["status"] == "succeeded",
    )
    .await;
    assert_eq!(done["output"]["text"], "echo: second", "{done}");
    let last = fake.requests().pop().unwrap();
    assert_eq!(user_texts(&last), ["first", "second"]);
    assert_eq!(
        fake.requests().len(),
        3,
        "one hung call, then one call per run"
    );
    let (_, rt) = b.get("/v1/threads/api:shared/runtime").await;
    assert_eq!(
        rt["message_count"], 4,
        "one question and one answer per run: {rt}"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn a_home_on_postgres_keeps_its_threads_across_a_restart() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let config = config(&fake.base_url());
    let env = [("HEARTH_DATABASE_URL", url.as_str())];
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(dir.path(), Some(&config), &env).await;
    let answer = h.ask("api:kept", "hello").await;
    assert_eq!(answer["output"]["text"], "echo: hello", "{answer}");
    assert!(h.terminate().await.success());
    assert!(
        !dir.path().join("hearth.db").exists(),
        "nothing went to SQLite"
    );

    let h = Hearth::start_with(dir.path(), Some(&config), &env).await;
    let (_, history) = h.get("/v1/threads/api:kept/history").await;
    let text = history.to_string();
    assert!(
        text.contains("hello") && text.contains("echo: hello"),
        "{history}"
    );
    // Without the URL the server refuses to start, naming the variable.
    drop(h);
    let out = crate::harness::command(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a configuration to change");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HEARTH_DATABASE_URL"), "{err}");
}
