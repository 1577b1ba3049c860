//! `hearth store copy-to-postgres` with the real binary: a home that served
//! on SQLite is stopped, copied, and started on PostgreSQL, and answers
//! every thread's history, run, token, grant, job and memory as before; a
//! second copy into the same database is refused with exit 2, and a copy
//! while the server holds the home is refused.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config, hearth};

const USER: &str = "api:user:mover";

/// Parking facts near each other, anything else far away.
fn topic(text: &str) -> Vec<f32> {
    if text.to_lowercase().contains("park") || text.contains("car") {
        vec![0.9, 0.1, 0.0]
    } else {
        vec![0.0, 0.2, 1.0]
    }
}

/// GET with the token (the server asks for one once a token exists).
async fn get(h: &Hearth, token: Option<&str>, path: &str) -> Value {
    let mut req = h.http.get(h.at(path));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200, "{path}");
    r.json().await.unwrap()
}

/// Everything the test compares before and after the move.
async fn answers(h: &Hearth, token: Option<&str>, job: &str) -> Vec<(String, Value)> {
    let mut paths = vec![
        "/v1/threads?limit=100".to_owned(),
        "/v1/permissions?scope=global".to_owned(),
        format!("/v1/jobs/{job}"),
        format!("/v1/memory/search?q=spot&user_key={USER}&mode=text"),
        format!("/v1/memory/search?q=car&user_key={USER}&mode=vector"),
    ];
    for thread in ["api:one", "api:two"] {
        paths.push(format!("/v1/threads/{thread}/history"));
        paths.push(format!("/v1/runs?thread_key={thread}&limit=100"));
    }
    let mut out = Vec::new();
    for p in paths {
        let v = get(h, token, &p).await;
        out.push((p, v));
    }
    let runs = get(h, token, "/v1/runs?limit=100").await;
    for run in runs["runs"].as_array().unwrap() {
        let p = format!("/v1/runs/{}", run["run_id"].as_str().unwrap());
        let v = get(h, token, &p).await;
        out.push((p, v));
    }
    out
}

async fn copy(home: &std::path::Path, url: &str) -> (i32, String, String) {
    let out = command(home)
        .env("HEARTH_DATABASE_URL", url)
        .args(["store", "copy-to-postgres"])
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn a_home_copied_to_postgres_answers_as_it_did_on_sqlite() {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return;
    }
    let Some(url) = hearth_store::postgres::testing::fresh_database_url().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    fake.embed_with(topic);
    let base = format!(
        "{}[memory]\nembeddings = \"fake/embed-model\"\n",
        fake_config(&fake.base_url())
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&base)).await;

    h.ask("api:one", "first").await;
    h.ask("api:one", "second").await;
    h.ask("api:two", "elsewhere").await;
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_save",
        "memory_save",
        json!({ "text": "parked in spot B7 on level 3" }).to_string(),
    )]));
    fake.push(Reply::text("Noted."));
    let (s, v) = h
        .post(
            json!({ "text": "remember where I parked", "thread_key": "api:two",
                      "user_key": USER, "wait": true }),
        )
        .await;
    assert_eq!((s, &v["status"]), (200, &json!("succeeded")), "{v}");
    let (s, g) = h
        .send(
            reqwest::Method::POST,
            "/v1/permissions/grants",
            json!({ "subject": "user:api:user:alice", "capability": "jobs.manage" }),
        )
        .await;
    assert_eq!(s, 201, "{g}");
    let (s, job) = h
        .send(
            reqwest::Method::POST,
            "/v1/jobs",
            json!({"name": "hourly", "schedule": "every 1h", "thread_key": "api:one", "text": "tick"}),
        )
        .await;
    assert_eq!(s, 201, "{job}");
    let job = job["id"].as_str().unwrap().to_owned();
    let before = answers(&h, None, &job).await;
    assert!(
        before
            .iter()
            .any(|(p, v)| p.contains("mode=vector") && v.to_string().contains("B7")),
        "{before:?}"
    );
    let (code, out, err) = hearth(&h, &["--json", "token", "create", "--name", "mover"]).await;
    assert_eq!(code, 0, "{err}");
    let token = serde_json::from_str::<Value>(&out).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();

    // Not while the server holds the home.
    let (code, _, err) = copy(dir.path(), &url).await;
    assert_ne!(code, 0);
    assert!(err.contains("another hearth serve"), "{err}");
    h.terminate().await;

    let (code, out, err) = copy(dir.path(), &url).await;
    assert_eq!(code, 0, "stdout:\n{out}\nstderr:\n{err}");
    for line in [
        "runs: 4 rows",
        "memories: 1 rows",
        "api_tokens: 1 rows",
        "jobs: 1 rows",
    ] {
        assert!(
            out.lines().any(|l| l == line),
            "{line} missing from:\n{out}"
        );
    }
    assert!(out.contains("checksums match"), "{out}");
    assert!(
        !out.contains(&url) && !err.contains(&url),
        "the URL is never printed"
    );

    let pg = format!("{base}[store]\nbackend = \"postgres\"\n");
    let env = [("HEARTH_DATABASE_URL", url.as_str())];
    let h = Hearth::start_with(dir.path(), Some(&pg), &env).await;
    let (_, ready) = h.get("/readyz").await;
    assert_eq!(ready["store"], "postgres", "{ready}");
    // The token still authenticates, and is still needed.
    assert_eq!(h.get("/v1/threads").await.0, 401);
    let after = answers(&h, Some(&token), &job).await;
    assert_eq!(before.len(), after.len());
    for ((path, b), (_, a)) in before.iter().zip(&after) {
        assert_eq!(b, a, "{path} answers differently after the move");
    }
    // New ids follow the copied ones: the thread goes on.
    let (s, v) = {
        let r = h
            .http
            .post(h.at("/v1/messages"))
            .bearer_auth(&token)
            .json(&json!({ "text": "third", "thread_key": "api:one", "wait": true }))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().await.unwrap())
    };
    assert_eq!((s, &v["status"]), (200, &json!("succeeded")), "{v}");
    let history = get(&h, Some(&token), "/v1/threads/api:one/history").await;
    assert!(history.to_string().contains("third"), "{history}");
    h.terminate().await;

    // A second copy finds the database in use: exit 2, and says what to do.
    let (code, _, err) = copy(dir.path(), &url).await;
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("is not empty") && err.contains("table "),
        "{err}"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn without_a_url_the_copy_says_which_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hearth.db"), b"").unwrap();
    let out = command(dir.path())
        .args(["store", "copy-to-postgres", "--url-env", "MY_PG_URL"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    if cfg!(feature = "postgres") {
        assert!(err.contains("MY_PG_URL"), "{err}");
    } else {
        assert!(err.contains("without PostgreSQL support"), "{err}");
    }
}
