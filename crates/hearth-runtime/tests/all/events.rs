//! One numbering for a run's events: the replay from the store, once the
//! live log is gone, gives the terminal event the id the live stream gave it.

use std::time::Duration;

use hearth_core::{DeliveryMode, Inbound, RunEventKind};
use hearth_runtime::testing;
use hearth_runtime::{RunEvents, WaitOutcome};
use hearth_testkit::{FakeOpenAi, Reply};
use hearth_tools::ToolRegistry;

use crate::common;

#[tokio::test]
async fn the_replay_after_the_live_log_is_gone_keeps_the_terminal_events_id() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    fake.push(Reply::text(
        "a long answer that the fake streams in several pieces, each one a text delta",
    ));
    let store = common::store(dir.path());
    let toml = common::fake_toml(&fake.base_url(), "", "");
    let runtime = |store| {
        common::build(common::builder(dir.path(), &toml, &store).tools(ToolRegistry::new()))
    };
    let live = runtime(store.clone()).await;
    live.start().await.unwrap();
    let run = live
        .ingest(Inbound {
            source: "test".into(),
            thread_key: testing::thread("t:events"),
            user_key: testing::user("test:user:1"),
            text: "talk".into(),
            delivery_mode: DeliveryMode::FollowUp,
            idempotency_key: None,
            scope: None,
            roles: Vec::new(),
        })
        .await
        .unwrap();
    let done = live
        .wait(&run.run_id, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(matches!(done, WaitOutcome::Finished(_)), "{done:?}");
    let RunEvents::Live(log) = live.events(&run.run_id).await.unwrap() else {
        panic!("the log of a run that just finished is in memory");
    };
    let live_events = log.since(0);
    let last = live_events.last().unwrap();
    assert_eq!(last.kind, RunEventKind::Succeeded);
    assert!(last.seq > 4, "expected several deltas: {live_events:?}");

    // A process without the live log (evicted, or after a restart) replays
    // from the store with the same id for the end.
    let later = runtime(store.clone()).await;
    let RunEvents::Stored(stored) = later.events(&run.run_id).await.unwrap() else {
        panic!("a fresh runtime has no live log");
    };
    let end = stored.last().unwrap();
    assert_eq!((end.kind, end.seq), (RunEventKind::Succeeded, last.seq));
    // A client that saw up to a delta and resumes gets the end, not nothing.
    let resumed: Vec<_> = stored.iter().filter(|e| e.seq > last.seq - 1).collect();
    assert_eq!(resumed.len(), 1);
    assert_eq!(resumed[0].data, last.data);
}
