//! Memories ([`MemoryStore`], with the audit log of erasures and purging
//! unused memories through [`RetentionStore`]).

use super::fixtures::{erasure, found, new, save, scope};
use crate::grants::GrantStore;
use crate::memory::{COMMON_WORD_MATCHES, MemoryStore};
use crate::retention::{RetentionCutoffs, RetentionStore};

pub async fn search_ranks_by_relevance_and_returns_sources<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    save(&store, "u", None, "The user likes green tea").await;
    let dog = save(
        &store,
        "u",
        None,
        "The user's dog is called Rex; the dog is a beagle",
    )
    .await;
    save(&store, "u", None, "Meeting with Anna on Friday").await;

    let hits = store
        .search_memories(&scope("u", None), "what is my dog called?", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].memory.id, dog);
    assert_eq!(hits[0].memory.run_id.as_deref(), Some("run_1"));

    // More shared words rank higher; stemming matches "dogs" to "dog".
    save(&store, "u", None, "Dogs are not allowed at the office").await;
    let texts = found(&store, &scope("u", None), "dogs called Rex").await;
    assert_eq!(
        texts,
        vec![
            "The user's dog is called Rex; the dog is a beagle".to_owned(),
            "Dogs are not allowed at the office".to_owned(),
        ]
    );
    let hits = store
        .search_memories(&scope("u", None), "dogs called Rex", 10)
        .await
        .unwrap();
    assert!(hits[0].score > hits[1].score, "{hits:?}");
    assert!(found(&store, &scope("u", None), "coffee").await.is_empty());
}

pub async fn a_word_in_more_than_a_thousand_memories_does_not_crowd_out_a_rarer_one<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    // The oldest memory holds the rare word; more than COMMON_WORD_MATCHES
    // newer ones share only the common word with the query.
    let parked = save(&store, "u", None, "Note: the car is parked in spot B7").await;
    let mut newest = parked;
    for i in 0..=COMMON_WORD_MATCHES {
        newest = save(&store, "u", None, &format!("Note {i} about the weather")).await;
    }
    // Another user's memories never count for this one's words.
    save(&store, "v", None, "A note on spot B7 of another user").await;

    // Only what the rarer word finds is ranked: the common word alone no
    // longer brings in a thousand memories to rank.
    let hits = store
        .search_memories(&scope("u", None), "the note about spot B7", 10)
        .await
        .unwrap();
    let ids: Vec<i64> = hits.iter().map(|h| h.memory.id).collect();
    assert_eq!(ids, vec![parked], "{hits:?}");

    // Every word common: the newest memories they find, ranked.
    let hits = store
        .search_memories(&scope("u", None), "note weather", 10)
        .await
        .unwrap();
    assert_eq!(hits.len(), 10, "{hits:?}");
    assert_eq!(hits[0].memory.id, newest, "{hits:?}");
    assert!(hits.iter().all(|h| h.memory.id != parked), "{hits:?}");

    // A word that finds nothing adds nothing, and finds nothing alone.
    assert_eq!(
        found(&store, &scope("u", None), "B7 zeppelin").await,
        vec!["Note: the car is parked in spot B7".to_owned()]
    );
    assert!(
        found(&store, &scope("u", None), "zeppelin")
            .await
            .is_empty()
    );
}

/// A fact holding a NUL (U+0000) is saved, once however often it is saved,
/// and found by its words: as given, or with the NUL as U+FFFD where the
/// store cannot hold one (PostgreSQL's `text`, which refused the save).
pub async fn a_fact_holding_a_nul_is_saved_once_and_found<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let given = "parked in \0 spot B7";
    let first = store
        .save_memory(new("u", None, given, 1_000))
        .await
        .unwrap();
    assert!(first.created);
    let text = first.memory.text.clone();
    assert!(
        text == given || text == given.replace('\0', "\u{FFFD}"),
        "{text:?}"
    );
    let again = store
        .save_memory(new("u", None, given, 2_000))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.memory.id, first.memory.id);
    let found = store
        .search_memories(&scope("u", None), "parked spot", 10)
        .await
        .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].memory.id, first.memory.id);
}

pub async fn saving_the_same_text_again_returns_the_first_memory<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let first = store
        .save_memory(new("u", None, "Prefers metric units", 1_000))
        .await
        .unwrap();
    assert!(first.created);
    let again = store
        .save_memory(new("u", None, "Prefers metric units", 2_000))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.memory.id, first.memory.id);
    assert_eq!(again.memory.created_at, 1_000);
    assert_eq!(again.memory.last_used_at, 2_000);
    // Another scope or another user is another memory.
    let in_thread = store
        .save_memory(new("u", Some("t1"), "Prefers metric units", 3_000))
        .await
        .unwrap();
    assert!(in_thread.created);
    let other_user = store
        .save_memory(new("v", None, "Prefers metric units", 3_000))
        .await
        .unwrap();
    assert!(other_user.created);
    assert_eq!(store.export_user_memories("u").await.unwrap().len(), 2);
}

pub async fn reads_see_only_the_users_own_and_this_threads_memories<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    save(&store, "u", None, "wide fact about kiwis").await;
    save(&store, "u", Some("t1"), "thread one fact about kiwis").await;
    save(&store, "u", Some("t2"), "thread two fact about kiwis").await;
    save(&store, "v", None, "other user fact about kiwis").await;

    let mut t1 = found(&store, &scope("u", Some("t1")), "kiwis").await;
    t1.sort();
    assert_eq!(
        t1,
        vec![
            "thread one fact about kiwis".to_owned(),
            "wide fact about kiwis".to_owned()
        ]
    );
    assert_eq!(
        found(&store, &scope("u", None), "kiwis").await,
        vec!["wide fact about kiwis".to_owned()]
    );
    assert_eq!(
        found(&store, &scope("v", Some("t1")), "kiwis").await,
        vec!["other user fact about kiwis".to_owned()]
    );
    assert!(
        found(&store, &scope("w", Some("t1")), "kiwis")
            .await
            .is_empty()
    );

    let listed: Vec<String> = store
        .list_memories(&scope("u", Some("t2")), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    // Newest first; ties on time go by id.
    assert_eq!(
        listed,
        vec![
            "thread two fact about kiwis".to_owned(),
            "wide fact about kiwis".to_owned()
        ]
    );
    assert_eq!(
        store
            .list_memories(&scope("u", Some("t2")), 1)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn hostile_queries_never_error<S: MemoryStore + GrantStore + RetentionStore>(store: S) {
    save(&store, "u", None, "NEAR the river, a star * shines").await;
    for q in [
        "\"",
        "\"\"",
        "NEAR(",
        "NEAR(a b, 3)",
        "*",
        "a*",
        "^start",
        "col:term",
        "text:river",
        "AND",
        "OR OR",
        "NOT",
        "(",
        ")",
        "{text}: river",
        "'; DROP TABLE memories; --",
        "-river",
        "+",
        "\u{0}",
        "",
        "   ",
        "🦀🦀",
        &"x".repeat(10_000),
    ] {
        let r = store.search_memories(&scope("u", None), q, 5).await;
        assert!(r.is_ok(), "{q:?}: {r:?}");
    }
    // Operator words are searched as plain words.
    assert_eq!(
        found(&store, &scope("u", None), "NEAR(").await,
        vec!["NEAR the river, a star * shines".to_owned()]
    );
    assert_eq!(store.export_user_memories("u").await.unwrap().len(), 1);
}

pub async fn forget_removes_only_the_users_own_memory<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let mine = save(&store, "u", None, "my secret plan").await;
    assert!(!store.forget_memory("v", mine).await.unwrap());
    assert_eq!(found(&store, &scope("u", None), "plan").await.len(), 1);
    assert!(store.forget_memory("u", mine).await.unwrap());
    assert!(!store.forget_memory("u", mine).await.unwrap());
    assert!(found(&store, &scope("u", None), "plan").await.is_empty());
}

pub async fn purge_deletes_memories_unused_since_the_cutoff<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let old = store
        .save_memory(new("u", None, "old fact about lemons", 1_000))
        .await
        .unwrap()
        .memory
        .id;
    let used = store
        .save_memory(new("u", None, "old fact about limes", 1_000))
        .await
        .unwrap()
        .memory
        .id;
    store
        .save_memory(new("u", None, "new fact about lemons", 5_000))
        .await
        .unwrap();
    // Being found keeps a memory alive; another user's id is not touched.
    assert_eq!(store.touch_memories("u", &[used], 6_000).await.unwrap(), 1);
    assert_eq!(store.touch_memories("v", &[old], 6_000).await.unwrap(), 0);

    assert_eq!(store.purge_memories(4_000).await.unwrap(), 1);
    let left: Vec<String> = store
        .export_user_memories("u")
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert_eq!(
        left,
        vec![
            "old fact about limes".to_owned(),
            "new fact about lemons".to_owned()
        ]
    );
    assert_eq!(
        found(&store, &scope("u", None), "lemons").await,
        vec!["new fact about lemons".to_owned()]
    );

    let report = store
        .purge_expired(RetentionCutoffs {
            memories_unused_since: 7_000,
            audit_before: 0,
            confirmations_expired_before: 0,
            channel_records_before: 0,
            reply_messages_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(report.memories, 2);
    assert_eq!(report.audit_events, 0);
    assert!(store.export_user_memories("u").await.unwrap().is_empty());
}

pub async fn deleting_a_users_memories_stores_its_audit_event_in_the_same_write<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    save(&store, "u", None, "likes quokkas").await;
    save(&store, "other", None, "likes wombats").await;

    assert_eq!(
        store
            .delete_user_memories("u", erasure("u", 7))
            .await
            .unwrap(),
        1
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![erasure("u", 7)]);
    assert_eq!(store.export_user_memories("other").await.unwrap().len(), 1);
}

pub async fn embeddings_are_stored_per_model_and_read_in_scope<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let wide = save(&store, "u", None, "parked in spot B7 on level 3").await;
    let bound = save(&store, "u", Some("t1"), "thread fact").await;
    let other = save(&store, "v", None, "someone else's fact").await;

    // Nothing is embedded yet: the pass sees all three, oldest first.
    let todo: Vec<i64> = store
        .memories_to_embed("m1", 10)
        .await
        .unwrap()
        .iter()
        .map(|m| m.id)
        .collect();
    assert_eq!(todo, vec![wide, bound, other]);
    assert_eq!(store.memories_to_embed("m1", 1).await.unwrap().len(), 1);
    assert_eq!(store.count_memories_to_embed("m1").await.unwrap(), 3);

    for (id, v) in [
        (wide, vec![1.0_f32, -0.5, 0.25]),
        (bound, vec![0.0, 1.0, 0.0]),
        (other, vec![9.0, 9.0, 9.0]),
    ] {
        assert!(store.set_memory_embedding(id, "m1", &v).await.unwrap());
    }
    assert!(store.memories_to_embed("m1", 10).await.unwrap().is_empty());
    // Another model has embedded nothing: all are due again after a change.
    assert_eq!(store.memories_to_embed("m2", 10).await.unwrap().len(), 3);
    assert_eq!(store.count_memories_to_embed("m1").await.unwrap(), 0);
    assert_eq!(store.count_memories_to_embed("m2").await.unwrap(), 3);

    let q = [1.0_f32, -0.5, 0.25];
    let seen = store
        .nearest_memories(&scope("u", None), "m1", &q, 10)
        .await
        .unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].memory.id, wide);
    assert_eq!(seen[0].memory.text, "parked in spot B7 on level 3");
    assert!((seen[0].similarity - 1.0).abs() < 1e-6, "{seen:?}");
    // The thread's own memory too, best first; one pointing away is not
    // kept.
    let seen = store
        .nearest_memories(&scope("u", Some("t1")), "m1", &[0.1, 1.0, 0.0], 10)
        .await
        .unwrap();
    let ids: Vec<i64> = seen.iter().map(|v| v.memory.id).collect();
    assert_eq!(ids, vec![bound], "{seen:?}");
    let seen = store
        .nearest_memories(&scope("u", Some("t1")), "m1", &[1.0, 1.0, 0.0], 10)
        .await
        .unwrap();
    let ids: Vec<i64> = seen.iter().map(|v| v.memory.id).collect();
    assert_eq!(ids, vec![bound, wide], "{seen:?}");
    let seen = store
        .nearest_memories(&scope("u", Some("t1")), "m1", &[1.0, 1.0, 0.0], 1)
        .await
        .unwrap();
    assert_eq!(seen.len(), 1);
    assert!(
        store
            .nearest_memories(&scope("u", None), "m2", &q, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // Re-embedding replaces; a forgotten memory is not an error.
    assert!(
        store
            .set_memory_embedding(wide, "m2", &[0.5])
            .await
            .unwrap()
    );
    assert!(
        store
            .nearest_memories(&scope("u", None), "m1", &q, 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.forget_memory("u", bound).await.unwrap());
    assert!(
        !store
            .set_memory_embedding(bound, "m1", &[1.0])
            .await
            .unwrap()
    );
}

/// Search by meaning over many memories returns exactly the best (as a
/// plain cosine over every vector ranks them), and nothing deleted or
/// purged is found afterwards.
pub async fn search_by_meaning_finds_the_exact_best_of_many_and_nothing_deleted<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % 2001) as f32 / 1000.0 - 1.0
    };
    let dim = 24;
    let mut stored = Vec::new();
    for i in 0..600_i64 {
        let id = store
            .save_memory(new("u", None, &format!("fact {i}"), 1_000 + i))
            .await
            .unwrap()
            .memory
            .id;
        let v: Vec<f32> = (0..dim).map(|_| next()).collect();
        assert!(store.set_memory_embedding(id, "m", &v).await.unwrap());
        stored.push((id, v));
    }
    let query: Vec<f32> = (0..dim).map(|_| next()).collect();
    let cosine = |v: &[f32]| {
        let dot: f64 = v.iter().zip(&query).map(|(a, b)| f64::from(a * b)).sum();
        let n = |w: &[f32]| w.iter().map(|a| f64::from(a * a)).sum::<f64>().sqrt();
        dot / (n(v) * n(&query))
    };
    let mut expected: Vec<(i64, f64)> = stored
        .iter()
        .map(|(id, v)| (*id, cosine(v)))
        .filter(|(_, c)| *c > 0.0)
        .collect();
    expected.sort_by(|a, b| b.1.total_cmp(&a.1));
    expected.truncate(20);
    let seen = store
        .nearest_memories(&scope("u", None), "m", &query, 20)
        .await
        .unwrap();
    let ids: Vec<i64> = seen.iter().map(|n| n.memory.id).collect();
    let want: Vec<i64> = expected.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, want);
    for (n, (_, c)) in seen.iter().zip(&expected) {
        assert!((n.similarity - c).abs() < 1e-5, "{} vs {c}", n.similarity);
    }

    // The best one forgotten: the next best leads.
    assert!(store.forget_memory("u", want[0]).await.unwrap());
    let seen = store
        .nearest_memories(&scope("u", None), "m", &query, 1)
        .await
        .unwrap();
    assert_eq!(seen[0].memory.id, want[1]);
    // Everything purged: nothing is found by meaning either.
    assert_eq!(store.purge_memories(10_000).await.unwrap(), 599);
    assert!(
        store
            .nearest_memories(&scope("u", None), "m", &query, 20)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Replicas saving the same fact at once (a tool call redone on two of
/// them) make one memory, which every save returns.
pub async fn concurrent_saves_of_one_fact_make_one_memory<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..16 {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            store
                .save_memory(new("u", Some("t1"), "Allergic to peanuts", 1_000 + i))
                .await
                .unwrap()
        });
    }
    let (mut created, mut ids) = (0, Vec::new());
    while let Some(saved) = tasks.join_next().await {
        let saved = saved.unwrap();
        created += usize::from(saved.created);
        ids.push(saved.memory.id);
    }
    assert_eq!(created, 1);
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let all = store.export_user_memories("u").await.unwrap();
    assert_eq!(all.len(), 1);
    // Every save moved the time forward; none moved it back.
    assert_eq!(all[0].last_used_at, 1_015);
}

/// `n` memories of user `u` named `label`, saved last used at `at`, each
/// embedded by `model` with `vector(i)`; their ids.
async fn embedded<S: MemoryStore>(
    store: &S,
    label: &str,
    (model, at): (&str, i64),
    n: usize,
    vector: impl Fn(usize) -> Vec<f32>,
) -> Vec<i64> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let text = format!("{label} fact {i}");
        let id = store
            .save_memory(new("u", None, &text, at))
            .await
            .unwrap()
            .memory
            .id;
        assert!(
            store
                .set_memory_embedding(id, model, &vector(i))
                .await
                .unwrap()
        );
        ids.push(id);
    }
    ids
}

/// A vector `off` away from the query `[1, 0, 0, 0]`, and a little more
/// the greater `i`: the smaller both, the nearer.
fn near(off: f32, i: usize) -> Vec<f32> {
    vec![1.0, off + 0.02 * (i as f32 + 1.0), 0.0, 0.0]
}

/// 100 more memories, pointing away from the query (never found): with
/// those before them, more than a block's worth on a backend that packs
/// vectors into blocks (PostgreSQL packs 128).
async fn pointing_away<S: MemoryStore>(store: &S) {
    embedded(store, "away", ("m", 5_000), 100, |i| {
        vec![-1.0, 0.0, 0.01 * i as f32, 0.0]
    })
    .await;
}

/// The ids `nearest_memories` returns, best first.
async fn nearest_ids<S: MemoryStore>(store: &S, model: &str, keep: usize) -> Vec<i64> {
    store
        .nearest_memories(&scope("u", None), model, &[1.0, 0.0, 0.0, 0.0], keep)
        .await
        .unwrap()
        .iter()
        .map(|n| n.memory.id)
        .collect()
}

/// Vectors of forgotten and purged memories are gone from what a search by
/// meaning scans, not only from what it returns: more of them than a
/// search's candidates (32 for one result) were the best, and the best of
/// the rest is still found.
pub async fn vectors_of_forgotten_and_purged_memories_leave_the_search<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let rest = embedded(&store, "rest", ("m", 5_000), 10, |i| near(1.0, i)).await;
    let forgotten = embedded(&store, "forgotten", ("m", 5_000), 20, |i| near(0.0, i)).await;
    let purged = embedded(&store, "purged", ("m", 1_000), 20, |i| near(0.0, i)).await;
    pointing_away(&store).await;
    assert_eq!(nearest_ids(&store, "m", 1).await, vec![purged[0]]);
    for id in &forgotten {
        assert!(store.forget_memory("u", *id).await.unwrap());
    }
    assert_eq!(store.purge_memories(2_000).await.unwrap(), 20);
    assert_eq!(nearest_ids(&store, "m", 1).await, vec![rest[0]]);
    assert_eq!(nearest_ids(&store, "m", 100).await, rest);
    // A user's memories erased: nothing of theirs is found, and the rest
    // are kept.
    store
        .delete_user_memories("u", erasure("u", 9))
        .await
        .unwrap();
    assert!(nearest_ids(&store, "m", 100).await.is_empty());
    let after = embedded(&store, "after", ("m", 5_000), 3, |i| near(0.0, i)).await;
    assert_eq!(nearest_ids(&store, "m", 100).await, after);
}

/// A memory embedded again is scanned by its new vector only, whether the
/// same model or another made it.
pub async fn a_memory_embedded_again_is_searched_by_its_new_vector_only<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let rest = embedded(&store, "rest", ("m", 5_000), 10, |i| near(1.0, i)).await;
    let turned = embedded(&store, "turned", ("m", 5_000), 40, |i| near(0.0, i)).await;
    let moved = embedded(&store, "moved", ("m", 5_000), 40, |i| near(0.0, i)).await;
    pointing_away(&store).await;
    assert_eq!(nearest_ids(&store, "m", 1).await, vec![moved[0]]);
    // Now pointing away from the query, by the same model.
    for id in &turned {
        let away = [-1.0, 0.0, 0.0, 0.5];
        assert!(store.set_memory_embedding(*id, "m", &away).await.unwrap());
    }
    // Now embedded by another model, the same way as before.
    for (i, id) in moved.iter().enumerate() {
        assert!(
            store
                .set_memory_embedding(*id, "m2", &near(0.0, i))
                .await
                .unwrap()
        );
    }
    assert_eq!(nearest_ids(&store, "m", 1).await, vec![rest[0]]);
    assert_eq!(nearest_ids(&store, "m", 100).await, rest);
    assert_eq!(nearest_ids(&store, "m2", 100).await, moved);
}

/// Memories of one user embedded at once (several replicas, or the
/// background pass beside a tool call) are all found afterwards.
pub async fn concurrent_embeddings_of_one_user_keep_every_vector<
    S: MemoryStore + GrantStore + RetentionStore,
>(
    store: S,
) {
    let store = std::sync::Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..8_usize {
        let store = std::sync::Arc::clone(&store);
        tasks.spawn(async move {
            let mut ids = Vec::new();
            for i in 0..25 {
                let n = task * 25 + i;
                let text = format!("fact {n}");
                let id = store
                    .save_memory(new("u", None, &text, 1_000))
                    .await
                    .unwrap()
                    .memory
                    .id;
                assert!(
                    store
                        .set_memory_embedding(id, "m", &near(0.0, n))
                        .await
                        .unwrap()
                );
                ids.push(id);
            }
            ids
        });
    }
    let mut all = Vec::new();
    while let Some(ids) = tasks.join_next().await {
        all.extend(ids.unwrap());
    }
    all.sort_unstable();
    let mut found = nearest_ids(&*store, "m", 1_000).await;
    found.sort_unstable();
    assert_eq!(found.len(), 200);
    assert_eq!(found, all);
}
