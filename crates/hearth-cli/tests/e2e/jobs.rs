//! Scheduled jobs in the real binary: a job every second fires and its runs
//! appear; a restart repeats no firing and catches up what was missed; the
//! CLI adds, lists, runs and removes jobs.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use hearth_testkit::FakeOpenAi;
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

async fn create(h: &Hearth, body: Value) -> (u16, Value) {
    let r = h
        .http
        .post(h.at("/v1/jobs"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// The runs of `thread`, polled until `enough` says so (runs appear when the
/// ticker fires; no event tells a client that, so this polls with a deadline).
async fn runs_until(h: &Hearth, thread: &str, enough: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (s, v) = h
            .get(&format!("/v1/runs?thread_key={thread}&limit=500"))
            .await;
        assert_eq!(s, 200, "{v}");
        let runs = v["runs"].as_array().unwrap().clone();
        if enough(&runs) {
            return runs;
        }
        assert!(
            Instant::now() < deadline,
            "runs never satisfied the test: {runs:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn scheduled(runs: &[Value]) -> Vec<String> {
    runs.iter()
        .map(|r| r["scheduled_at"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_job_every_second_fires_and_a_restart_repeats_no_firing() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let (s, job) = create(
        &h,
        json!({"name": "tick", "schedule": "every 1s", "thread_key": "api:tick", "text": "tick"}),
    )
    .await;
    assert_eq!(s, 201, "{job}");
    let id = job["id"].as_str().unwrap().to_owned();
    assert_eq!(job["timezone"], "UTC");
    assert_eq!(job["catch_up"], "latest");
    assert_eq!(job["enabled"], true);

    let runs = runs_until(&h, "api:tick", |r| r.len() >= 3).await;
    for run in &runs {
        assert_eq!(run["source"], "job", "{run}");
        assert_eq!(run["job_id"], id.as_str());
    }
    let done = h.wait_run(runs[0]["run_id"].as_str().unwrap()).await;
    assert_eq!(done["output"]["text"], "echo: tick");
    let (_, listed) = h.get(&format!("/v1/jobs/{id}")).await;
    assert!(listed["last_run_id"].is_string(), "{listed}");
    h.kill().await;

    let h = Hearth::start(dir.path(), Some(&config)).await;
    let before = runs_until(&h, "api:tick", |_| true).await.len();
    let runs = runs_until(&h, "api:tick", |r| r.len() >= before + 2).await;
    let all = scheduled(&runs);
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "an instant fired twice: {all:?}");
    let r = h
        .http
        .delete(h.at(&format!("/v1/jobs/{id}")))
        .send()
        .await
        .unwrap();
    let s = r.status().as_u16();
    let deleted: Value = r.json().await.unwrap();
    assert_eq!(s, 200);
    assert_eq!(deleted["id"], id.as_str());
    let (s, _) = h.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(s, 404);
}

#[tokio::test]
async fn a_one_shot_missed_while_down_is_caught_up_within_a_second_of_start() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = fake_config(&fake.base_url());
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
    let (s, job) = create(
        &h,
        json!({"name": "once", "schedule": at.to_string(), "thread_key": "api:once",
               "text": "remind me", "timezone": "Europe/Paris"}),
    )
    .await;
    assert_eq!(s, 201, "{job}");
    h.kill().await;
    // The instant passes while hearth is down.
    let wait = at.duration_since(jiff::Timestamp::now()).as_millis().max(0) as u64;
    tokio::time::sleep(Duration::from_millis(wait + 200)).await;

    let started = jiff::Timestamp::now();
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let runs = runs_until(&h, "api:once", |r| !r.is_empty()).await;
    assert_eq!(runs.len(), 1);
    let created: jiff::Timestamp = runs[0]["created_at"].as_str().unwrap().parse().unwrap();
    let ready_after = created.duration_since(started);
    assert!(
        ready_after < jiff::SignedDuration::from_secs(2),
        "caught up {ready_after:?} after the process started"
    );
    let (_, job) = h
        .get(&format!("/v1/jobs/{}", job["id"].as_str().unwrap()))
        .await;
    assert_eq!(job["enabled"], false, "{job}");
    assert!(job["next_run_at"].is_null());
}

#[tokio::test]
async fn bad_schedules_are_400_invalid_schedule() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    for (schedule, tz) in [
        ("0 9 * * *", "Mars/Olympus"),
        ("every 5x", "UTC"),
        ("1 2 3", "UTC"),
    ] {
        let (s, v) = create(
            &h,
            json!({"name": "n", "schedule": schedule, "timezone": tz, "thread_key": "api:x", "text": "t"}),
        )
        .await;
        assert_eq!(s, 400, "{v}");
        assert_eq!(v["error"]["code"], "invalid_schedule", "{v}");
    }
    let (s, v) = create(
        &h,
        json!({"name": "n", "schedule": "every 1m", "thread_key": "api:x", "text": "t", "when": 1}),
    )
    .await;
    assert_eq!(s, 400);
    assert_eq!(v["error"]["code"], "invalid_request");
}

#[tokio::test]
async fn the_cli_adds_lists_runs_and_removes_jobs() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    let cli = async |args: &[&str]| {
        crate::harness::succeeds(command(&h.home).env("HEARTH_URL", &h.url).args(args)).await
    };
    let added: Value = serde_json::from_str(
        &cli(&[
            "--json",
            "jobs",
            "add",
            "--name",
            "digest",
            "--schedule",
            "0 9 * * MON-FRI",
            "--timezone",
            "Europe/Paris",
            "--thread",
            "api:digest",
            "send the digest",
        ])
        .await,
    )
    .unwrap();
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(added["timezone"], "Europe/Paris");
    let list = cli(&["jobs", "list"]).await;
    assert!(
        list.contains(&id) && list.contains("0 9 * * MON-FRI"),
        "{list}"
    );
    let run: Value = serde_json::from_str(&cli(&["--json", "jobs", "run", &id]).await).unwrap();
    assert_eq!(run["job_id"], id.as_str());
    assert_eq!(run["source"], "job");
    let done = h.wait_run(run["run_id"].as_str().unwrap()).await;
    assert_eq!(done["output"]["text"], "echo: send the digest");
    let removed = cli(&["jobs", "rm", &id]).await;
    assert!(removed.contains(&id), "{removed}");
    assert!(cli(&["jobs", "list"]).await.contains("no jobs"));
}
