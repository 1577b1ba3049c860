//! The settings of threads asked for together are read by one statement
//! (`postgres/batch_queue.rs`, `Settings`): each caller gets its own
//! thread's, in the order asked, as a read alone would give them.

use hearth_store::PostgresStore;
use hearth_store::ThreadStore;
use hearth_store::postgres::testing::{TEST_URL_VAR, fresh_database_url};

#[tokio::test]
async fn settings_read_together_are_each_as_read_alone() {
    let Some(url) = fresh_database_url().await else {
        return;
    };
    let store = PostgresStore::connect(&url, TEST_URL_VAR, 2).await.unwrap();
    store
        .set_thread_model("a", Some("fake/model-a"))
        .await
        .unwrap();
    store.set_thread_thinking("b", "high").await.unwrap();
    store
        .set_thread_mode("c", Some("plan"), Some(1_900_000_000_000))
        .await
        .unwrap();
    let keys = ["b", "none", "a", "b", "c"].map(str::to_owned).to_vec();
    let (together, read) = store.settings_as_one_batch(keys.clone()).await;
    assert!(together, "one statement read them all");
    assert_eq!(read.len(), keys.len());
    for (key, state) in keys.iter().zip(read) {
        let state = state.unwrap();
        let alone = store.thread_settings(key).await.unwrap();
        assert_eq!(state, alone, "{key}");
        assert_eq!(&state.thread_key, key);
    }
    // And what they hold, so that the comparison above cannot pass on two
    // wrong reads.
    let (_, read) = store.settings_as_one_batch(keys).await;
    let read: Vec<_> = read.into_iter().map(Result::unwrap).collect();
    assert_eq!(read[0].thinking, "high");
    assert_eq!(read[1].model, None);
    assert_eq!(read[1].thinking, "off");
    assert_eq!(read[2].model.as_deref(), Some("fake/model-a"));
    assert_eq!(read[3].thinking, "high");
    assert_eq!(read[4].mode.as_deref(), Some("plan"));
    assert_eq!(read[4].mode_expires_at, Some(1_900_000_000_000));
}
