//! Scheduled jobs in the runtime: firing under a clock the test moves,
//! exactly once per instant also across a restart, catch-up, the
//! `job.failed` notice, and delivery to the channel that owns the thread.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hearth_core::{RunStatus, rfc3339};
use hearth_runtime::{CatchUp, NewJob, Runtime, RuntimeBuilder, WaitOutcome};
use hearth_store::{
    ConfirmationRecord, JobFiring, NewOutboxItem, NextFiring, OutboxKind, ReplyRouter, RunEnd,
    RunFilter, Store,
};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;
use serde_json::json;

use crate::common;

/// A runtime that is not started: no ticker runs, the test calls
/// `tick_jobs` with the time it chooses.
async fn runtime(store: &Arc<dyn Store>, fake: &FakeOpenAi) -> Runtime {
    runtime_with(store, fake, |b| b).await
}

async fn runtime_with(
    store: &Arc<dyn Store>,
    fake: &FakeOpenAi,
    adjust: impl FnOnce(RuntimeBuilder) -> RuntimeBuilder,
) -> Runtime {
    let dir = tempfile::tempdir().unwrap();
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let builder = common::builder(dir.path(), &toml, store)
        .tools(ToolRegistry::with_builtins())
        .system_prompt("be brief");
    common::build(adjust(builder)).await
}

fn job(schedule: &str, thread: &str, catch_up: CatchUp) -> NewJob {
    NewJob {
        name: "digest".into(),
        schedule: schedule.into(),
        timezone: None,
        thread_key: thread.into(),
        user_key: "api:user:ops".into(),
        text: "send the digest".into(),
        catch_up,
    }
}

async fn runs_of(rt: &Runtime, thread: &str) -> Vec<hearth_core::RunEnvelope> {
    rt.list_runs(&RunFilter {
        thread_key: Some(thread.into()),
        limit: 100,
        ..RunFilter::default()
    })
    .await
    .unwrap()
}

async fn finished(rt: &Runtime, run_id: &str) -> hearth_core::RunEnvelope {
    match rt.wait(run_id, Duration::from_secs(10)).await.unwrap() {
        WaitOutcome::Finished(env) => env,
        WaitOutcome::Pending(env) => panic!("run did not finish: {env:?}"),
    }
}

#[tokio::test]
async fn a_firing_happens_once_per_instant_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let created = rt
        .create_job(job("every 1s", "api:jobs", CatchUp::Latest))
        .await
        .unwrap();
    let first = created.next_run_at.unwrap();
    assert_eq!(first, created.created_at + 1_000);

    let next = rt.tick_jobs(first + 5).await;
    assert_eq!(next, Some(first + 1_000));
    let runs = runs_of(&rt, "api:jobs").await;
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run.source, "job");
    assert_eq!(run.job_id.as_deref(), Some(created.id.as_str()));
    assert_eq!(run.scheduled_at.as_deref(), Some(rfc3339(first).as_str()));
    // The same moment again fires nothing new.
    rt.tick_jobs(first + 5).await;
    assert_eq!(runs_of(&rt, "api:jobs").await.len(), 1);
    let stored = rt.get_job(&created.id).await.unwrap();
    assert_eq!(stored.last_run_id.as_deref(), Some(run.run_id.as_str()));
    assert_eq!(stored.next_run_at, Some(first + 1_000));
    finished(&rt, &run.run_id).await;
    drop(rt);

    // A process that died after ingesting but before moving the job on:
    // the next one plans the same instant again and gets the same run.
    store
        .record_job_firing(JobFiring {
            job_id: created.id.clone(),
            fired: None,
            next: Some(NextFiring {
                next_run_at: Some(first),
                enabled: true,
            }),
        })
        .await
        .unwrap();
    let again = runtime(&store, &fake).await;
    again.tick_jobs(first + 500).await;
    let runs = runs_of(&again, "api:jobs").await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].run_id, run.run_id);
}

#[tokio::test]
async fn after_downtime_latest_fires_once_and_none_fires_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let latest = rt
        .create_job(job("every 1h", "api:latest", CatchUp::Latest))
        .await
        .unwrap();
    let none = rt
        .create_job(job("every 1h", "api:none", CatchUp::None))
        .await
        .unwrap();
    // Down for three hours and five minutes: three instants were missed,
    // the last one five minutes ago (no longer on time).
    let now = latest.created_at + 3 * 3_600_000 + 300_000;
    rt.tick_jobs(now).await;
    let runs = runs_of(&rt, "api:latest").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        runs[0].scheduled_at.as_deref(),
        Some(rfc3339(latest.created_at + 3 * 3_600_000).as_str())
    );
    assert!(runs_of(&rt, "api:none").await.is_empty());
    let none = rt.get_job(&none.id).await.unwrap();
    assert!(none.next_run_at.unwrap() > now);
    assert!(none.enabled);
}

#[tokio::test]
async fn a_one_shot_job_fires_then_is_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let at = hearth_core::now_ms() + 60_000;
    let created = rt
        .create_job(job(&rfc3339(at), "api:once", CatchUp::Latest))
        .await
        .unwrap();
    assert_eq!(created.next_run_at, Some(at));
    assert_eq!(rt.tick_jobs(at + 10).await, None);
    let done = rt.get_job(&created.id).await.unwrap();
    assert!(!done.enabled);
    assert_eq!(done.next_run_at, None);
    assert_eq!(done.last_run_at, Some(at));
    rt.tick_jobs(at + 5_000).await;
    assert_eq!(runs_of(&rt, "api:once").await.len(), 1);

    let past = rt
        .create_job(job("2020-01-01T00:00:00Z", "api:once", CatchUp::Latest))
        .await
        .unwrap_err();
    assert!(past.to_string().contains("never fires"), "{past}");
    let tz = rt
        .create_job(NewJob {
            timezone: Some("Mars/Olympus".into()),
            ..job("0 9 * * *", "api:once", CatchUp::Latest)
        })
        .await
        .unwrap_err();
    assert!(
        matches!(tz, hearth_runtime::RuntimeError::InvalidSchedule(_)),
        "{tz:?}"
    );
}

/// A disabled job does not fire at its instants; enabled again it fires
/// from its next instant after now, without catching up; a one-shot job
/// whose instant passed cannot be enabled.
#[tokio::test]
async fn a_disabled_job_does_not_fire_until_enabled_again() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let created = rt
        .create_job(job("every 1s", "api:off", CatchUp::All))
        .await
        .unwrap();
    let first = created.next_run_at.unwrap();
    let off = rt.set_job_enabled(&created.id, false).await.unwrap();
    assert!(!off.enabled);
    assert_eq!(off.next_run_at, None, "nothing planned while disabled");
    assert_eq!(rt.tick_jobs(first + 10_000).await, None);
    assert!(
        runs_of(&rt, "api:off").await.is_empty(),
        "a disabled job fired"
    );

    let on = rt.set_job_enabled(&created.id, true).await.unwrap();
    assert!(on.enabled);
    let next = on.next_run_at.unwrap();
    assert!(
        next > hearth_core::now_ms() - 1_000,
        "planned from now: {next}"
    );
    rt.tick_jobs(next + 5).await;
    assert_eq!(
        runs_of(&rt, "api:off").await.len(),
        1,
        "fired once, no catch-up"
    );

    let gone = rt.set_job_enabled("job_missing", true).await.unwrap_err();
    assert!(
        matches!(gone, hearth_runtime::RuntimeError::JobNotFound(_)),
        "{gone:?}"
    );
    let at = hearth_core::now_ms() + 60_000;
    let once = rt
        .create_job(job(&rfc3339(at), "api:off", CatchUp::Latest))
        .await
        .unwrap();
    rt.tick_jobs(at + 10).await;
    let refused = rt.set_job_enabled(&once.id, true).await.unwrap_err();
    assert!(refused.to_string().contains("never fires"), "{refused}");
}

#[tokio::test]
async fn a_failed_job_run_publishes_job_failed() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::http_error(
        400,
        json!({"error": {"message": "bad request", "type": "invalid_request_error"}}),
    ));
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let mut notices = rt.notices();
    let created = rt
        .create_job(job("every 1h", "api:failing", CatchUp::Latest))
        .await
        .unwrap();
    let env = rt.run_job_now(&created.id).await.unwrap();
    assert_eq!(env.job_id.as_deref(), Some(created.id.as_str()));
    let end = finished(&rt, &env.run_id).await;
    assert_eq!(end.status, RunStatus::Failed);
    let mut next = async || {
        tokio::time::timeout(Duration::from_secs(5), notices.recv())
            .await
            .unwrap()
            .unwrap()
    };
    // Every failed run publishes run.failed; a job's run then job.failed.
    let notice = next().await;
    assert_eq!(notice.event, "run.failed");
    assert_eq!(notice.data["run_id"], env.run_id.as_str());
    assert_eq!(notice.data["source"], "job");
    assert_eq!(notice.data["code"], "provider_invalid_request");
    let notice = next().await;
    assert_eq!(notice.event, "job.failed");
    assert_eq!(notice.data["job_id"], created.id.as_str());
    assert_eq!(notice.data["run_id"], env.run_id.as_str());
    assert_eq!(notice.data["thread_key"], "api:failing");
    // Its schedule is untouched by a manual run.
    let after = rt.get_job(&created.id).await.unwrap();
    assert_eq!(after.next_run_at, created.next_run_at);
    assert_eq!(after.last_run_id.as_deref(), Some(env.run_id.as_str()));
}

/// A firing by hand must not write back the schedule it read before firing:
/// the ticker may have moved the job on (or ended a one-shot job) meanwhile.
#[tokio::test]
async fn running_a_job_by_hand_keeps_what_the_ticker_did_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let rt = runtime(&store, &fake).await;
    let created = rt
        .create_job(job("every 1h", "api:by-hand", CatchUp::Latest))
        .await
        .unwrap();
    let moved_to = created.next_run_at.unwrap() + 3_600_000;
    // Stands in for the ticker recording a firing while the manual one is
    // in flight: the run it inserts moves the job on in the same commit.
    let db = rusqlite::Connection::open(dir.path().join("hearth.db")).unwrap();
    db.execute_batch(&format!(
        "CREATE TRIGGER ticker_meanwhile AFTER INSERT ON runs BEGIN \
         UPDATE jobs SET next_run_at = {moved_to} WHERE id = '{}'; END;",
        created.id
    ))
    .unwrap();
    let env = rt.run_job_now(&created.id).await.unwrap();
    finished(&rt, &env.run_id).await;
    let after = rt.get_job(&created.id).await.unwrap();
    assert_eq!(
        after.next_run_at,
        Some(moved_to),
        "run_job_now wrote back the schedule it read before firing"
    );
    assert!(after.enabled);
    assert_eq!(after.last_run_id.as_deref(), Some(env.run_id.as_str()));
}

/// Claims `telegram:chat:*` threads the way the Telegram channel does.
#[derive(Default)]
struct TelegramLike {
    ends: Mutex<Vec<(String, String)>>,
}

impl ReplyRouter for TelegramLike {
    fn on_finish(&self, end: RunEnd<'_>) -> Vec<NewOutboxItem> {
        let Some(chat) = end.run.thread_key.strip_prefix("telegram:chat:") else {
            return Vec::new();
        };
        self.ends
            .lock()
            .unwrap()
            .push((end.run.source.clone(), end.run.thread_key.clone()));
        vec![NewOutboxItem {
            channel: "telegram".into(),
            target: chat.into(),
            kind: OutboxKind::Message,
            run_id: Some(end.run.run_id.clone()),
            payload: json!({"text": end.output}).to_string(),
        }]
    }

    fn on_confirmation(&self, _: &ConfirmationRecord, _: &str) -> Vec<NewOutboxItem> {
        Vec::new()
    }

    fn committed(&self, _channel: &str) {}
}

#[tokio::test]
async fn a_job_on_a_channel_thread_is_answered_through_the_outbox() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text("the digest is ready"));
    let store = common::store(dir.path());
    let router = Arc::new(TelegramLike::default());
    let surface = hearth_runtime::testing::reply_router_surface_on(router.clone(), &["telegram"]);
    let rt = runtime_with(&store, &fake, |b| b.surface(surface)).await;
    let created = rt
        .create_job(job("every 1h", "telegram:chat:42", CatchUp::Latest))
        .await
        .unwrap();
    rt.tick_jobs(created.next_run_at.unwrap()).await;
    let runs = runs_of(&rt, "telegram:chat:42").await;
    assert_eq!(runs.len(), 1);
    let end = finished(&rt, &runs[0].run_id).await;
    assert_eq!(end.status, RunStatus::Succeeded);
    assert_eq!(
        router.ends.lock().unwrap().clone(),
        [("job".to_owned(), "telegram:chat:42".to_owned())]
    );
    let outbox = store.list_outbox(None, 10).await.unwrap();
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].channel, "telegram");
    assert_eq!(outbox[0].target, "42");
    assert_eq!(outbox[0].run_id.as_deref(), Some(end.run_id.as_str()));
    assert!(outbox[0].payload.contains("the digest is ready"));
}

#[tokio::test]
async fn a_job_on_a_disabled_channel_is_refused_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let store = common::store(dir.path());
    let surface = hearth_runtime::testing::reply_router_surface_on(
        Arc::new(TelegramLike::default()),
        &["telegram"],
    );
    let rt = runtime_with(&store, &fake, |b| b.surface(surface)).await;
    let e = rt
        .create_job(job("every 1h", "discord:channel:7", CatchUp::Latest))
        .await
        .unwrap_err();
    assert!(
        matches!(e, hearth_runtime::RuntimeError::ChannelDisabled(_)),
        "{e:?}"
    );
    let m = e.to_string();
    assert!(
        m.contains("discord") && m.contains("[channels.discord] enabled = true"),
        "{m}"
    );
    assert!(rt.list_jobs().await.unwrap().is_empty());
    // Threads of no chat channel and of an enabled one are kept.
    rt.create_job(job("every 1h", "api:x", CatchUp::Latest))
        .await
        .unwrap();
    rt.create_job(job("every 1h", "telegram:chat:1", CatchUp::Latest))
        .await
        .unwrap();
}
