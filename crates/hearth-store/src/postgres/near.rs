//! Search by meaning on PostgreSQL: the compact vectors of the user's
//! blocks ([`super::memory_blocks`]) and of its tail scored approximately,
//! then the f32 copies of the best candidates scored exactly, all in one
//! snapshot.
//!
//! Blocks held by this replica's [`VectorCache`] at their current version
//! are scored from memory; the others are streamed by a binary `COPY` (over
//! two connections sharing the snapshot when there are many: the server's
//! side of that is mostly copying them out) and kept when they fit.

use std::collections::HashMap;

use futures_util::StreamExt;
use tokio_postgres::IsolationLevel;

use super::PostgresStore;
use super::copy_pairs::Pairs;
use super::memory::{memory_columns, memory_row};
use super::memory_blocks::each_entry;
use super::rows::col;
use super::vector_cache::{Listed, VectorCache};
use crate::error::{Result, StoreError};
use crate::memory::{MemoryScope, NearMemory};
use crate::nearest::Nearest;

/// Blocks to fetch before a second connection is worth its set-up (a
/// transaction importing the snapshot): a cold search, not one that finds
/// a block or two rewritten.
const SPLIT_FROM: usize = 16;

/// Blocks fetched from the database, with their listing, to hand to the
/// cache; `None` when they are not to be kept.
type Fetched = Option<Vec<(Listed, Vec<u8>)>>;

/// The `keep` memories of `scope` whose `model` embeddings are nearest to
/// `query`, best first.
pub(super) async fn nearest(
    store: &PostgresStore,
    cache: &VectorCache,
    scope: &MemoryScope,
    model: &str,
    query: &[f32],
    keep: usize,
) -> Result<Vec<NearMemory>> {
    let mut client = store.client().await?;
    let tx = client
        .build_transaction()
        .isolation_level(IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?;
    let plan = cache.plan(
        &scope.user_key,
        model,
        scope.thread_key.as_deref(),
        list_blocks(&tx, scope, model).await?,
    );
    let mut scan = Nearest::compact(query, keep);
    scan_tail(&tx, scope, model, &mut scan).await?;
    let mut fetched: Fetched = plan.keep.then(Vec::new);
    if !plan.missing.is_empty() {
        let spare = if plan.missing.len() >= SPLIT_FROM {
            store.spare_client().await
        } else {
            None
        };
        match spare {
            None => {
                scan_blocks(&tx, plan.missing, &mut scan, fetched.as_mut()).await?;
            }
            Some(mut other) => {
                // One snapshot for both: the versions listed are those of
                // the entries read.
                let snapshot: String = tx
                    .query_one("SELECT pg_export_snapshot()", &[])
                    .await?
                    .try_get(0)?;
                // SET TRANSACTION SNAPSHOT takes no parameter; the id is
                // PostgreSQL's own (hex digits and dashes).
                if !snapshot.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
                    return Err(StoreError::Corrupt(format!(
                        "pg_export_snapshot returned {snapshot:?}, not a snapshot id"
                    )));
                }
                let tx2 = other
                    .build_transaction()
                    .isolation_level(IsolationLevel::RepeatableRead)
                    .read_only(true)
                    .start()
                    .await?;
                tx2.batch_execute(&format!("SET TRANSACTION SNAPSHOT '{snapshot}'"))
                    .await?;
                let (mut mine, mut theirs) = (Vec::new(), Vec::new());
                for (i, block) in plan.missing.into_iter().enumerate() {
                    if i % 2 == 0 { &mut mine } else { &mut theirs }.push(block);
                }
                let mut half = Nearest::compact(query, keep);
                let mut fetched2: Fetched = fetched.is_some().then(Vec::new);
                let (a, b) = futures_util::future::join(
                    scan_blocks(&tx, mine, &mut scan, fetched.as_mut()),
                    scan_blocks(&tx2, theirs, &mut half, fetched2.as_mut()),
                )
                .await;
                a?;
                b?;
                tx2.commit().await?;
                scan.absorb(half);
                if let (Some(all), Some(more)) = (fetched.as_mut(), fetched2) {
                    all.extend(more);
                }
            }
        }
    }
    for block in &plan.held {
        each_entry(&block.entries, |id, bytes| scan.offer(id, bytes))?;
    }
    if let Some(blocks) = fetched {
        cache.keep(&scope.user_key, model, blocks);
    }
    let ids: Vec<i64> = scan.ranked().iter().map(|(id, _)| *id).collect();
    // The candidates' f32 vectors, scored exactly, with their facts.
    let stmt = tx
        .prepare_cached(concat!(
            "SELECT ",
            memory_columns!(),
            ", embedding FROM memories WHERE id = ANY($1) AND embedding_model = $2"
        ))
        .await?;
    let rows = tx.query(&stmt, &[&ids, &model]).await?;
    tx.commit().await?;
    let mut best = Nearest::new(query, keep);
    let mut found = HashMap::with_capacity(rows.len());
    for row in &rows {
        let record = memory_row(row)?;
        let bytes: &[u8] = col(row, 7)?;
        best.offer(record.id, bytes);
        found.insert(record.id, record);
    }
    Ok(best
        .ranked()
        .into_iter()
        .filter_map(|(id, similarity)| {
            found
                .remove(&id)
                .map(|memory| NearMemory { memory, similarity })
        })
        .collect())
}

/// The blocks of `scope`'s `model` vectors: ids, versions and sizes only
/// (the entries are stored out of line, so this reads none of them).
async fn list_blocks(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &MemoryScope,
    model: &str,
) -> Result<Vec<Listed>> {
    let stmt = tx
        .prepare_cached(
            "SELECT id, version, thread_key, octet_length(entries) FROM memory_blocks \
             WHERE user_key = $1 AND model = $2 AND (thread_key IS NULL OR thread_key = $3)",
        )
        .await?;
    let rows = tx
        .query(&stmt, &[&scope.user_key, &model, &scope.thread_key])
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Listed {
                id: col(r, 0)?,
                version: col(r, 1)?,
                thread_key: col(r, 2)?,
                bytes: usize::try_from(col::<i32>(r, 3)?).unwrap_or(0),
            })
        })
        .collect()
}

/// Feeds `scope`'s `model` vectors not packed into a block yet (fewer than
/// a block's worth per thread) to `scan`.
async fn scan_tail(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &MemoryScope,
    model: &str,
    scan: &mut Nearest,
) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT memory_id, compact FROM memory_vectors \
             WHERE user_key = $1 AND model = $2 AND block_id IS NULL \
             AND (thread_key IS NULL OR thread_key = $3)",
        )
        .await?;
    for row in tx
        .query(&stmt, &[&scope.user_key, &model, &scope.thread_key])
        .await?
    {
        scan.offer(col(&row, 0)?, col(&row, 1)?);
    }
    Ok(())
}

/// Streams the entries of `blocks` on `tx` into `scan`, and into `fetched`
/// (with their listing) when given.
async fn scan_blocks(
    tx: &deadpool_postgres::Transaction<'_>,
    blocks: Vec<Listed>,
    scan: &mut Nearest,
    mut fetched: Option<&mut Vec<(Listed, Vec<u8>)>>,
) -> Result<()> {
    if blocks.is_empty() {
        return Ok(());
    }
    let ids = blocks
        .iter()
        .map(|b| b.id.to_string())
        .collect::<Vec<_>>()
        .join(",");
    // COPY takes no parameters: the ids go in a setting local to `tx`,
    // never into the SQL text.
    let stmt = tx
        .prepare_cached("SELECT set_config('hearth.near_blocks', $1, true)")
        .await?;
    tx.execute(&stmt, &[&ids]).await?;
    let mut listed: HashMap<i64, Listed> = blocks.into_iter().map(|b| (b.id, b)).collect();
    let stream = tx.copy_out(BLOCKS_COPY).await?;
    let mut stream = std::pin::pin!(stream);
    let mut pairs = Pairs::new();
    let mut damaged = Ok(());
    while let Some(chunk) = stream.next().await {
        pairs.feed(&chunk?, |id, entries| {
            if damaged.is_err() {
                return;
            }
            damaged = each_entry(entries, |id, bytes| scan.offer(id, bytes));
            if let (Some(out), Some(block)) = (fetched.as_deref_mut(), listed.remove(&id)) {
                out.push((block, entries.to_vec()));
            }
        })?;
    }
    pairs.finish()?;
    damaged
}

/// The `(id, entries)` of the blocks whose ids the transaction's
/// `hearth.near_blocks` setting lists (decimal, comma-separated), as a
/// binary `COPY` ([`Pairs`]). The ids are a set to join, not an `= ANY`
/// filter: PostgreSQL would parse the setting again for every row.
const BLOCKS_COPY: &str = "COPY (\
    SELECT b.id, b.entries \
    FROM unnest(string_to_array(current_setting('hearth.near_blocks'), ',')::bigint[]) AS w(id) \
    JOIN memory_blocks b ON b.id = w.id) \
    TO STDOUT (FORMAT binary)";

#[cfg(test)]
pub(super) mod tests {
    use super::super::PostgresStore;
    use crate::memory::{MemoryScope, MemoryStore, NewMemory};

    /// Saves a user-wide memory of user `u` embedded by `m` as `vector`.
    pub(in crate::postgres) async fn save(store: &PostgresStore, n: usize, vector: &[f32]) -> i64 {
        let id = store
            .save_memory(NewMemory {
                user_key: "u".into(),
                thread_key: None,
                text: format!("fact {n}"),
                run_id: None,
                at: 0,
            })
            .await
            .unwrap()
            .memory
            .id;
        assert!(store.set_memory_embedding(id, "m", vector).await.unwrap());
        id
    }

    /// The ids of the 3 memories of `u` nearest to (1, 0, 0).
    async fn nearest(store: &PostgresStore) -> Vec<i64> {
        let scope = MemoryScope {
            user_key: "u".into(),
            thread_key: None,
        };
        store
            .nearest_memories(&scope, "m", &[1.0, 0.0, 0.0], 3)
            .await
            .unwrap()
            .iter()
            .map(|n| n.memory.id)
            .collect()
    }

    /// Two replicas on one database: `a` holds the user's blocks after a
    /// search, and still finds what `b` changed in them since, as `plain`
    /// (holding nothing) does.
    #[tokio::test]
    async fn a_held_block_changed_by_another_replica_is_read_again() {
        let Some(url) = super::super::testing::fresh_database_url().await else {
            return;
        };
        let a = PostgresStore::connect(&url, "TEST", 4).await.unwrap();
        let b = PostgresStore::connect(&url, "TEST", 4).await.unwrap();
        let plain = PostgresStore::connect(&url, "TEST", 4).await.unwrap();
        plain.set_vector_cache_bytes(0);
        // 300 vectors pointing mostly away from the query, all alike (ties
        // go to the newer memory, so the first block's are no candidates):
        // two blocks of 128 and a tail of 44.
        let away = |_: usize| vec![0.1, 1.0, 0.0];
        let mut ids = Vec::new();
        for n in 0..300 {
            ids.push(save(&b, n, &away(n)).await);
        }
        let first = nearest(&a).await;
        assert_eq!(first, nearest(&plain).await);
        let (held, _, fetched) = a.vector_cache().stats();
        assert!(held > 2 * 128 * 3, "{held} bytes held");
        assert_eq!(fetched, 2);
        // A second search reads no block again.
        assert_eq!(nearest(&a).await, first);
        assert_eq!(a.vector_cache().stats().2, 2);

        // `b` embeds a memory of the first block again, now pointing at
        // the query: the block is rewritten in place.
        assert!(
            b.set_memory_embedding(ids[5], "m", &[1.0, 0.0, 0.0])
                .await
                .unwrap()
        );
        let now = nearest(&a).await;
        assert_eq!(now[0], ids[5], "{now:?}");
        assert_eq!(now, nearest(&plain).await);
        assert_eq!(a.vector_cache().stats().2, 3, "only that block read again");

        // `b` forgets it, and saves another pointing at the query (the
        // tail): `a` sees both.
        assert!(b.forget_memory("u", ids[5]).await.unwrap());
        let newest = save(&b, 1_000, &[1.0, 0.01, 0.0]).await;
        let now = nearest(&a).await;
        assert_eq!(now[0], newest, "{now:?}");
        assert!(!now.contains(&ids[5]));
        assert_eq!(now, nearest(&plain).await);

        // A full tail packed into a new block by `b` is fetched by `a`.
        for n in 0..84 {
            save(&b, 2_000 + n, &away(n)).await;
        }
        let before = a.vector_cache().stats().2;
        assert_eq!(nearest(&a).await, nearest(&plain).await);
        assert_eq!(a.vector_cache().stats().2, before + 1);
        assert_eq!(plain.vector_cache().stats().0, 0, "0 holds nothing");
    }
}
