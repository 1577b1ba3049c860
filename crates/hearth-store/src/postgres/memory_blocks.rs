//! The compact vectors of a user packed into blocks (`memory_blocks`,
//! migration `0013_memory_blocks.sql`): a search by meaning reads a few
//! hundred block rows instead of one row per fact, since PostgreSQL's
//! executor costs about half a microsecond per row whatever the row holds.
//!
//! `memory_vectors` keeps one row per vector, each naming its block or none
//! (the tail). A new vector joins the tail of its user, thread and model;
//! once the tail holds [`BLOCK_VECTORS`], they are packed into a new block
//! in the same transaction, so each vector is written twice, not once per
//! later neighbour. A block is rewritten whole when one of its vectors is
//! embedded again ([`set_embedding`]) or deleted (a trigger, once per
//! statement, whatever deleted the memories). Every writer of a user's
//! blocks holds the user's advisory lock until it commits, so two writers
//! never rebuild one block, or pack one tail, from two views of its rows.

use super::PostgresStore;
use crate::error::{Result, StoreError};
use crate::memory::vector_to_bytes;
use crate::nearest::compact_vector;

/// The vectors of a packed block. The migration's fill
/// (`hearth_fill_memory_blocks`) packs by the same number: 128 vectors of
/// 384 dimensions are 50 KB, so 10^5 facts are under 800 rows plus a tail of
/// fewer than 128, and embedding one again rewrites at most 50 KB.
pub(super) const BLOCK_VECTORS: i64 = 128;

/// Bytes before each vector in a block: its memory id (i64) and its length
/// (i32), both big-endian.
const ENTRY_HEADER: usize = 12;

/// Calls `each` with every `(memory id, compact vector)` of a block's
/// `entries`, in order.
pub(super) fn each_entry(
    mut entries: &[u8],
    mut each: impl FnMut(i64, &[u8]),
) -> std::result::Result<(), StoreError> {
    while !entries.is_empty() {
        let (head, rest) = entries.split_at_checked(ENTRY_HEADER).ok_or_else(|| {
            StoreError::Corrupt("memory_blocks: a block ends inside a vector's header".into())
        })?;
        let mut id = [0_u8; 8];
        id.copy_from_slice(&head[..8]);
        let len = u32::from_be_bytes([head[8], head[9], head[10], head[11]]) as usize;
        let (vector, rest) = rest.split_at_checked(len).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "memory_blocks: a block ends inside the vector of memory {}",
                i64::from_be_bytes(id)
            ))
        })?;
        each(i64::from_be_bytes(id), vector);
        entries = rest;
    }
    Ok(())
}

/// Stores memory `id`'s embedding by `model` (its f32 copy and its compact
/// copy), rewrites the block it is in or leaves, and packs its tail once
/// full, in one transaction. `false` when the memory is gone.
pub(super) async fn set_embedding(
    store: &PostgresStore,
    id: i64,
    model: &str,
    vector: &[f32],
) -> Result<bool> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // The memory's row lock first, the user's block lock after (when it
    // is needed), as a delete takes them (its trigger locks at the end of
    // the statement): one order, so the two cannot wait for each other.
    let stmt = tx
        .prepare_cached(
            "UPDATE memories SET embedding = $2, embedding_model = $3 \
             WHERE id = $1 RETURNING user_key, thread_key",
        )
        .await?;
    let Some(row) = tx
        .query_opt(&stmt, &[&id, &vector_to_bytes(vector), &model])
        .await?
    else {
        tx.commit().await?;
        return Ok(false);
    };
    let user: String = row.try_get(0)?;
    let thread: Option<String> = row.try_get(1)?;
    // A memory embedded for the first time has no vector a block or a
    // pack could hold (another embedding of it waits for the row lock
    // above): it joins the tail without the user's lock, so the saves of
    // one user run side by side. One embedded before is read again under
    // the lock, as the last writer of its block left it.
    let mut was = stored(&tx, &user, id).await?;
    let mut locked = false;
    if was.is_some() {
        lock(&tx, &user).await?;
        locked = true;
        was = stored(&tx, &user, id).await?;
    }
    // Embedded again by the same model: rewritten in its block. Otherwise
    // it joins the tail, and leaves the block it was in.
    let (kept, left) = match &was {
        Some((block, was_model)) if was_model == model => (*block, None),
        Some((block, _)) => (None, *block),
        None => (None, None),
    };
    let stmt = tx
        .prepare_cached(
            "INSERT INTO memory_vectors (user_key, memory_id, thread_key, model, compact, block_id) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (user_key, memory_id) DO UPDATE \
             SET model = excluded.model, compact = excluded.compact, block_id = excluded.block_id",
        )
        .await?;
    tx.execute(
        &stmt,
        &[&user, &id, &thread, &model, &compact_vector(vector), &kept],
    )
    .await?;
    let rebuild: Vec<i64> = kept.into_iter().chain(left).collect();
    if !rebuild.is_empty() {
        tx.execute("SELECT hearth_rebuild_memory_blocks($1)", &[&rebuild])
            .await?;
    }
    if kept.is_none() {
        pack_full_tail(&tx, &user, thread.as_deref(), model, locked).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Packs the tail of `user`'s vectors of `thread` (or user-wide) and
/// `model` into a new block once it holds [`BLOCK_VECTORS`], taking the
/// user's lock for it unless `locked` says the caller holds it.
async fn pack_full_tail(
    tx: &deadpool_postgres::Transaction<'_>,
    user: &str,
    thread: Option<&str>,
    model: &str,
    locked: bool,
) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT count(*) FROM memory_vectors WHERE user_key = $1 AND model = $2 \
             AND block_id IS NULL AND thread_key IS NOT DISTINCT FROM $3",
        )
        .await?;
    let count = || async {
        Ok::<i64, StoreError>(
            tx.query_one(&stmt, &[&user, &model, &thread])
                .await?
                .try_get(0)?,
        )
    };
    if count().await? < BLOCK_VECTORS {
        return Ok(());
    }
    if !locked {
        lock(tx, user).await?;
        // Counted again: another writer may have packed it meanwhile.
        if count().await? < BLOCK_VECTORS {
            return Ok(());
        }
    }
    let stmt = tx
        .prepare_cached(
            "WITH made AS (INSERT INTO memory_blocks (user_key, thread_key, model, count, entries) \
             VALUES ($1, $3, $2, 0, ''::bytea) RETURNING id), \
             packed AS (UPDATE memory_vectors SET block_id = (SELECT id FROM made) \
             WHERE user_key = $1 AND model = $2 AND block_id IS NULL \
             AND thread_key IS NOT DISTINCT FROM $3) \
             SELECT id FROM made",
        )
        .await?;
    let block: i64 = tx
        .query_one(&stmt, &[&user, &model, &thread])
        .await?
        .try_get(0)?;
    tx.execute(
        "SELECT hearth_rebuild_memory_blocks(ARRAY[$1::bigint])",
        &[&block],
    )
    .await?;
    Ok(())
}

/// The block (if any) and the model of memory `id`'s stored vector, if it
/// has one.
async fn stored(
    tx: &deadpool_postgres::Transaction<'_>,
    user: &str,
    id: i64,
) -> Result<Option<(Option<i64>, String)>> {
    let stmt = tx
        .prepare_cached(
            "SELECT block_id, model FROM memory_vectors WHERE user_key = $1 AND memory_id = $2",
        )
        .await?;
    Ok(match tx.query_opt(&stmt, &[&user, &id]).await? {
        Some(row) => Some((row.try_get(0)?, row.try_get(1)?)),
        None => None,
    })
}

/// Takes `user`'s block lock until the transaction ends.
async fn lock(tx: &deadpool_postgres::Transaction<'_>, user: &str) -> Result<()> {
    tx.execute(
        "SELECT hearth_lock_memory_blocks(ARRAY[$1::text])",
        &[&user],
    )
    .await?;
    Ok(())
}

/// Packs every vector in no block yet (those `hearth store
/// copy-to-postgres` just copied) into new blocks, inside `tx`.
pub(super) async fn fill_blocks(
    tx: &tokio_postgres::Transaction<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    tx.execute("SELECT hearth_fill_memory_blocks()", &[])
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryStore;

    fn entry(id: i64, v: &[u8]) -> Vec<u8> {
        let mut out = id.to_be_bytes().to_vec();
        out.extend_from_slice(&u32::try_from(v.len()).unwrap().to_be_bytes());
        out.extend_from_slice(v);
        out
    }

    #[test]
    fn a_block_reads_as_its_vectors_in_order() {
        let mut block = entry(7, b"abc");
        block.extend(entry(-1, b""));
        block.extend(entry(1 << 40, &[0xff; 300]));
        let mut got = Vec::new();
        each_entry(&block, |id, v| got.push((id, v.to_vec()))).unwrap();
        assert_eq!(
            got,
            vec![
                (7, b"abc".to_vec()),
                (-1, vec![]),
                (1 << 40, vec![0xff; 300])
            ]
        );
        each_entry(&[], |_, _| panic!("an empty block has no vector")).unwrap();
    }

    #[test]
    fn a_cut_block_is_an_error() {
        let block = entry(7, b"abc");
        for cut in [1, ENTRY_HEADER - 1, ENTRY_HEADER + 2] {
            assert!(
                each_entry(&block[..cut], |_, _| {}).is_err(),
                "cut at {cut}"
            );
        }
    }

    /// Blocks whose entries differ from the rows naming them, rows naming
    /// a block that is gone, and blocks whose count is wrong: all must be
    /// none.
    const INCONSISTENT: &str = "SELECT \
        (SELECT count(*) FROM memory_blocks b WHERE b.entries IS DISTINCT FROM \
            (SELECT string_agg(int8send(memory_id) || int4send(length(compact)) || compact, \
             ''::bytea ORDER BY memory_id) FROM memory_vectors WHERE block_id = b.id) \
            OR b.count <> (SELECT count(*) FROM memory_vectors WHERE block_id = b.id)) \
        + (SELECT count(*) FROM memory_vectors v WHERE v.block_id IS NOT NULL \
            AND NOT EXISTS (SELECT 1 FROM memory_blocks b WHERE b.id = v.block_id \
            AND b.model = v.model AND b.user_key = v.user_key))";

    /// Every rewrite of a block (one of its vectors embedded again, one
    /// deleted) gives it a version it never had, which is how a replica
    /// holding the block knows to read it again.
    #[tokio::test]
    async fn a_rewritten_block_takes_a_new_version() {
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let store = PostgresStore::connect(&url, "TEST", 2).await.unwrap();
        let mut ids = Vec::new();
        for n in 0..BLOCK_VECTORS as usize {
            ids.push(super::super::near::tests::save(&store, n, &[1.0, n as f32]).await);
        }
        let client = store.client().await.unwrap();
        let version = || async {
            let row = client
                .query_one("SELECT version FROM memory_blocks", &[])
                .await
                .unwrap();
            row.get::<_, i64>(0)
        };
        let mut seen = vec![version().await];
        assert!(
            store
                .set_memory_embedding(ids[3], "m", &[0.0, 1.0])
                .await
                .unwrap()
        );
        seen.push(version().await);
        assert!(store.forget_memory("u", ids[4]).await.unwrap());
        seen.push(version().await);
        let mut distinct = seen.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "versions {seen:?}");
    }

    /// Saves, re-embeddings (by the same model and another) and forgets of
    /// one user's memories, eight at once, leave every block exactly the
    /// vectors that name it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_writers_of_one_users_blocks_leave_them_exact() {
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let store = std::sync::Arc::new(PostgresStore::connect(&url, "TEST", 8).await.unwrap());
        fn vector(n: usize) -> Vec<f32> {
            vec![1.0_f32, (n % 97) as f32 * 0.01, (n % 13) as f32 * 0.1]
        }
        async fn save(store: std::sync::Arc<PostgresStore>, n: usize) -> i64 {
            super::super::near::tests::save(&store, n, &vector(n)).await
        }
        let mut first = Vec::new();
        for n in 0..400 {
            first.push(save(store.clone(), n).await);
        }
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..8_usize {
            let store = store.clone();
            let mine: Vec<i64> = first.iter().skip(task).step_by(8).copied().collect();
            tasks.spawn(async move {
                let mut kept = Vec::new();
                for (i, id) in mine.into_iter().enumerate() {
                    match i % 4 {
                        0 => assert!(store.forget_memory("u", id).await.unwrap()),
                        1 => {
                            assert!(
                                store
                                    .set_memory_embedding(id, "m", &vector(i + 7))
                                    .await
                                    .unwrap()
                            );
                            kept.push(id);
                        }
                        2 => assert!(
                            store
                                .set_memory_embedding(id, "m2", &vector(i))
                                .await
                                .unwrap()
                        ),
                        _ => kept.push(id),
                    }
                    kept.push(save(store.clone(), 1_000 + task * 100 + i).await);
                }
                kept
            });
        }
        let mut kept = Vec::new();
        while let Some(ids) = tasks.join_next().await {
            kept.extend(ids.unwrap());
        }
        let client = store.client().await.unwrap();
        let bad: i64 = client.query_one(INCONSISTENT, &[]).await.unwrap().get(0);
        assert_eq!(bad, 0, "blocks that differ from their vectors");
        let scope = crate::memory::MemoryScope {
            user_key: "u".into(),
            thread_key: None,
        };
        let mut found: Vec<i64> = store
            .nearest_memories(&scope, "m", &[1.0, 0.0, 0.0], 2_000)
            .await
            .unwrap()
            .iter()
            .map(|n| n.memory.id)
            .collect();
        found.sort_unstable();
        kept.sort_unstable();
        assert_eq!(found, kept);
        let packed: i64 = client
            .query_one("SELECT count(*) FROM memory_blocks", &[])
            .await
            .unwrap()
            .get(0);
        assert!(packed >= 3, "{packed} blocks");
    }
}
