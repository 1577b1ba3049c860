//! Several replicas of the real binary on one PostgreSQL database (the
//! throw-away cluster `.ci/test` starts; skipped without one, except under
//! CI): a run of a replica that dies is finished by another, once, and the
//! thread's order holds between replicas.

use std::time::Duration;

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
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
    // The thread goes on from what the database kept: its next run, stored
    // claimed by this new process, reads the thread's history from it.
    let answer = h.ask("api:kept", "again").await;
    assert_eq!(answer["output"]["text"], "echo: again", "{answer}");
    let sent = fake.requests().pop().unwrap();
    assert_eq!(user_texts(&sent), ["hello", "again"]);
    assert!(sent.to_string().contains("echo: hello"), "{sent}");
    // Without the URL the server refuses to start, naming the variable.
    // Waited for, so the home lock is free when the next one starts.
    h.kill().await;
    let out = crate::harness::command(dir.path())
        .args(["serve", "--bind", "127.0.0.1:0"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a configuration to change");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("HEARTH_DATABASE_URL"), "{err}");
}

/// Two replicas on a fresh database with leases of 30 s (an upkeep round
/// every 10 s): what happens within a second or two is a wake-up's doing,
/// not a poll's.
async fn two_replicas(
    fake: &FakeOpenAi,
    url: &str,
) -> (Hearth, Hearth, tempfile::TempDir, tempfile::TempDir) {
    let config = format!(
        "{}[store]\nbackend = \"postgres\"\nlease_secs = 30\n",
        fake_config(&fake.base_url())
    );
    let env = [("HEARTH_DATABASE_URL", url)];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Hearth::start_with(dir_a.path(), Some(&config), &env).await;
    let b = Hearth::start_with(dir_b.path(), Some(&config), &env).await;
    // Each hears the other from here on.
    for h in [&a, &b] {
        poll(h, "/readyz", Duration::from_secs(10), |v| {
            v["checks"]["wakeups"] == "ok"
        })
        .await;
    }
    (a, b, dir_a, dir_b)
}

/// A message is stored without its thread's settings read first: the
/// insert stores it claimed only if the thread has none of its own. A
/// model, a thinking level or a mode set on one replica is still what a
/// message sent to the other runs with; a thread without settings runs
/// with the defaults.
#[tokio::test]
async fn settings_set_on_one_replica_choose_the_run_of_a_message_sent_to_another() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    let (s, v) = a
        .send(
            reqwest::Method::PUT,
            "/v1/threads/api:set/model",
            json!({ "model": "fake/other-model" }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = a
        .send(
            reqwest::Method::PUT,
            "/v1/threads/api:planned/mode",
            json!({ "mode": "plan" }),
        )
        .await;
    assert_eq!(s, 200, "{v}");

    let answer = b.ask("api:set", "which model").await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["model"], "fake/other-model", "{answer}");
    assert_eq!(fake.requests().last().unwrap()["model"], "other-model");

    let answer = b.ask("api:planned", "make a plan").await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    let sent = fake.requests().last().unwrap().clone();
    let system = sent["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(system.contains("plan mode"), "{system}");

    let answer = b.ask("api:plain", "hello").await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["model"], "fake/fake-model", "{answer}");
    let sent = fake.requests().last().unwrap().clone();
    assert_eq!(sent["model"], "fake-model");
    let system = sent["messages"][0]["content"].as_str().unwrap_or_default();
    assert!(!system.contains("plan mode"), "{system}");
}

/// An OpenAI client's request names a model and sends its conversation
/// with it. Sent to one replica while the thread (one per `user`) is busy
/// on another, it is stored queued, and whichever replica runs it next runs
/// it with that model and that conversation, not the thread's.
#[tokio::test]
async fn a_request_queued_behind_a_run_on_another_replica_keeps_its_model_and_history() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.respond_with(|body| {
        let texts = user_texts(body);
        (texts.last().map(String::as_str) == Some("slow"))
            .then(|| Reply::text("slow answer").with_delay(Duration::from_millis(1500)))
    });
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    let (s, v) = a
        .post(json!({ "text": "slow", "thread_key": "openai:pgu", "user_key": "openai:user:pgu" }))
        .await;
    assert_eq!(s, 202, "{v}");
    let busy = tokio::time::Instant::now() + Duration::from_secs(10);
    while fake.request_count() == 0 {
        assert!(
            tokio::time::Instant::now() < busy,
            "the first run never called"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let body = json!({
        "model": "hearth/fake/other-model",
        "user": "pgu",
        "messages": [
            {"role": "user", "content": "where did I park"},
            {"role": "assistant", "content": "level 3"},
            {"role": "user", "content": "and the keys"},
        ],
    });
    let (s, v) = b
        .send(reqwest::Method::POST, "/openai/v1/chat/completions", body)
        .await;
    assert_eq!(s, 200, "{v}");
    let sent = fake.requests().last().unwrap().clone();
    let messages = &sent["messages"];
    assert_eq!(sent["model"], "other-model", "{messages}");
    assert_eq!(
        user_texts(&sent),
        ["where did I park", "and the keys"],
        "the client's conversation, not the thread's: {messages}"
    );
}

/// A thread that keeps talking, to one replica and then to the other: each
/// model call carries every earlier turn of the thread, whichever replica
/// answered it (a replica starts a run from the context it holds only when
/// the message's insert shows nothing written since), and none from before
/// a new session started on the other replica.
#[tokio::test]
async fn a_thread_talking_to_both_replicas_sends_every_earlier_turn() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    let mut said: Vec<String> = Vec::new();
    let order = [
        "a", "a", "a", "b", "a", "a", "b", "b", "a", "new on b", "a", "a",
    ];
    for (i, on) in order.into_iter().enumerate() {
        if on == "new on b" {
            let (s, v) = b
                .send(
                    reqwest::Method::DELETE,
                    "/v1/threads/api:talk/session",
                    json!({}),
                )
                .await;
            assert_eq!(s, 200, "{v}");
            said.clear();
            continue;
        }
        let h = if on == "a" { &a } else { &b };
        let text = format!("turn {i} on {on}");
        let answer = h.ask("api:talk", &text).await;
        assert_eq!(answer["status"], "succeeded", "{answer}");
        said.push(text);
        let sent = fake.requests().last().unwrap().clone();
        assert_eq!(user_texts(&sent), said, "{}", sent["messages"]);
    }
}

/// A routed run is routed as it is stored, claimed with the model chosen,
/// and reads no history when its thread had none; the next run of that
/// thread still sends the turn before it, and a model set on a thread
/// still wins over the router.
#[tokio::test]
async fn routed_runs_on_postgres_keep_their_threads_history() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let config = format!(
        "{}[store]\nbackend = \"postgres\"\n[router]\nstrategy = \"learn\"\n",
        fake_config(&fake.base_url())
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(
        dir.path(),
        Some(&config),
        &[("HEARTH_DATABASE_URL", url.as_str())],
    )
    .await;
    for text in ["first question", "second question"] {
        let answer = h.ask("api:routed", text).await;
        assert_eq!(answer["status"], "succeeded", "{answer}");
        let (s, trace) = h
            .get(&format!(
                "/v1/runs/{}/trace",
                answer["run_id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(s, 200, "{trace}");
        assert_eq!(trace["steps"][0]["kind"], "route", "{trace}");
    }
    let sent = fake.requests().last().unwrap().clone();
    assert_eq!(
        user_texts(&sent),
        ["first question", "second question"],
        "{}",
        sent["messages"]
    );
    // A model set on the thread wins over the router, though a message is
    // routed as it is stored (the insert holds it for its worker then).
    let (s, v) = h
        .send(
            reqwest::Method::PUT,
            "/v1/threads/api:pinned/model",
            json!({ "model": "fake/other-model" }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let answer = h.ask("api:pinned", "which model").await;
    assert_eq!(answer["status"], "succeeded", "{answer}");
    assert_eq!(answer["model"], "fake/other-model", "{answer}");
    let (_, trace) = h
        .get(&format!(
            "/v1/runs/{}/trace",
            answer["run_id"].as_str().unwrap()
        ))
        .await;
    assert_ne!(trace["steps"][0]["kind"], "route", "{trace}");
}

#[tokio::test]
async fn a_confirmation_answered_on_one_replica_resumes_the_run_on_another_within_a_second() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    fake.push(Reply::tool_calls(vec![hearth_testkit::ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    fake.push(Reply::text("done"));
    let user = "api:user:pg-confirm";
    let (s, waiting) = a
        .post(json!({ "text": "forget it", "thread_key": "api:pg-confirm", "user_key": user, "wait": true }))
        .await;
    assert_eq!(s, 202, "{waiting}");
    assert_eq!(waiting["status"], "awaiting_confirmation", "{waiting}");
    let token = waiting["confirmation"]["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = waiting["run_id"].as_str().unwrap().to_owned();

    let started = std::time::Instant::now();
    let r = b
        .http
        .post(b.at(&format!("/v1/confirmations/{token}")))
        .json(&json!({ "user_key": user, "approve": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        200,
        "replica b answers by the stored hash"
    );
    // Replica a's stream of the run ends with the run's end.
    let events = a.events(&run_id, None).await;
    let took = started.elapsed();
    let end = events.last().unwrap();
    assert_eq!(end.1, "run.succeeded", "{events:?}");
    assert_eq!(end.2["output"]["text"], "done");
    assert!(
        took < Duration::from_secs(1),
        "the run on replica a resumed {took:?} after the answer on b"
    );
}

#[tokio::test]
async fn a_follower_on_another_replica_gets_the_same_end() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;

    // Followed on b while a executes it: the stream ends with a's end.
    fake.push(Reply::text("the slow answer").with_delay(Duration::from_millis(1500)));
    let (s, run) = a
        .post(json!({ "text": "slow", "thread_key": "api:pg-follow" }))
        .await;
    assert_eq!(s, 202, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1).await;
    let (on_b, on_a) = tokio::join!(b.events(&run_id, None), a.events(&run_id, None));
    let (end_b, end_a) = (on_b.last().unwrap(), on_a.last().unwrap());
    assert_eq!(end_b.1, "run.succeeded", "{on_b:?}");
    assert_eq!(end_b, end_a, "the same end, under the same id");
    assert_eq!(
        end_b.2.to_string(),
        end_a.2.to_string(),
        "byte-identical answer"
    );
    assert_eq!(end_b.2["output"]["text"], "the slow answer");
}

/// A message sent with `wait` on an idle thread is stored claimed by the
/// replica that took it and runs there, and such a run's end is notified
/// only when somebody asked (migration 0015: most ends then commit without
/// NOTIFY's lock). A follower on another replica asks: its stream ends with
/// the end at once, not at its next upkeep round (10 s here).
#[tokio::test]
async fn a_follower_on_another_replica_of_a_run_stored_claimed_gets_its_end_at_once() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    fake.push(Reply::text("the slow answer").with_delay(Duration::from_millis(1500)));
    let sent = async {
        let answer = a
            .post(json!({ "text": "slow", "thread_key": "api:pg-claimed", "wait": true }))
            .await;
        (answer, std::time::Instant::now())
    };
    let followed = async {
        fake.wait_for_requests(1).await;
        let (s, runs) = b.get("/v1/runs?thread_key=api:pg-claimed").await;
        assert_eq!(s, 200, "{runs}");
        let run_id = runs["runs"][0]["run_id"].as_str().unwrap().to_owned();
        let on_b = b.events(&run_id, None).await;
        (on_b, std::time::Instant::now())
    };
    let (((s, answered), answered_at), (on_b, followed_at)) = tokio::join!(sent, followed);
    assert_eq!(s, 200, "{answered}");
    assert_eq!(answered["status"], "succeeded", "{answered}");
    let end = on_b.last().unwrap();
    assert_eq!(end.1, "run.succeeded", "{on_b:?}");
    assert_eq!(end.2["output"]["text"], "the slow answer");
    let late = followed_at.saturating_duration_since(answered_at);
    assert!(
        late < Duration::from_secs(2),
        "the follower on b ended {late:?} after a answered"
    );
}

#[tokio::test]
async fn a_follower_on_another_replica_gets_the_stored_tool_steps() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    // A tool call, then a slow answer: b starts following while a waits
    // for the answer, after the call finished.
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_clock",
        "current_time",
        r#"{"timezone":"Asia/Tokyo"}"#,
    )]));
    fake.push(Reply::text("it is late").with_delay(Duration::from_millis(1500)));
    let (s, run) = a
        .post(json!({ "text": "what time is it", "thread_key": "api:pg-steps" }))
        .await;
    assert_eq!(s, 202, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(2).await;
    let (on_b, on_a) = tokio::join!(b.events(&run_id, None), a.events(&run_id, None));
    let kinds = |events: &[(u64, String, serde_json::Value)]| -> Vec<(String, serde_json::Value)> {
        events
            .iter()
            .filter(|e| e.1.starts_with("tool."))
            .map(|e| (e.1.clone(), e.2.clone()))
            .collect()
    };
    assert_eq!(
        kinds(&on_b),
        kinds(&on_a),
        "the follower on b sees the tool steps a announced: {on_b:?}"
    );
    assert_eq!(kinds(&on_b).len(), 2, "{on_b:?}");
    assert_eq!(on_b.last().unwrap(), on_a.last().unwrap(), "the same end");
}

#[tokio::test]
async fn one_replica_fires_the_jobs_and_a_job_added_elsewhere_wakes_it() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    // Exactly one of the two holds the jobs duty.
    let (_, cluster) = a.get("/v1/cluster").await;
    let holders: Vec<String> = cluster["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["holds"].as_array().unwrap().iter().any(|h| h == "jobs"))
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(holders.len(), 1, "{cluster}");
    let (_, ready) = a.get("/readyz").await;
    let (holder, other) = if ready["replica"] == holders[0].as_str() {
        (&a, &b)
    } else {
        (&b, &a)
    };

    // Added on the replica that does not fire jobs: the holder hears of it
    // at once (with 30 s leases its own round would come only in 10 s).
    let r = other
        .http
        .post(other.at("/v1/jobs"))
        .json(&json!({"name": "tick", "schedule": "every 1s",
                      "thread_key": "api:pg-tick", "text": "tick"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4);
    let runs = loop {
        let (_, v) = holder
            .get("/v1/runs?thread_key=api:pg-tick&limit=100")
            .await;
        let runs = v["runs"].as_array().unwrap().clone();
        if runs.len() >= 2 {
            break runs;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job fired {} times within 4 s of being added on the other replica",
            runs.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut instants: Vec<&str> = runs
        .iter()
        .map(|r| r["scheduled_at"].as_str().unwrap())
        .collect();
    let n = instants.len();
    instants.dedup();
    assert_eq!(instants.len(), n, "an instant fired twice: {runs:?}");
}

#[tokio::test]
async fn a_cancel_on_another_replica_stops_the_run_at_once() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    // Cancelled on b while a executes it: a stops at once.
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    let (s, run) = a
        .post(json!({ "text": "hang", "thread_key": "api:pg-cancel" }))
        .await;
    assert_eq!(s, 202, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1).await;
    let (s, cancelled) = b
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{run_id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(s, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let stopped = tokio::time::timeout(Duration::from_secs(3), a.events(&run_id, None))
        .await
        .expect("the run on replica a stopped within 3 s of the cancel on b");
    assert_eq!(stopped.last().unwrap().1, "run.cancelled", "{stopped:?}");
}

/// A cancel answered by a replica that is not executing the run ends it in
/// the store at once, but the thread's next run must not start before the
/// executing replica has stopped the cancelled one: one run at a time per
/// thread. Replica a is frozen (SIGSTOP) while it executes the first run, so
/// it cannot stop it; the next message, queued behind it, waits for a.
#[tokio::test]
async fn a_cancel_on_another_replica_starts_the_threads_next_run_only_once_the_first_stopped() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    let thread = "api:pg-cancel-next";
    let (s, first) = a
        .post(json!({ "text": "hang", "thread_key": thread }))
        .await;
    assert_eq!(s, 202, "{first}");
    let first_id = first["run_id"].as_str().unwrap().to_owned();
    fake.wait_for_requests(1).await;
    let (s, second) = b
        .post(json!({ "text": "next", "thread_key": thread }))
        .await;
    assert_eq!(s, 202, "{second}");
    assert_eq!(second["status"], "queued", "{second}");
    let second_id = second["run_id"].as_str().unwrap().to_owned();

    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &a.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {sig}");
    };
    signal("-STOP");
    let (s, cancelled) = b
        .send(
            reqwest::Method::POST,
            &format!("/v1/runs/{first_id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(s, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    // The cancel's end, on b, looked for the thread's next run before it
    // answered: a still executes the first, so the next one stays queued.
    let (_, next) = b.get(&format!("/v1/runs/{second_id}")).await;
    signal("-CONT");
    assert_eq!(next["status"], "queued", "{next}");
    assert_eq!(fake.requests().len(), 1, "the next run called the model");

    // Once a stops the first run, the next one starts (a wake-up, not an
    // upkeep round, which is 10 s apart).
    let done = poll(
        &b,
        &format!("/v1/runs/{second_id}"),
        Duration::from_secs(5),
        |v| v["status"] == "succeeded",
    )
    .await;
    assert_eq!(done["output"]["text"], "echo: next", "{done}");
    let stopped = a.events(&first_id, None).await;
    assert_eq!(stopped.last().unwrap().1, "run.cancelled", "{stopped:?}");
}

#[tokio::test]
async fn a_threads_follow_up_sent_to_another_replica_starts_as_soon_as_the_first_ends() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    fake.push(Reply::text("first answer").with_delay(Duration::from_millis(1000)));
    let (s, first) = a
        .post(json!({ "text": "first", "thread_key": "api:pg-order" }))
        .await;
    assert_eq!(s, 202, "{first}");
    fake.wait_for_requests(1).await;
    let (s, second) = b
        .post(json!({ "text": "second", "thread_key": "api:pg-order" }))
        .await;
    assert_eq!(s, 202, "{second}");
    assert_eq!(second["status"], "queued", "{second}");
    let first_id = first["run_id"].as_str().unwrap();
    let events = a.events(first_id, None).await;
    assert_eq!(events.last().unwrap().1, "run.succeeded", "{events:?}");
    let ended = std::time::Instant::now();
    // The stored status, read from b (which is not executing it, nor
    // following it: this does not depend on how b follows runs).
    let second_id = second["run_id"].as_str().unwrap();
    let done = poll(
        &b,
        &format!("/v1/runs/{second_id}"),
        Duration::from_secs(15),
        |v| v["status"] == "succeeded",
    )
    .await;
    let took = ended.elapsed();
    assert_eq!(done["output"]["text"], "echo: second", "{done}");
    // An upkeep round is 10 s apart: this is the wake-up.
    assert!(
        took < Duration::from_secs(2),
        "the follow-up ended {took:?} after the first"
    );
    assert_eq!(
        user_texts(&fake.requests().pop().unwrap()),
        ["first", "second"]
    );
}

#[tokio::test]
async fn a_message_for_an_incognito_thread_held_by_another_replica_is_refused_naming_it() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, _da, _db) = two_replicas(&fake, &url).await;
    let (_, ready) = a.get("/readyz").await;
    let holder = ready["replica"].as_str().unwrap().to_owned();

    let incognito = |h: &Hearth, on: bool| {
        h.http
            .put(h.at("/v1/threads/api:pg-inc/incognito"))
            .json(&json!({ "enabled": on }))
            .send()
    };
    assert_eq!(incognito(&a, true).await.unwrap().status().as_u16(), 200);
    let answer = a.ask("api:pg-inc", "secret words").await;
    assert_eq!(answer["output"]["text"], "echo: secret words", "{answer}");

    let (s, refused) = b
        .post(json!({ "text": "more secret words", "thread_key": "api:pg-inc" }))
        .await;
    assert_eq!(s, 409, "{refused}");
    assert_eq!(refused["error"]["code"], "incognito_elsewhere", "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains(&holder), "{message}");
    let r = incognito(&b, true).await.unwrap();
    assert_eq!(r.status().as_u16(), 409, "b cannot take a's thread");
    assert_eq!(fake.requests().len(), 1, "nothing ran on b");

    // Turned off on a: b takes the thread's messages again.
    assert_eq!(incognito(&a, false).await.unwrap().status().as_u16(), 200);
    let answer = b.ask("api:pg-inc", "plain words").await;
    assert_eq!(answer["output"]["text"], "echo: plain words", "{answer}");
}

#[tokio::test]
async fn a_replica_that_loses_the_database_is_not_ready_and_recovers_when_it_returns() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let config = format!(
        "{}[store]\nbackend = \"postgres\"\nlease_secs = 30\n",
        fake_config(&fake.base_url())
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start_with(dir.path(), Some(&config), &[("HEARTH_DATABASE_URL", &url)]).await;
    assert_eq!(h.get("/readyz").await.0, 200);

    hearth_store::postgres::testing::set_accepting(&url, false).await;
    let (s, ready) = tokio::time::timeout(Duration::from_secs(10), h.get("/readyz"))
        .await
        .expect("/readyz answers without the database");
    assert_eq!(s, 503, "{ready}");
    assert_eq!(ready["status"], "not_ready", "{ready}");
    assert_eq!(h.get("/healthz").await.0, 200, "alive all the same");
    let (s, refused) = h
        .post(json!({ "text": "while down", "thread_key": "api:pg-down" }))
        .await;
    assert!(
        s >= 500,
        "no run starts without the database: {s} {refused}"
    );
    assert!(fake.requests().is_empty());

    hearth_store::postgres::testing::set_accepting(&url, true).await;
    poll(&h, "/readyz", Duration::from_secs(10), |v| {
        v["status"] == "ready"
    })
    .await;
    let answer = h.ask("api:pg-down", "back").await;
    assert_eq!(answer["output"]["text"], "echo: back", "{answer}");
}

/// GET `/v1/runs` on `h` with `token` (none: no `Authorization`), its status.
async fn runs_status(h: &Hearth, token: Option<&str>) -> u16 {
    let mut req = reqwest::Client::new().get(h.at("/v1/runs"));
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.unwrap().status().as_u16()
}

/// Asks `runs_status` until it is `want`, for at most 5 s: a replica hears
/// of a change to the tokens at once, and holds what it read a second at
/// most.
async fn runs_status_becomes(h: &Hearth, token: Option<&str>, want: u16) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let status = runs_status(h, token).await;
        if status == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "GET /v1/runs stayed {status}, not {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each replica holds what it read of the tokens; a token made on one
/// replica closes another's open loopback door, works there at once, and
/// stops working there once `hearth token revoke` (another process)
/// revokes it.
#[tokio::test]
async fn a_token_made_on_one_replica_and_revoked_by_the_cli_is_seen_by_another() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let (a, b, dir_a, _dir_b) = two_replicas(&fake, &url).await;
    // Loopback and no token: open, and B now holds that no token exists.
    assert_eq!(runs_status(&b, None).await, 200);
    let (status, made) = a
        .send(
            reqwest::Method::POST,
            "/v1/tokens",
            json!({ "name": "ops" }),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let secret = made["token"].as_str().unwrap().to_owned();
    let id = made["id"].as_str().unwrap().to_owned();
    // A made it: closed there at once.
    assert_eq!(runs_status(&a, None).await, 401);
    runs_status_becomes(&b, None, 401).await;
    // An unknown token is never held: it works on B at once.
    assert_eq!(runs_status(&b, Some(&secret)).await, 200);

    crate::harness::succeeds(
        crate::harness::command(dir_a.path())
            .env("HEARTH_DATABASE_URL", &url)
            .args(["token", "revoke", &id]),
    )
    .await;
    runs_status_becomes(&b, Some(&secret), 401).await;
    runs_status_becomes(&a, Some(&secret), 401).await;
}
