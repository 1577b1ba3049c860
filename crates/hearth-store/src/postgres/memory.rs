//! `MemoryStore` on PostgreSQL: memories in a plain table, found through a
//! generated `tsvector` column and its GIN index (schema in
//! `migrations/postgres/0001_schema.sql`), so the index can never lag the
//! text: deleting the row deletes its terms.

use hearth_core::Timestamp;
use tokio_postgres::Row;

use super::memory_blocks;
use super::near;
use super::rows::col;
use super::shared::append_audit;
use super::{PostgresStore, narrow, wide};
use crate::error::{Result, StoreError};
use crate::memory::{
    COMMON_WORD_MATCHES, MAX_TO_EMBED, MemoryHit, MemoryRecord, MemoryScope, MemoryStore,
    NearMemory, NewMemory, SavedMemory, TextCandidates, distinct_query_words, list_limit,
    query_words, search_limit, vector_from_bytes,
};
use crate::nearest::compact_vector;
use crate::records::AuditEvent;

/// The `memories` columns in the order [`memory_row`] reads them.
macro_rules! memory_columns {
    () => {
        "id, user_key, thread_key, text, run_id, created_at, last_used_at"
    };
}

pub(super) use memory_columns;

pub(super) fn memory_row(row: &Row) -> Result<MemoryRecord> {
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
            &[
                &m.user_key,
                &m.thread_key,
                &super::storable(&m.text),
                &m.run_id,
                &m.at,
            ],
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
    let words = distinct_query_words(query);
    let Some(full) = tsquery_text(query) else {
        return Ok(Vec::new());
    };
    let client = store.client().await?;
    let counts = word_counts(&client, scope, &words).await?;
    let limit = wide(search_limit(limit));
    let rows = match TextCandidates::from_counts(counts) {
        TextCandidates::Nothing => Vec::new(),
        // ts_rank_cd weighs every word of the query alike, common ones too.
        TextCandidates::Rare(rare) => {
            let stmt = client
                .prepare_cached(concat!(
                    "SELECT ",
                    memory_columns!(),
                    ", ts_rank_cd(tsv, q)::float8 AS rank \
                     FROM memories, websearch_to_tsquery('english', $1) AS q \
                     WHERE tsv @@ websearch_to_tsquery('english', $5) AND user_key = $2 \
                     AND (thread_key IS NULL OR thread_key = $3) \
                     ORDER BY rank DESC, id DESC LIMIT $4"
                ))
                .await?;
            client
                .query(
                    &stmt,
                    &[
                        &full,
                        &scope.user_key,
                        &scope.thread_key,
                        &limit,
                        &rare.join(" or "),
                    ],
                )
                .await?
        }
        // Not a cached statement: planned with the query at hand, this one
        // walks the newest memories back (the words are known to be in more
        // than a thousand); a plan made for any query would collect every
        // match first.
        TextCandidates::Newest => {
            client
                .query(
                    concat!(
                        "SELECT ",
                        memory_columns!(),
                        ", ts_rank_cd(tsv, q)::float8 AS rank FROM (SELECT ",
                        memory_columns!(),
                        ", tsv FROM memories WHERE tsv @@ websearch_to_tsquery('english', $1) \
                         AND user_key = $2 AND (thread_key IS NULL OR thread_key = $3) \
                         ORDER BY id DESC LIMIT $5) AS newest, \
                         websearch_to_tsquery('english', $1) AS q \
                         ORDER BY rank DESC, id DESC LIMIT $4"
                    ),
                    &[
                        &full,
                        &scope.user_key,
                        &scope.thread_key,
                        &limit,
                        &i64::from(COMMON_WORD_MATCHES),
                    ],
                )
                .await?
        }
    };
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

/// How many memories of `scope` each word finds, up to one past
/// [`COMMON_WORD_MATCHES`]: one statement, not a cached one, so each word's
/// count is planned for that word (a common word's by walking rows until
/// enough are found, a rare word's through the index). A stop word of the
/// `english` configuration finds nothing.
async fn word_counts(
    client: &deadpool_postgres::Client,
    scope: &MemoryScope,
    words: &[&str],
) -> Result<Vec<(String, u64)>> {
    let mut sql = String::from("SELECT ");
    for i in 0..words.len() {
        if i > 0 {
            sql.push_str(", ");
        }
        // $4 onwards are the words; each count is skipped for a stop word,
        // whose empty query the index would complain about.
        let n = i + 4;
        sql.push_str(&format!(
            "CASE WHEN numnode(plainto_tsquery('english', ${n})) = 0 THEN 0 ELSE \
             (SELECT count(*) FROM (SELECT 1 FROM memories \
             WHERE tsv @@ plainto_tsquery('english', ${n}) AND user_key = $1 \
             AND (thread_key IS NULL OR thread_key = $2) LIMIT $3) AS found) END"
        ));
    }
    let cap = i64::from(COMMON_WORD_MATCHES) + 1;
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
        vec![&scope.user_key, &scope.thread_key, &cap];
    params.extend(
        words
            .iter()
            .map(|w| w as &(dyn tokio_postgres::types::ToSql + Sync)),
    );
    let row = client.query_one(sql.as_str(), &params).await?;
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let found: i64 = col(&row, i)?;
            Ok(((*w).to_owned(), u64::try_from(found).unwrap_or(0)))
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
        near::nearest(self, self.vector_cache(), scope, model, query, keep).await
    }
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
