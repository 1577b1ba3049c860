//! The compact vectors of a user packed into blocks (`memory_blocks`,
//! migration `0013_memory_blocks.sql`): a search by meaning reads a few
//! hundred block rows instead of one row per fact, since PostgreSQL's
//! executor costs about half a microsecond per row whatever the row holds.
//!
//! `memory_vectors` keeps one row per vector, each naming its block; a
//! block is those rows concatenated, rewritten whole when one of them is
//! written ([`set_embedding`]) or deleted (a trigger, once per statement,
//! whatever deleted the memories). Every writer of a user's blocks holds the
//! user's advisory lock until it commits, so two writers never rebuild one
//! block from two different views of its vectors.

use super::PostgresStore;
use crate::error::{Result, StoreError};
use crate::memory::vector_to_bytes;
use crate::nearest::compact_vector;

/// The most vectors a block holds. The migration's fill
/// (`hearth_fill_memory_blocks`) packs by the same number: 128 vectors of
/// 384 dimensions are 50 KB, so 10^5 facts are under 800 rows, and writing
/// one vector rewrites at most 50 KB.
pub(super) const BLOCK_VECTORS: i32 = 128;

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
/// copy) and rewrites the blocks it leaves and joins, in one transaction.
/// `false` when the memory is gone.
pub(super) async fn set_embedding(
    store: &PostgresStore,
    id: i64,
    model: &str,
    vector: &[f32],
) -> Result<bool> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    // The memory's row lock first, the user's block lock after, as a
    // delete takes them (its trigger locks at the end of the statement):
    // one order, so the two cannot wait for each other.
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
    tx.execute("SELECT hearth_lock_memory_blocks(ARRAY[$1])", &[&user])
        .await?;
    // Read after the lock: what the last writer of these blocks committed.
    let stmt = tx
        .prepare_cached(
            "SELECT block_id, model FROM memory_vectors WHERE user_key = $1 AND memory_id = $2",
        )
        .await?;
    let was: Option<(Option<i64>, String)> = match tx.query_opt(&stmt, &[&user, &id]).await? {
        Some(row) => Some((row.try_get(0)?, row.try_get(1)?)),
        None => None,
    };
    let block = match &was {
        // Embedded again by the same model: rewritten where it is.
        Some((Some(block), was_model)) if was_model == model => *block,
        _ => {
            let stmt = tx
                .prepare_cached(
                    "WITH last AS (SELECT id FROM memory_blocks \
                     WHERE user_key = $1 AND model = $2 AND thread_key IS NOT DISTINCT FROM $3 \
                     AND count < $4 ORDER BY id DESC LIMIT 1), \
                     made AS (INSERT INTO memory_blocks (user_key, thread_key, model, count, entries) \
                     SELECT $1, $3, $2, 0, ''::bytea WHERE NOT EXISTS (SELECT 1 FROM last) \
                     RETURNING id) \
                     SELECT id FROM last UNION ALL SELECT id FROM made",
                )
                .await?;
            tx.query_one(&stmt, &[&user, &model, &thread, &BLOCK_VECTORS])
                .await?
                .try_get(0)?
        }
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
        &[
            &user,
            &id,
            &thread,
            &model,
            &compact_vector(vector),
            &block,
        ],
    )
    .await?;
    let mut blocks = vec![block];
    if let Some((Some(old), _)) = was
        && old != block
    {
        blocks.push(old);
    }
    tx.execute("SELECT hearth_rebuild_memory_blocks($1)", &[&blocks])
        .await?;
    tx.commit().await?;
    Ok(true)
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
            vec![(7, b"abc".to_vec()), (-1, vec![]), (1 << 40, vec![0xff; 300])]
        );
        each_entry(&[], |_, _| panic!("an empty block has no vector")).unwrap();
    }

    #[test]
    fn a_cut_block_is_an_error() {
        let block = entry(7, b"abc");
        for cut in [1, ENTRY_HEADER - 1, ENTRY_HEADER + 2] {
            assert!(each_entry(&block[..cut], |_, _| {}).is_err(), "cut at {cut}");
        }
    }
}
