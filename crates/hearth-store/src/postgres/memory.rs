//! `MemoryStore` on PostgreSQL: memories in a plain table, found through a
//! generated `tsvector` column and its GIN index (schema in
//! `migrations/postgres/0001_schema.sql`), so the index can never lag the
//! text: deleting the row deletes its terms.

use std::collections::HashMap;

use hearth_core::Timestamp;
use tokio_postgres::{IsolationLevel, Row};

use futures_util::StreamExt;

use super::copy_pairs::Pairs;
use super::memory_blocks::{self, each_entry};
use super::rows::col;
use super::shared::append_audit;
use super::{PostgresStore, narrow, wide};
use crate::error::{Result, StoreError};
use crate::memory::{
    MAX_TO_EMBED, MemoryHit, MemoryRecord, MemoryScope, MemoryStore, NearMemory, NewMemory,
    SavedMemory, list_limit, query_words, search_limit, vector_from_bytes,
};
use crate::nearest::{Nearest, compact_vector};
use crate::records::AuditEvent;

/// The `memories` columns in the order [`memory_row`] reads them.
macro_rules! memory_columns {
    () => {
        "id, user_key, thread_key, text, run_id, created_at, last_used_at"
    };
}

fn memory_row(row: &Row) -> Result<MemoryRecord> {
    Ok(MemoryRecord {
        id: col(row, 0)?,
        user_key: col(row, 1)?,
        thread_key: col(row, 2)?,
        text: col(row, 3)?,
        run_id: col(row, 4)?,
        created_at: col(row, 5)?,
        last_used_at: col(row, 6)?,
    })
}

fn memory_rows(rows: &[Row]) -> Result<Vec<MemoryRecord>> {
    rows.iter().map(memory_row).collect()
}

/// Turns user text into input for `websearch_to_tsquery` that can only
/// match words: the query's words (letters and digits only, so none of
/// websearch's quotes or `-` survive) joined with ` or `, so a memory sharing
/// any word is found and `ts_rank_cd` ranks those sharing more first, as
/// SQLite's OR query and BM25 do. `None` when the text has no words.
///
/// A word that is itself "or" reads as the operator; it is an English stop
/// word, which the `english` configuration would drop anyway.
pub(crate) fn tsquery_text(text: &str) -> Option<String> {
    let words = query_words(text);
    (!words.is_empty()).then(|| words.join(" or "))
}

/// Saves a memory, or finds the same one saved before: one statement, so
/// two replicas saving the same fact at once make one row, and a concurrent
/// `forget` cannot slip between a look-up and an insert.
async fn save(store: &PostgresStore, m: &NewMemory) -> Result<SavedMemory> {
    let client = store.client().await?;
    // `xmax = 0` holds only for a row this statement inserted (an updated
    // row carries this transaction's id): that is whether it is new. The
    // uniqueness is on md5(text), so the update also requires the same text:
    // a different text with the same hash returns no row instead of the
    // other memory.
    let stmt = client
        .prepare_cached(concat!(
            "INSERT INTO memories (user_key, thread_key, text, run_id, created_at, last_used_at) \
             VALUES ($1, $2, $3, $4, $5, $5) \
             ON CONFLICT (user_key, (coalesce(thread_key, '')), (md5(text))) DO UPDATE \
             SET last_used_at = greatest(memories.last_used_at, excluded.last_used_at) \
             WHERE memories.text = excluded.text \
             RETURNING ",
            memory_columns!(),
            ", (xmax = 0) AS created"
        ))
        .await?;
    let row = client
        .query_opt(
            &stmt,
            &[&m.user_key, &m.thread_key, &m.text, &m.run_id, &m.at],
        )
        .await?
        .ok_or_else(|| {
            StoreError::Corrupt(
                "another memory of this user in this scope has a text with the same MD5 hash"
                    .into(),
            )
        })?;
    Ok(SavedMemory {
        memory: memory_row(&row)?,
        created: col(&row, 7)?,
    })
}

async fn search(
    store: &PostgresStore,
    scope: &MemoryScope,
    query: &str,
    limit: u32,
) -> Result<Vec<MemoryHit>> {
    let Some(text) = tsquery_text(query) else {
        return Ok(Vec::new());
    };
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(concat!(
            "SELECT ",
            memory_columns!(),
            ", ts_rank_cd(tsv, q)::float8 AS rank \
             FROM memories, websearch_to_tsquery('english', $1) AS q \
             WHERE tsv @@ q AND user_key = $2 AND (thread_key IS NULL OR thread_key = $3) \
             ORDER BY rank DESC, id DESC LIMIT $4"
        ))
        .await?;
    let rows = client
        .query(
            &stmt,
            &[
                &text,
                &scope.user_key,
                &scope.thread_key,
                &wide(search_limit(limit)),
            ],
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok(MemoryHit {
                memory: memory_row(row)?,
                // ts_rank_cd is higher-is-better already.
                score: col(row, 7)?,
            })
        })
        .collect()
}

#[async_trait::async_trait]
impl MemoryStore for PostgresStore {
    async fn save_memory(&self, memory: NewMemory) -> Result<SavedMemory> {
        save(self, &memory).await
    }

    async fn search_memories(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
    ) -> Result<Vec<MemoryHit>> {
        search(self, scope, query, limit).await
    }

    async fn touch_memories(&self, user_key: &str, ids: &[i64], at: Timestamp) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let client = self.client().await?;
        // One statement for the whole batch; the maximum keeps a late,
        // older touch from moving the time back.
        let stmt = client
            .prepare_cached(
                "UPDATE memories SET last_used_at = greatest(last_used_at, $3) \
                 WHERE id = ANY($1) AND user_key = $2",
            )
            .await?;
        Ok(client.execute(&stmt, &[&ids, &user_key, &at]).await?)
    }

    async fn list_memories(&self, scope: &MemoryScope, limit: u32) -> Result<Vec<MemoryRecord>> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT ",
                    memory_columns!(),
                    " FROM memories WHERE user_key = $1 \
                     AND (thread_key IS NULL OR thread_key = $2) \
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                ),
                &[&scope.user_key, &scope.thread_key, &wide(list_limit(limit))],
            )
            .await?;
        memory_rows(&rows)
    }

    async fn forget_memory(&self, user_key: &str, id: i64) -> Result<bool> {
        let client = self.client().await?;
        let n = client
            .execute(
                "DELETE FROM memories WHERE id = $1 AND user_key = $2",
                &[&id, &user_key],
            )
            .await?;
        Ok(n == 1)
    }

    async fn export_user_memories(&self, user_key: &str) -> Result<Vec<MemoryRecord>> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT ",
                    memory_columns!(),
                    " FROM memories WHERE user_key = $1 ORDER BY created_at, id"
                ),
                &[&user_key],
            )
            .await?;
        memory_rows(&rows)
    }

    async fn delete_user_memories(&self, user_key: &str, audit: AuditEvent) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let deleted = tx
            .execute("DELETE FROM memories WHERE user_key = $1", &[&user_key])
            .await?;
        append_audit(&tx, &audit).await?;
        tx.commit().await?;
        Ok(deleted)
    }

    async fn purge_memories(&self, unused_since: Timestamp) -> Result<u64> {
        let client = self.client().await?;
        Ok(purge_memories(&client, unused_since).await?)
    }

    async fn set_memory_embedding(&self, id: i64, model: &str, vector: &[f32]) -> Result<bool> {
        memory_blocks::set_embedding(self, id, model, vector).await
    }

    async fn memories_to_embed(&self, model: &str, limit: u32) -> Result<Vec<MemoryRecord>> {
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT ",
                    memory_columns!(),
                    " FROM memories \
                     WHERE embedding IS NULL OR embedding_model IS DISTINCT FROM $1 \
                     ORDER BY id LIMIT $2"
                ),
                &[&model, &wide(limit.min(MAX_TO_EMBED))],
            )
            .await?;
        memory_rows(&rows)
    }

    async fn count_memories_to_embed(&self, model: &str) -> Result<u64> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM memories \
                 WHERE embedding IS NULL OR embedding_model IS DISTINCT FROM $1",
                &[&model],
            )
            .await?;
        Ok(narrow(row.get::<_, i64>(0)))
    }

    async fn nearest_memories(
        &self,
        scope: &MemoryScope,
        model: &str,
        query: &[f32],
        keep: usize,
    ) -> Result<Vec<NearMemory>> {
        let mut client = self.client().await?;
        // One snapshot for the whole search, shared with a spare connection
        // when the user has blocks to share and the pool has one free now
        // (each reads half the blocks: the server's side of a search is
        // mostly copying them out).
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let stmt = tx
            .prepare_cached(
                "SELECT count(*) FROM memory_blocks WHERE user_key = $1 AND model = $2 \
                 AND (thread_key IS NULL OR thread_key = $3)",
            )
            .await?;
        let blocks: i64 = tx
            .query_one(&stmt, &[&scope.user_key, &model, &scope.thread_key])
            .await?
            .try_get(0)?;
        let mut spare = if blocks >= 2 {
            self.spare_client().await
        } else {
            None
        };
        let parts = if spare.is_some() { 2 } else { 1 };
        set_terms(&tx, scope, model, (0, parts)).await?;
        let copy = if scope.thread_key.is_some() {
            NEAREST_COPY_IN_THREAD
        } else {
            NEAREST_COPY
        };
        let mut scan = Nearest::compact(query, keep);
        match spare.as_mut() {
            None => scan_compact(&tx, copy, &mut scan).await?,
            Some(other) => {
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
                set_terms(&tx2, scope, model, (1, parts)).await?;
                let mut half = Nearest::compact(query, keep);
                let (a, b) = futures_util::future::join(
                    scan_compact(&tx, copy, &mut scan),
                    scan_compact(&tx2, copy, &mut half),
                )
                .await;
                a?;
                b?;
                tx2.commit().await?;
                scan.absorb(half);
            }
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
}

/// Sets a search's terms for the `COPY` of [`NEAREST_COPY`] as settings
/// local to `tx` (COPY takes no parameters: they never go into the SQL
/// text); `(part, parts)`: which of how many shares of the blocks it reads.
async fn set_terms(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &MemoryScope,
    model: &str,
    (part, parts): (i32, i32),
) -> Result<()> {
    let stmt = tx
        .prepare_cached(
            "SELECT set_config('hearth.near_user', $1, true), \
             set_config('hearth.near_model', $2, true), \
             set_config('hearth.near_thread', $3, true), \
             set_config('hearth.near_part', $4::int::text, true), \
             set_config('hearth.near_parts', $5::int::text, true)",
        )
        .await?;
    tx.execute(
        &stmt,
        &[
            &scope.user_key,
            &model,
            &scope.thread_key.as_deref().unwrap_or_default(),
            &part,
            &parts,
        ],
    )
    .await?;
    Ok(())
}

/// Feeds every compact vector the `COPY` `copy` streams on `tx` to `scan`.
async fn scan_compact(
    tx: &deadpool_postgres::Transaction<'_>,
    copy: &str,
    scan: &mut Nearest,
) -> Result<()> {
    let stream = tx.copy_out(copy).await?;
    let mut stream = std::pin::pin!(stream);
    let mut pairs = Pairs::new();
    // Rows are blocks, or the tail's vectors one at a time.
    let mut damaged = Ok(());
    while let Some(chunk) = stream.next().await {
        pairs.feed(&chunk?, |_, entries| {
            if damaged.is_ok() {
                damaged = each_entry(entries, |id, bytes| scan.offer(id, bytes));
            }
        })?;
    }
    pairs.finish()?;
    damaged
}

/// Writes the compact copy of every embedding stored before migration 9,
/// inside that migration's transaction, a batch at a time.
pub(super) async fn backfill_compact_vectors(
    tx: &deadpool_postgres::Transaction<'_>,
) -> std::result::Result<(), tokio_postgres::Error> {
    let stmt = tx
        .prepare(
            "SELECT id, user_key, thread_key, embedding_model, embedding FROM memories \
             WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL ORDER BY id",
        )
        .await?;
    let portal = tx.bind(&stmt, &[]).await?;
    loop {
        let rows = tx.query_portal(&portal, SCAN_BATCH).await?;
        let (mut ids, mut users, mut threads, mut models, mut compacts) =
            (vec![], vec![], vec![], vec![], vec![]);
        for row in &rows {
            ids.push(row.try_get::<_, i64>(0)?);
            users.push(row.try_get::<_, String>(1)?);
            threads.push(row.try_get::<_, Option<String>>(2)?);
            models.push(row.try_get::<_, String>(3)?);
            let bytes: &[u8] = row.try_get(4)?;
            compacts.push(
                vector_from_bytes(bytes)
                    .map(|v| compact_vector(&v))
                    .unwrap_or_default(),
            );
        }
        tx.execute(
            "INSERT INTO memory_vectors (user_key, memory_id, thread_key, model, compact) \
             SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bytea[])",
            &[&users, &ids, &threads, &models, &compacts],
        )
        .await?;
        if rows.len() < SCAN_BATCH as usize {
            return Ok(());
        }
    }
}

/// A user's user-wide compact vectors of one model, as a binary `COPY`
/// ([`Pairs`]: an id, then [`each_entry`]'s bytes): the packed blocks, then
/// the tail's vectors one row each in the same form. The terms are the
/// transaction's `hearth.near_*` settings ([`set_terms`]); of `near_parts`
/// shares, share `near_part` reads the blocks whose id leaves that remainder,
/// and share 0 the tail too.
const NEAREST_COPY: &str = "COPY (\
    SELECT id, entries FROM memory_blocks \
    WHERE user_key = current_setting('hearth.near_user') \
    AND model = current_setting('hearth.near_model') AND thread_key IS NULL \
    AND id % current_setting('hearth.near_parts')::bigint \
        = current_setting('hearth.near_part')::bigint \
    UNION ALL \
    SELECT memory_id, int8send(memory_id) || int4send(length(compact)) || compact \
    FROM memory_vectors \
    WHERE user_key = current_setting('hearth.near_user') \
    AND model = current_setting('hearth.near_model') AND block_id IS NULL \
    AND thread_key IS NULL AND current_setting('hearth.near_part') = '0') \
    TO STDOUT (FORMAT binary)";

/// [`NEAREST_COPY`] with the vectors of one thread too.
const NEAREST_COPY_IN_THREAD: &str = "COPY (\
    SELECT id, entries FROM memory_blocks \
    WHERE user_key = current_setting('hearth.near_user') \
    AND model = current_setting('hearth.near_model') \
    AND (thread_key IS NULL OR thread_key = current_setting('hearth.near_thread')) \
    AND id % current_setting('hearth.near_parts')::bigint \
        = current_setting('hearth.near_part')::bigint \
    UNION ALL \
    SELECT memory_id, int8send(memory_id) || int4send(length(compact)) || compact \
    FROM memory_vectors \
    WHERE user_key = current_setting('hearth.near_user') \
    AND model = current_setting('hearth.near_model') AND block_id IS NULL \
    AND (thread_key IS NULL OR thread_key = current_setting('hearth.near_thread')) \
    AND current_setting('hearth.near_part') = '0') \
    TO STDOUT (FORMAT binary)";

/// Rows of a search by meaning fetched at a time.
const SCAN_BATCH: i32 = 2048;

/// Deletes every memory last used before `unused_since` (alone, or inside
/// the retention pass's transaction).
pub(super) async fn purge_memories(
    c: &impl deadpool_postgres::GenericClient,
    unused_since: Timestamp,
) -> std::result::Result<u64, tokio_postgres::Error> {
    c.execute(
        "DELETE FROM memories WHERE last_used_at < $1",
        &[&unused_since],
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::tsquery_text;

    #[test]
    fn queries_keep_only_words_joined_by_or() {
        assert_eq!(tsquery_text("dog name").as_deref(), Some("dog or name"));
        assert_eq!(
            tsquery_text("\"-x* OR-y\" 'z'").as_deref(),
            Some("x or OR or y or z")
        );
        assert_eq!(tsquery_text(" \"*^:() - "), None);
        assert_eq!(tsquery_text(""), None);
    }
}
