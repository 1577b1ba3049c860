//! Memory that finds by meaning: embeddings of saved memories, the pass
//! that embeds what is missing, and the search modes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hearth_runtime::RuntimeError;
use hearth_runtime::memory::{Matched, SearchMode};
use hearth_runtime::testing::TestRuntime;
use hearth_store::NewMemory;
use hearth_testkit::FakeOpenAi;

use crate::common;

const FACT: &str = "parked in spot B7 on level 3";
const QUERY: &str = "where did I leave the car";

/// Vectors by topic: cars and parking point one way, pets another.
fn topic(text: &str) -> Vec<f32> {
    let t = text.to_lowercase();
    if t.contains("car") || t.contains("parked") {
        vec![1.0, 0.1, 0.0]
    } else if t.contains("dog") {
        vec![0.0, 1.0, 0.1]
    } else {
        vec![0.1, 0.0, 1.0]
    }
}

async fn runtime(fake: &FakeOpenAi, embeddings: bool) -> TestRuntime {
    let mut toml = common::fake_toml(&fake.base_url(), "", "");
    if embeddings {
        toml.push_str("[memory]\nembeddings = \"fake/embed\"\n");
    }
    // Not started: the test runs the embedding pass itself.
    TestRuntime::build_with(&toml, |b| b).await
}

async fn save(t: &TestRuntime, text: &str) -> i64 {
    t.store
        .save_memory(NewMemory {
            user_key: "user:1".into(),
            thread_key: None,
            text: text.into(),
            run_id: None,
            at: hearth_core::now_ms(),
        })
        .await
        .unwrap()
        .memory
        .id
}

async fn find(t: &TestRuntime, mode: Option<SearchMode>) -> Vec<(i64, Matched)> {
    t.runtime
        .find_memories("user:1", None, QUERY, mode, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|f| (f.memory.id, f.matched))
        .collect()
}

#[tokio::test]
async fn a_fact_sharing_no_word_is_found_by_meaning_once_embedded() {
    let fake = FakeOpenAi::start().await;
    // The provider fails (an empty vector is refused) until `works` is set.
    let works = Arc::new(AtomicBool::new(false));
    let w = works.clone();
    fake.embed_with(move |text| {
        if w.load(Ordering::SeqCst) {
            topic(text)
        } else {
            Vec::new()
        }
    });
    let t = runtime(&fake, true).await;
    assert_eq!(t.runtime.memory_embeddings(), Some("fake/embed"));
    let parked = save(&t, FACT).await;
    let dog = save(&t, "a dog called Rex").await;

    // Saved while embeddings fail: stored, found by words only.
    assert_eq!(t.runtime.embed_pending_memories().await, 0);
    assert!(find(&t, Some(SearchMode::Text)).await.is_empty());
    assert!(
        find(&t, None).await.is_empty(),
        "hybrid falls back to words"
    );
    let err = t
        .runtime
        .find_memories("user:1", None, QUERY, Some(SearchMode::Vector), 10)
        .await
        .unwrap_err();
    assert!(matches!(err, RuntimeError::Internal(_)), "{err}");

    works.store(true, Ordering::SeqCst);
    assert_eq!(t.runtime.embed_pending_memories().await, 2);
    assert_eq!(t.runtime.embed_pending_memories().await, 0, "nothing left");

    assert_eq!(find(&t, None).await[0], (parked, Matched::Vector));
    assert_eq!(
        find(&t, Some(SearchMode::Vector)).await[0],
        (parked, Matched::Vector)
    );
    assert!(find(&t, Some(SearchMode::Text)).await.is_empty());
    // Words and meaning agree on the dog: found by both.
    let both = t
        .runtime
        .find_memories("user:1", None, "dog", Some(SearchMode::Hybrid), 10)
        .await
        .unwrap();
    assert_eq!((both[0].memory.id, both[0].matched), (dog, Matched::Both));
    // Another user's memories stay theirs.
    assert!(
        t.runtime
            .find_memories("user:2", None, QUERY, Some(SearchMode::Vector), 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Every embeddings call, failed ones included, is a model call in usage.
    let calls = t.store.calls_since(0).await.unwrap();
    assert!(calls.iter().all(|c| c.model == "fake/embed"), "{calls:?}");
    assert_eq!(calls.len(), fake.embedding_requests().len());
    let violations = fake.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

#[tokio::test]
async fn without_embeddings_search_is_by_words_and_meaning_is_refused() {
    let fake = FakeOpenAi::start().await;
    let t = runtime(&fake, false).await;
    assert_eq!(t.runtime.memory_embeddings(), None);
    let parked = save(&t, FACT).await;
    let found = t
        .runtime
        .find_memories("user:1", None, QUERY, None, 10)
        .await
        .unwrap();
    assert!(found.is_empty(), "no word is shared: {found:?}");
    let found = t
        .runtime
        .find_memories("user:1", None, "spot B7", None, 10)
        .await
        .unwrap();
    assert_eq!(
        (found[0].memory.id, found[0].matched),
        (parked, Matched::Text)
    );
    for mode in [SearchMode::Vector, SearchMode::Hybrid] {
        let err = t
            .runtime
            .find_memories("user:1", None, QUERY, Some(mode), 10)
            .await
            .unwrap_err();
        assert!(matches!(err, RuntimeError::InvalidInput(_)), "{err}");
    }
    assert_eq!(t.runtime.embed_pending_memories().await, 0);
    assert!(fake.embedding_requests().is_empty());
}

#[tokio::test]
async fn an_embeddings_provider_without_the_api_is_refused_at_load() {
    let fake = FakeOpenAi::start().await;
    let toml = format!(
        "{}[memory]\nembeddings = \"echo/x\"\n",
        common::fake_toml(&fake.base_url(), "", "")
    );
    // The loader refuses it first; a provider only detected at start is
    // checked by the builder (same words).
    assert!(hearth_config::load_str(&toml, "t", Vec::new()).is_err());
}

#[tokio::test]
async fn embedding_calls_draw_from_budget_pools_and_a_used_up_pool_stops_them() {
    let fake = FakeOpenAi::start().await;
    fake.embed_with(topic);
    let toml = format!(
        "{}[memory]\nembeddings = \"fake/embed\"\n\
         [[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 1\n",
        common::fake_toml(&fake.base_url(), "", "")
    );
    let t = TestRuntime::build_with(&toml, |b| b).await;
    save(&t, FACT).await;
    save(&t, "a dog called Rex").await;
    // One call embeds both (one batch), and uses the pool up.
    assert_eq!(t.runtime.embed_pending_memories().await, 2);
    let pool = &t.runtime.budget_status().await[0];
    assert_eq!(pool.used, 1.0, "{pool:?}");
    // The query cannot be embedded now: hybrid searches by words only,
    // without calling the provider.
    let requests = fake.embedding_requests().len();
    let found = t
        .runtime
        .find_memories("user:1", None, "dog", None, 10)
        .await
        .unwrap();
    assert_eq!(found[0].matched, Matched::Text, "{found:?}");
    assert_eq!(fake.embedding_requests().len(), requests);
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn a_gemini_embeddings_model_finds_by_meaning_too() {
    let fake = hearth_testkit::fake_gemini::FakeGemini::start().await;
    fake.embed_with(topic);
    let toml = format!(
        "[llm]\ndefault_model = \"gem/gemini-2.5-flash\"\n\
         [llm.providers.gem]\ntype = \"gemini\"\nbase_url = \"{}\"\n\
         headers = {{ x-goog-api-key = \"test-key\" }}\n\
         [memory]\nembeddings = \"gem/gemini-embedding-001\"\n",
        fake.base_url()
    );
    let t = TestRuntime::build_with(&toml, |b| b).await;
    let parked = save(&t, FACT).await;
    save(&t, "a dog called Rex").await;
    assert_eq!(t.runtime.embed_pending_memories().await, 2);
    assert_eq!(
        find(&t, Some(SearchMode::Vector)).await[0],
        (parked, Matched::Vector)
    );
    let reqs = fake.embedding_requests();
    assert_eq!(
        reqs[0]["requests"][0]["model"],
        "models/gemini-embedding-001"
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}
