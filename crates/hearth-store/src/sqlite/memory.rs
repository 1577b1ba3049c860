//! `MemoryStore` and `RetentionStore` on SQLite: memories in a plain table,
//! found through an FTS5 index that triggers keep in step with it.

use std::collections::HashMap;
use std::sync::Arc;

use hearth_core::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::db::Db;
use super::grants::append_audit;
use super::rows::col;
use super::vector_cache::{Change, VectorCache};
use crate::error::Result;
use crate::memory::{
    COMMON_WORD_MATCHES, MAX_TO_EMBED, MemoryHit, MemoryRecord, MemoryScope, MemoryStore,
    NearMemory, NewMemory, SavedMemory, TextCandidates, distinct_query_words, list_limit,
    search_limit, vector_from_bytes, vector_to_bytes,
};
use crate::nearest::{Nearest, compact_vector};
use crate::records::AuditEvent;
use crate::retention::{PurgeReport, RetentionCutoffs, RetentionStore};

/// Memories and their full-text index.
///
/// The index keeps its own copy of the text (not `content=`), so deleting
/// its row is all it takes to drop the text from it; `secure-delete` makes
/// FTS5 remove a deleted row's terms from the index pages at once instead of
/// leaving them until a later merge, so an erased memory is not findable on
/// disk in the index either. The unique index makes a repeated save (a redone
/// tool call) find the first row; `ifnull` because NULLs never collide.
pub(super) const MIGRATION_V7: &str = "
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    user_key TEXT NOT NULL,
    thread_key TEXT,
    text TEXT NOT NULL,
    run_id TEXT,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS memories_unique
    ON memories (user_key, ifnull(thread_key, ''), text);
CREATE INDEX IF NOT EXISTS memories_user_created ON memories (user_key, created_at);
CREATE INDEX IF NOT EXISTS memories_last_used ON memories (last_used_at);

CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5 (
    text,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
INSERT INTO memories_fts (memories_fts, rank) VALUES ('secure-delete', 1);

CREATE TRIGGER IF NOT EXISTS memories_fts_insert AFTER INSERT ON memories BEGIN
    INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memories_fts WHERE rowid = old.id;
END;
CREATE TRIGGER IF NOT EXISTS memories_fts_update AFTER UPDATE OF text ON memories BEGIN
    UPDATE memories_fts SET text = new.text WHERE rowid = old.id;
END;
";

/// The embedding of each memory (f32 little-endian) and the model that
/// made it, so a change of model is seen as "not embedded yet".
pub(super) const MIGRATION_V17: &str = "
ALTER TABLE memories ADD COLUMN embedding BLOB;
ALTER TABLE memories ADD COLUMN embedding_model TEXT;
";

/// The compact copy of each embedding ([`compact_vector`]), apart from the
/// memories so a search by meaning reads nothing else: clustered by user
/// (`WITHOUT ROWID`), so one user's vectors lie together and the scan is a
/// range of the primary key. The trigger drops a memory's copy with it;
/// [`backfill_compact_vectors`] fills the table for memories embedded before.
pub(super) const MIGRATION_V21: &str = "
CREATE TABLE memory_vectors (
    user_key TEXT NOT NULL,
    memory_id INTEGER NOT NULL,
    thread_key TEXT,
    model TEXT NOT NULL,
    compact BLOB NOT NULL,
    PRIMARY KEY (user_key, memory_id)
) WITHOUT ROWID;
CREATE TRIGGER memory_vectors_delete AFTER DELETE ON memories BEGIN
    DELETE FROM memory_vectors WHERE user_key = old.user_key AND memory_id = old.id;
END;
";

/// A count of the changes to each user's rows in `memory_vectors`, kept by
/// triggers whatever writes them, so the vectors a search holds in memory
/// ([`super::vector_cache`]) are used only while they are current. (Not
/// `INSERT OR IGNORE`: inside an upsert's trigger the upsert's own conflict
/// policy applies, and the row's existing key would abort it.) Derived data:
/// `hearth store copy-to-postgres` leaves it out (PostgreSQL versions its
/// blocks of vectors instead).
pub(super) const MIGRATION_V25: &str = "
CREATE TABLE memory_vector_versions (
    user_key TEXT PRIMARY KEY,
    version INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO memory_vector_versions (user_key, version)
    SELECT DISTINCT user_key, 1 FROM memory_vectors;
CREATE TRIGGER memory_vectors_count_insert AFTER INSERT ON memory_vectors BEGIN
    INSERT INTO memory_vector_versions (user_key, version) SELECT new.user_key, 0
        WHERE NOT EXISTS (SELECT 1 FROM memory_vector_versions WHERE user_key = new.user_key);
    UPDATE memory_vector_versions SET version = version + 1 WHERE user_key = new.user_key;
END;
CREATE TRIGGER memory_vectors_count_update AFTER UPDATE ON memory_vectors BEGIN
    INSERT INTO memory_vector_versions (user_key, version) SELECT new.user_key, 0
        WHERE NOT EXISTS (SELECT 1 FROM memory_vector_versions WHERE user_key = new.user_key);
    UPDATE memory_vector_versions SET version = version + 1
        WHERE user_key IN (old.user_key, new.user_key);
END;
CREATE TRIGGER memory_vectors_count_delete AFTER DELETE ON memory_vectors BEGIN
    UPDATE memory_vector_versions SET version = version + 1 WHERE user_key = old.user_key;
END;
";

/// Writes the compact copy of every embedding stored before
/// [`MIGRATION_V21`], inside that migration's transaction.
pub(super) fn backfill_compact_vectors(tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
    let mut read = tx.prepare(
        "SELECT id, user_key, thread_key, embedding_model, embedding FROM memories \
         WHERE embedding IS NOT NULL AND embedding_model IS NOT NULL",
    )?;
    let mut write = tx.prepare(UPSERT_COMPACT)?;
    let mut rows = read.query([])?;
    while let Some(row) = rows.next()? {
        let id: i64 = row.get(0)?;
        let user_key: String = row.get(1)?;
        let thread_key: Option<String> = row.get(2)?;
        let model: String = row.get(3)?;
        let compact = vector_from_bytes(row.get_ref(4)?.as_blob()?)
            .map(|v| compact_vector(&v))
            .unwrap_or_default();
        write.execute(params![user_key, id, thread_key, model, compact])?;
    }
    Ok(())
}

/// Writes a memory's compact vector, replacing the one of an earlier model.
const UPSERT_COMPACT: &str = "INSERT INTO memory_vectors \
    (user_key, memory_id, thread_key, model, compact) VALUES (?1, ?2, ?3, ?4, ?5) \
    ON CONFLICT (user_key, memory_id) DO UPDATE SET model = excluded.model, compact = excluded.compact";

/// The `memories` columns in the order [`memory_row`] reads them.
macro_rules! memory_columns {
    ($t:literal) => {
        concat!(
            $t,
            ".id, ",
            $t,
            ".user_key, ",
            $t,
            ".thread_key, ",
            $t,
            ".text, ",
            $t,
            ".run_id, ",
            $t,
            ".created_at, ",
            $t,
            ".last_used_at"
        )
    };
}

fn memory_row(row: &rusqlite::Row<'_>) -> Result<MemoryRecord> {
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

/// Turns words of user text (from [`query_words`](crate::memory::query_words)) into an FTS5 query that
/// can only match words: each becomes one double-quoted term (FTS5 strings
/// cannot contain anything that escapes them, as words hold only letters and
/// digits), joined with OR so a memory sharing any word is found and BM25
/// ranks those sharing more first.
fn fts_query<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|w| format!("\"{}\"", w.as_ref()))
        .collect::<Vec<_>>()
        .join(" OR ")
}

fn changed(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

fn save(db: &mut Db<'_>, m: &NewMemory) -> Result<SavedMemory> {
    // The writer thread runs one write at a time, so this check and the
    // insert below cannot interleave with another save.
    let existing = db
        .stmt(concat!(
            "SELECT ",
            memory_columns!("m"),
            " FROM memories m WHERE m.user_key = ?1 AND ifnull(m.thread_key, '') = ifnull(?2, '') \
             AND m.text = ?3"
        ))?
        .query_row(params![m.user_key, m.thread_key, m.text], |row| {
            Ok(memory_row(row))
        })
        .optional()?
        .transpose()?;
    if let Some(mut memory) = existing {
        db.stmt("UPDATE memories SET last_used_at = max(last_used_at, ?2) WHERE id = ?1")?
            .execute(params![memory.id, m.at])?;
        memory.last_used_at = memory.last_used_at.max(m.at);
        return Ok(SavedMemory {
            memory,
            created: false,
        });
    }
    db.stmt(
        "INSERT INTO memories (user_key, thread_key, text, run_id, created_at, last_used_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
    )?
    .execute(params![m.user_key, m.thread_key, m.text, m.run_id, m.at])?;
    Ok(SavedMemory {
        memory: MemoryRecord {
            id: db.conn().last_insert_rowid(),
            user_key: m.user_key.clone(),
            thread_key: m.thread_key.clone(),
            text: m.text.clone(),
            run_id: m.run_id.clone(),
            created_at: m.at,
            last_used_at: m.at,
        },
        created: true,
    })
}

/// The memories of the scope (`?2` user, `?3` thread) the FTS5 query `?1`
/// finds. `CROSS JOIN` keeps the index outermost: SQLite may otherwise walk
/// the user's memories and ask the index about each one (seconds at 10^5).
macro_rules! scoped_match {
    () => {
        " FROM memories_fts CROSS JOIN memories m ON m.id = memories_fts.rowid \
         WHERE memories_fts MATCH ?1 AND m.user_key = ?2 \
         AND (m.thread_key IS NULL OR m.thread_key = ?3)"
    };
}

fn search(db: &mut Db<'_>, scope: &MemoryScope, query: &str, limit: u32) -> Result<Vec<MemoryHit>> {
    let words = distinct_query_words(query);
    let mut counts = Vec::with_capacity(words.len());
    {
        let stmt = db.stmt(concat!(
            "SELECT count(*) FROM (SELECT 1",
            scoped_match!(),
            " LIMIT ?4)"
        ))?;
        for word in &words {
            let found: i64 = stmt.query_row(
                params![
                    fts_query(&[word]),
                    scope.user_key,
                    scope.thread_key,
                    COMMON_WORD_MATCHES + 1
                ],
                |row| row.get(0),
            )?;
            counts.push(((*word).to_owned(), u64::try_from(found).unwrap_or(0)));
        }
    }
    // What is ranked: the memories these words find, from this id on.
    let (fts, from_id) = match TextCandidates::from_counts(counts) {
        TextCandidates::Nothing => return Ok(Vec::new()),
        // BM25 weighs a word by how rare it is, so ranking by the rare words
        // alone loses little: a common word's weight is near nothing.
        TextCandidates::Rare(rare) => (fts_query(&rare), i64::MIN),
        TextCandidates::Newest => {
            let all = fts_query(&words);
            let oldest: Option<i64> = db
                .stmt(concat!(
                    "SELECT min(id) FROM (SELECT memories_fts.rowid AS id",
                    scoped_match!(),
                    " ORDER BY memories_fts.rowid DESC LIMIT ?4)"
                ))?
                .query_row(
                    params![all, scope.user_key, scope.thread_key, COMMON_WORD_MATCHES],
                    |row| row.get(0),
                )?;
            match oldest {
                Some(id) => (all, id),
                None => return Ok(Vec::new()),
            }
        }
    };
    let stmt = db.stmt(concat!(
        "SELECT ",
        memory_columns!("m"),
        ", bm25(memories_fts) AS bm25_rank",
        scoped_match!(),
        " AND memories_fts.rowid >= ?5 ORDER BY bm25_rank, m.id DESC LIMIT ?4"
    ))?;
    let mut rows = stmt.query(params![
        fts,
        scope.user_key,
        scope.thread_key,
        search_limit(limit),
        from_id
    ])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let rank: f64 = col(row, 7)?;
        out.push(MemoryHit {
            memory: memory_row(row)?,
            // bm25() is lower-is-better; callers expect higher-is-better.
            score: -rank,
        });
    }
    Ok(out)
}

fn to_embed(db: &mut Db<'_>, model: &str, limit: u32) -> Result<Vec<MemoryRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        memory_columns!("m"),
        " FROM memories m WHERE m.embedding IS NULL OR m.embedding_model IS NOT ?1 \
         ORDER BY m.id LIMIT ?2"
    ))?;
    let mut rows = stmt.query(params![model, limit.min(MAX_TO_EMBED)])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(memory_row(row)?);
    }
    Ok(out)
}

/// The count of changes of `user_key`'s rows in `memory_vectors` (migration
/// 25; 0 before the first).
fn vector_version(db: &mut Db<'_>, user_key: &str) -> Result<i64> {
    Ok(db
        .stmt("SELECT version FROM memory_vector_versions WHERE user_key = ?1")?
        .query_row(params![user_key], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

fn nearest(
    db: &mut Db<'_>,
    cache: &VectorCache,
    scope: &MemoryScope,
    model: &str,
    query: &[f32],
    keep: usize,
) -> Result<Vec<NearMemory>> {
    let mut scan = Nearest::compact(query, keep);
    // Read first: the vectors read after it are at least this current.
    let version = vector_version(db, &scope.user_key)?;
    match cache.get(&scope.user_key, model, version) {
        Some(held) => held.each_in_scope(scope.thread_key.as_deref(), |id, bytes| {
            scan.offer(id, bytes);
        }),
        None => {
            // The compact copies only, a range of the primary key: no fact's
            // text and no f32 vector is read unless it is a candidate. Every
            // thread's, to hold the whole user; this search scores its own.
            let mut held = cache.builder(version);
            let stmt = db.stmt(
                "SELECT memory_id, thread_key, compact FROM memory_vectors \
                 WHERE user_key = ?1 AND model = ?2 ORDER BY memory_id",
            )?;
            let mut rows = stmt.query(params![scope.user_key, model])?;
            while let Some(row) = rows.next()? {
                let id: i64 = col(row, 0)?;
                let thread: Option<String> = col(row, 1)?;
                let thread = thread.as_deref();
                let Ok(bytes) = row.get_ref(2)?.as_blob() else {
                    continue;
                };
                if thread.is_none() || thread == scope.thread_key.as_deref() {
                    scan.offer(id, bytes);
                }
                if held.as_mut().is_some_and(|h| !h.push(id, thread, bytes)) {
                    held = None;
                }
            }
            if let Some(held) = held {
                cache.put(&scope.user_key, model, held.finish());
            }
        }
    }
    let mut best = Nearest::new(query, keep);
    let mut records = HashMap::new();
    let stmt = db.stmt(concat!(
        "SELECT ",
        memory_columns!("m"),
        ", m.embedding FROM memories m WHERE m.id = ?1 AND m.embedding_model = ?2"
    ))?;
    for (id, _) in scan.ranked() {
        let mut rows = stmt.query(params![id, model])?;
        if let Some(row) = rows.next()? {
            if let Ok(bytes) = row.get_ref(7)?.as_blob() {
                best.offer(id, bytes);
            }
            records.insert(id, memory_row(row)?);
        }
    }
    Ok(best
        .ranked()
        .into_iter()
        .filter_map(|(id, similarity)| {
            records
                .remove(&id)
                .map(|memory| NearMemory { memory, similarity })
        })
        .collect())
}

fn touch(db: &mut Db<'_>, user_key: &str, ids: &[i64], at: Timestamp) -> Result<u64> {
    let mut n = 0;
    for id in ids {
        n += changed(
            db.stmt(
                "UPDATE memories SET last_used_at = max(last_used_at, ?3) \
                 WHERE id = ?1 AND user_key = ?2",
            )?
            .execute(params![id, user_key, at])?,
        );
    }
    Ok(n)
}

fn list(db: &mut Db<'_>, scope: &MemoryScope, limit: u32) -> Result<Vec<MemoryRecord>> {
    let limit = list_limit(limit);
    let stmt = db.stmt(concat!(
        "SELECT ",
        memory_columns!("m"),
        " FROM memories m WHERE m.user_key = ?1 AND (m.thread_key IS NULL OR m.thread_key = ?2) \
         ORDER BY m.created_at DESC, m.id DESC LIMIT ?3"
    ))?;
    let mut rows = stmt.query(params![scope.user_key, scope.thread_key, limit])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(memory_row(row)?);
    }
    Ok(out)
}

fn export(db: &mut Db<'_>, user_key: &str) -> Result<Vec<MemoryRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        memory_columns!("m"),
        " FROM memories m WHERE m.user_key = ?1 ORDER BY m.created_at, m.id"
    ))?;
    let mut rows = stmt.query(params![user_key])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(memory_row(row)?);
    }
    Ok(out)
}

fn purge_memories(db: &mut Db<'_>, unused_since: Timestamp) -> Result<u64> {
    Ok(changed(
        db.stmt("DELETE FROM memories WHERE last_used_at < ?1")?
            .execute(params![unused_since])?,
    ))
}

fn purge(db: &mut Db<'_>, c: RetentionCutoffs) -> Result<PurgeReport> {
    let memories = purge_memories(db, c.memories_unused_since)?;
    let audit_events = changed(
        db.stmt("DELETE FROM audit WHERE at < ?1")?
            .execute(params![c.audit_before])?,
    );
    // A run that is still unfinished may yet look its confirmation up (after
    // a restart, say), so only confirmations of finished runs go.
    let confirmations = changed(
        db.stmt(
            "DELETE FROM confirmations WHERE expires_at < ?1 AND NOT EXISTS ( \
                 SELECT 1 FROM runs r WHERE r.run_id = confirmations.run_id \
                 AND r.status IN ('queued', 'running', 'awaiting_confirmation'))",
        )?
        .execute(params![c.confirmations_expired_before])?,
    );
    let channel_records = super::outbox::purge(db, c.channel_records_before)?;
    let reply_messages = super::reply_messages::purge(db, c.reply_messages_before)?;
    Ok(PurgeReport {
        memories,
        audit_events,
        confirmations,
        channel_records,
        reply_messages,
    })
}

#[async_trait::async_trait]
impl MemoryStore for SqliteStore {
    async fn save_memory(&self, memory: NewMemory) -> Result<SavedMemory> {
        self.write(move |db| save(db, &memory)).await
    }

    async fn search_memories(
        &self,
        scope: &MemoryScope,
        query: &str,
        limit: u32,
    ) -> Result<Vec<MemoryHit>> {
        let (scope, query) = (scope.clone(), query.to_owned());
        self.read(move |db| search(db, &scope, &query, limit)).await
    }

    async fn touch_memories(&self, user_key: &str, ids: &[i64], at: Timestamp) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let (user_key, ids) = (user_key.to_owned(), ids.to_vec());
        self.write(move |db| touch(db, &user_key, &ids, at)).await
    }

    async fn list_memories(&self, scope: &MemoryScope, limit: u32) -> Result<Vec<MemoryRecord>> {
        let scope = scope.clone();
        self.read(move |db| list(db, &scope, limit)).await
    }

    async fn forget_memory(&self, user_key: &str, id: i64) -> Result<bool> {
        let user = user_key.to_owned();
        let (forgot, before, after) = self
            .write(move |db| {
                let before = vector_version(db, &user)?;
                let n = db
                    .stmt("DELETE FROM memories WHERE id = ?1 AND user_key = ?2")?
                    .execute(params![id, user])?;
                Ok((n == 1, before, vector_version(db, &user)?))
            })
            .await?;
        // Committed: the held copies follow without reading the user again.
        self.inner
            .vectors
            .apply(user_key, before, after, &Change::Remove { id });
        Ok(forgot)
    }

    async fn export_user_memories(&self, user_key: &str) -> Result<Vec<MemoryRecord>> {
        let user_key = user_key.to_owned();
        self.read(move |db| export(db, &user_key)).await
    }

    async fn delete_user_memories(&self, user_key: &str, audit: AuditEvent) -> Result<u64> {
        let user_key = user_key.to_owned();
        self.write(move |db| {
            let deleted = changed(
                db.stmt("DELETE FROM memories WHERE user_key = ?1")?
                    .execute(params![user_key])?,
            );
            append_audit(db, &audit)?;
            Ok(deleted)
        })
        .await
    }

    async fn purge_memories(&self, unused_since: Timestamp) -> Result<u64> {
        self.write(move |db| purge_memories(db, unused_since)).await
    }

    async fn set_memory_embedding(&self, id: i64, model: &str, vector: &[f32]) -> Result<bool> {
        let (model, bytes) = (model.to_owned(), vector_to_bytes(vector));
        let compact = compact_vector(vector);
        let written = compact.clone();
        let stored = self
            .write(move |db| {
                let owner: Option<(String, Option<String>)> = db
                    .stmt(
                        "UPDATE memories SET embedding = ?2, embedding_model = ?3 WHERE id = ?1 \
                         RETURNING user_key, thread_key",
                    )?
                    .query_row(params![id, bytes, model], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let Some((user_key, thread_key)) = owner else {
                    return Ok(None);
                };
                let before = vector_version(db, &user_key)?;
                db.stmt(UPSERT_COMPACT)?
                    .execute(params![user_key, id, thread_key, model, written])?;
                let after = vector_version(db, &user_key)?;
                Ok(Some((user_key, thread_key, model, before, after)))
            })
            .await?;
        let Some((user_key, thread_key, model, before, after)) = stored else {
            return Ok(false);
        };
        // Committed: the held copies follow without reading the user again.
        self.inner.vectors.apply(
            &user_key,
            before,
            after,
            &Change::Upsert {
                id,
                thread: thread_key.as_deref(),
                model: &model,
                bytes: &compact,
            },
        );
        Ok(true)
    }

    async fn memories_to_embed(&self, model: &str, limit: u32) -> Result<Vec<MemoryRecord>> {
        let model = model.to_owned();
        self.read(move |db| to_embed(db, &model, limit)).await
    }

    async fn count_memories_to_embed(&self, model: &str) -> Result<u64> {
        let model = model.to_owned();
        self.read(move |db| {
            let n: i64 = db
                .stmt(
                    "SELECT count(*) FROM memories \
                     WHERE embedding IS NULL OR embedding_model IS NOT ?1",
                )?
                .query_row(params![model], |r| r.get(0))?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
        .await
    }

    async fn nearest_memories(
        &self,
        scope: &MemoryScope,
        model: &str,
        query: &[f32],
        keep: usize,
    ) -> Result<Vec<NearMemory>> {
        let (scope, model, query) = (scope.clone(), model.to_owned(), query.to_vec());
        let cache = Arc::clone(&self.inner.vectors);
        self.read(move |db| nearest(db, &cache, &scope, &model, &query, keep))
            .await
    }
}

#[async_trait::async_trait]
impl RetentionStore for SqliteStore {
    async fn purge_expired(&self, cutoffs: RetentionCutoffs) -> Result<PurgeReport> {
        self.write(move |db| purge(db, cutoffs)).await
    }
}

#[cfg(test)]
mod tests {
    use super::fts_query;
    use crate::conformance::fixtures::{new, scope};
    use crate::memory::{MemoryStore, query_words};
    use crate::sqlite::{Durability, SqliteStore};

    fn query(text: &str) -> String {
        fts_query(&query_words(text))
    }

    #[test]
    fn queries_keep_only_quoted_words() {
        assert_eq!(query("dog name"), "\"dog\" OR \"name\"");
        assert_eq!(
            query("NEAR(a b) \"x* OR-y"),
            "\"NEAR\" OR \"a\" OR \"b\" OR \"x\" OR \"OR\" OR \"y\""
        );
        assert_eq!(
            query("Café Zürich 東京"),
            "\"Café\" OR \"Zürich\" OR \"東京\""
        );
        assert!(query_words(" \"*^:() - ").is_empty());
        assert!(query_words("").is_empty());
        assert_eq!(query(&"w ".repeat(100)).matches('w').count(), 32);
    }

    async fn near(store: &SqliteStore, thread: Option<&str>, query: [f32; 2]) -> Vec<(i64, f64)> {
        store
            .nearest_memories(&scope("u", thread), "m", &query, 5)
            .await
            .unwrap()
            .into_iter()
            .map(|n| (n.memory.id, (n.similarity * 100.0).round() / 100.0))
            .collect()
    }

    #[tokio::test]
    async fn a_users_vectors_are_held_and_follow_this_stores_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
        let wide = store.save_memory(new("u", None, "wide", 1)).await.unwrap();
        let bound = store
            .save_memory(new("u", Some("t1"), "bound", 1))
            .await
            .unwrap();
        let (wide, bound) = (wide.memory.id, bound.memory.id);
        store
            .set_memory_embedding(wide, "m", &[1.0, 0.0])
            .await
            .unwrap();
        store
            .set_memory_embedding(bound, "m", &[0.6, 0.8])
            .await
            .unwrap();
        let fills = || store.inner.vectors.stats().2;

        assert_eq!(near(&store, None, [1.0, 0.0]).await, vec![(wide, 1.0)]);
        assert_eq!(fills(), 1);
        // The held copy serves another thread's search, scoped as it is.
        assert_eq!(
            near(&store, Some("t1"), [0.6, 0.8]).await,
            vec![(bound, 1.0), (wide, 0.6)]
        );
        assert_eq!(
            near(&store, Some("t2"), [0.6, 0.8]).await,
            vec![(wide, 0.6)]
        );
        assert_eq!(fills(), 1, "read from the database once");

        // A vector embedded again here is seen by the next search, which
        // reads nothing again: the held copy was updated with the write.
        store
            .set_memory_embedding(wide, "m", &[0.0, 1.0])
            .await
            .unwrap();
        assert_eq!(near(&store, None, [0.0, 1.0]).await, vec![(wide, 1.0)]);
        // So is a new fact of the user, and a forgotten one.
        let fresh = store
            .save_memory(new("u", Some("t1"), "fresh", 2))
            .await
            .unwrap()
            .memory
            .id;
        store
            .set_memory_embedding(fresh, "m", &[0.8, 0.6])
            .await
            .unwrap();
        assert_eq!(
            near(&store, Some("t1"), [0.6, 0.8]).await,
            vec![(bound, 1.0), (fresh, 0.96), (wide, 0.8)]
        );
        assert!(store.forget_memory("u", bound).await.unwrap());
        assert_eq!(
            near(&store, Some("t1"), [0.6, 0.8]).await,
            vec![(fresh, 0.96), (wide, 0.8)]
        );
        // Another user's change reads nothing again either.
        let other = store.save_memory(new("v", None, "other", 1)).await.unwrap();
        store
            .set_memory_embedding(other.memory.id, "m", &[1.0, 0.0])
            .await
            .unwrap();
        assert_eq!(
            near(&store, Some("t1"), [0.0, 1.0]).await,
            vec![(wide, 1.0), (fresh, 0.6)]
        );
        assert_eq!(fills(), 1, "every change came through this store");

        // A change this store did not write (another process on the same
        // file, as `hearth memory reembed` may be) is seen, by reading the
        // user again.
        let other_process =
            SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
        other_process
            .set_memory_embedding(fresh, "m", &[0.6, 0.8])
            .await
            .unwrap();
        assert_eq!(
            near(&store, Some("t1"), [0.0, 1.0]).await,
            vec![(wide, 1.0), (fresh, 0.8)]
        );
        assert_eq!(fills(), 2);

        // 0 holds nothing: every search reads.
        store.set_vector_cache_bytes(0);
        assert_eq!(near(&store, None, [0.0, 1.0]).await, vec![(wide, 1.0)]);
        assert_eq!(store.inner.vectors.stats().0, 0);
    }
}
