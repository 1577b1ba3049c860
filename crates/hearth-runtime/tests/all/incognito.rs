//! Incognito threads in-process: nothing they say reaches the database file,
//! their history lives for the life of the process, usage is counted without
//! thread or user keys, and the flag itself is kept.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunStatus, now_ms};
use hearth_runtime::testing;
use hearth_runtime::{Runtime, RuntimeError, RuntimeOptions, WaitOutcome};
use hearth_store::{Store, UsageGroup, UsageQuery};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

const SECRET_TEXT: &str = "my-incognito-question-about-zanzibar";

async fn runtime(dir: &Path, fake: &FakeOpenAi) -> (Runtime, Arc<dyn Store>) {
    runtime_with(dir, fake, RuntimeOptions::default()).await
}

async fn runtime_with(
    dir: &Path,
    fake: &FakeOpenAi,
    options: RuntimeOptions,
) -> (Runtime, Arc<dyn Store>) {
    let store = common::store(dir);
    let toml = common::fake_toml(
        &fake.base_url(),
        "",
        "[llm.providers.remote]\ntype = \"openai_compat\"\nbase_url = \"https://api.example.com/v1\"\nmodels = [\"big\"]",
    );
    let rt = common::build(
        common::builder(dir, &toml, &store)
            .tools(ToolRegistry::with_builtins())
            .system_prompt("be brief")
            .options(options),
    )
    .await;
    rt.start().await.unwrap();
    (rt, store)
}

fn msg(thread: &str, text: &str) -> Inbound {
    Inbound {
        source: "test".into(),
        thread_key: testing::thread(thread),
        user_key: testing::user("test:user:1"),
        text: text.into(),
        delivery_mode: DeliveryMode::FollowUp,
        idempotency_key: None,
        scope: None,
        roles: Vec::new(),
    }
}

async fn answer(rt: &Runtime, thread: &str, text: &str) -> hearth_core::RunEnvelope {
    let run = rt.ingest(msg(thread, text)).await.unwrap();
    match rt.wait(&run.run_id, Duration::from_secs(30)).await.unwrap() {
        WaitOutcome::Finished(e) => e,
        WaitOutcome::Pending(e) => panic!("not finished: {e:?}"),
    }
}

fn db_contains(dir: &Path, needle: &str) -> bool {
    ["hearth.db", "hearth.db-wal"].iter().any(|f| {
        std::fs::read(dir.join(f))
            .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn an_incognito_thread_leaves_nothing_on_disk_but_its_flag_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let (rt, store) = runtime(dir.path(), &fake).await;

    // History from before incognito stays and is still seen.
    let before = answer(&rt, "t:inc", "stored-before-incognito").await;
    assert_eq!(before.status, RunStatus::Succeeded);
    let on = rt
        .set_incognito(&testing::thread("t:inc"), true)
        .await
        .unwrap();
    assert!(on.incognito);
    assert_eq!(on.message_count, 2);

    let first = answer(&rt, "t:inc", SECRET_TEXT).await;
    assert_eq!(first.status, RunStatus::Succeeded);
    assert_eq!(first.output.unwrap().text, format!("echo: {SECRET_TEXT}"));
    fake.push(Reply::text("second answer"));
    let second = answer(&rt, "t:inc", "and a follow-up").await;
    assert_eq!(second.status, RunStatus::Succeeded);
    // The second call saw the whole conversation: stored history, then the
    // incognito exchange kept in memory.
    let last = fake.requests().pop().unwrap();
    let users: Vec<_> = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        users,
        ["stored-before-incognito", SECRET_TEXT, "and a follow-up"]
    );
    // Readable while the process lives.
    assert_eq!(
        rt.get_run(&first.run_id).await.unwrap().run_id,
        first.run_id
    );
    assert_eq!(
        rt.thread_runtime(&testing::thread("t:inc"))
            .await
            .unwrap()
            .message_count,
        6
    );
    let listed = rt
        .list_runs(&hearth_store::RunFilter {
            thread_key: Some("t:inc".into()),
            status: None,
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 3, "disk and memory runs are listed together");
    assert_eq!(listed[0].run_id, second.run_id, "newest first");

    // Nothing of it reached the database file.
    assert!(db_contains(dir.path(), "stored-before-incognito"));
    assert!(!db_contains(dir.path(), SECRET_TEXT));
    assert!(!db_contains(dir.path(), "second answer"));
    assert!(!db_contains(dir.path(), &first.run_id));

    // Usage counts the calls, without thread or user keys.
    let usage = store
        .usage(&UsageQuery {
            since: None,
            until: Some(now_ms() + 1),
            group_by: UsageGroup::Model,
        })
        .await
        .unwrap();
    assert_eq!(usage.iter().map(|r| r.calls).sum::<u64>(), 3);

    // After a restart the flag is kept and the incognito runs are gone.
    drop(rt);
    drop(store);
    let (rt, _store) = runtime(dir.path(), &fake).await;
    let state = rt.thread_runtime(&testing::thread("t:inc")).await.unwrap();
    assert!(state.incognito);
    assert_eq!(
        state.message_count, 2,
        "only what was said before incognito"
    );
    assert!(matches!(
        rt.get_run(&first.run_id).await,
        Err(RuntimeError::RunNotFound(_))
    ));
    // Turned off, the thread is stored again.
    rt.set_incognito(&testing::thread("t:inc"), false)
        .await
        .unwrap();
    answer(&rt, "t:inc", "stored-after-incognito").await;
    assert!(db_contains(dir.path(), "stored-after-incognito"));
}

#[tokio::test]
async fn incognito_local_only_refuses_a_remote_model_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let options = RuntimeOptions {
        incognito_local_only: true,
        ..RuntimeOptions::default()
    };
    let (rt, _store) = runtime_with(dir.path(), &fake, options).await;
    rt.set_incognito(&testing::thread("t:local"), true)
        .await
        .unwrap();
    // The fake listens on loopback: local, so it answers.
    assert_eq!(
        answer(&rt, "t:local", "hello").await.status,
        RunStatus::Succeeded
    );
    rt.set_model(&testing::thread("t:local"), "remote/big")
        .await
        .unwrap();
    let refused = answer(&rt, "t:local", "private words").await;
    assert_eq!(refused.status, RunStatus::Failed);
    assert_eq!(refused.error.unwrap().code, "not_local");
    assert_eq!(
        fake.requests().len(),
        1,
        "nothing was sent for the refused run"
    );
}
