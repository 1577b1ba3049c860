//! `hearth store copy-to-postgres`: copies a home's SQLite database into an
//! empty PostgreSQL database, then compares the two table by table.
//!
//! The copy reads both catalogs and copies every table SQLite has into the
//! PostgreSQL table of the same name, column by column of the same name, in
//! one pass per table (rows streamed from a SQLite reader thread in batches
//! into a binary `COPY`), all in one transaction: a copy that fails leaves
//! the target as empty as it found it. Tables whose foreign keys reference
//! others are written after them. Identity columns keep their ids, and each
//! sequence is then set past the highest id (or past SQLite's
//! `sqlite_sequence`, which remembers ids of deleted rows), so no id is
//! handed out twice.
//!
//! How the schemas map (SQLite at version 24, `migrations/postgres/0001` to `0015`):
//!
//! | SQLite                                   | PostgreSQL                             |
//! |------------------------------------------|----------------------------------------|
//! | `INTEGER` (ids, times, counters)         | `BIGINT` (same values)                 |
//! | `INTEGER PRIMARY KEY AUTOINCREMENT` ids  | `BIGINT GENERATED ALWAYS AS IDENTITY`: ids kept, sequence set past them |
//! | `threads.incognito`, `jobs.enabled` 0/1  | `BOOLEAN`                              |
//! | `secrets.sealed`, `memories.embedding` BLOB | `BYTEA`                             |
//! | JSON in `TEXT`                           | JSON in `TEXT` (byte for byte)         |
//! | `api_tokens` rowid (order of creation)   | `api_tokens.seq` identity              |
//! | `memories_fts` (FTS5) and its shadow tables | not copied: `memories.tsv` is generated from the text |
//! | `memory_vector_versions`                 | not copied: `memory_blocks.version` counts PostgreSQL's changes |
//! | `sqlite_sequence`, `PRAGMA user_version` | not copied: `hearth_schema_migrations` is PostgreSQL's own |
//! | (none)                                   | `replicas`, `leases`: left empty, replicas fill them |
//! | `memory_vectors`                         | `memory_vectors`, and `memory_blocks` packed from it after the copy |
//! | `usage_daily`                            | `usage_daily`, every row in `stripe` 0 |
//! | a NUL (U+0000) in `TEXT`                 | U+FFFD, as the PostgreSQL store writes it (its `text` cannot hold U+0000); the comparison reads SQLite's value the same way |
//!
//! A SQLite table or column PostgreSQL lacks stops the copy before it
//! starts (its data would be lost); a PostgreSQL column SQLite lacks keeps
//! its default.
//!
//! The comparison reads every copied table back from both databases in
//! primary-key order (byte order for text on both sides) and hashes a
//! canonical form of each row in Rust ([`cells`]): integers and booleans as
//! 64-bit integers, text and JSON as their UTF-8 bytes, blobs as bytes, each
//! tagged and length-prefixed. Equal counts and checksums mean equal rows.

mod cells;
mod schema;

use std::path::Path;

use tokio::sync::mpsc;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::types::ToSql;

pub use cells::TableDigest;
use cells::{Cell, Digester};
use schema::{Plan, SqliteSchema, TablePlan, quote};

use super::PostgresStore;
use crate::error::StoreError;

/// Rows per batch from the SQLite reader (and between progress reports).
const BATCH: usize = 1000;

/// Why a copy or a comparison failed.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// There is no SQLite database to copy.
    #[error(
        "there is no SQLite database at {path}: give the home that holds it with --home or HEARTH_HOME"
    )]
    NoSource {
        /// Where it was looked for.
        path: String,
    },
    /// The target already holds data.
    #[error(
        "the PostgreSQL database {target} is not empty: table {table} has {rows} rows; copy into \
         a new, empty database (createdb), or drop this one's tables if what they hold may go"
    )]
    NotEmpty {
        /// `host:port/database`.
        target: String,
        /// The first table found with rows.
        table: String,
        /// How many.
        rows: i64,
    },
    /// SQLite has a table PostgreSQL does not.
    #[error(
        "SQLite table {table} has no PostgreSQL table to go to; nothing was copied (is this \
         hearth older than the one that wrote the SQLite database?)"
    )]
    Unmapped {
        /// The table.
        table: String,
    },
    /// SQLite has a column PostgreSQL does not.
    #[error("SQLite column {table}.{column} has no PostgreSQL column to go to; nothing was copied")]
    UnmappedColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// A value could not be carried over.
    #[error("cannot copy {table}.{column}: {reason}; nothing was copied")]
    Value {
        /// The table.
        table: String,
        /// The column.
        column: String,
        /// Why.
        reason: String,
    },
    /// Reading SQLite failed.
    #[error("reading the SQLite database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Opening or migrating a database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A PostgreSQL statement failed.
    #[error("PostgreSQL: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// The SQLite reader thread ended without an answer.
    #[error("the SQLite reader stopped: {0}")]
    Reader(String),
}

/// What a copy is doing, for a progress display.
#[derive(Debug, Clone, Copy)]
pub enum CopyEvent<'a> {
    /// A table's copy starts; it has `rows` rows.
    Started {
        /// The table.
        table: &'a str,
        /// Its rows.
        rows: u64,
    },
    /// `done` of the table's `rows` are written.
    Progress {
        /// The table.
        table: &'a str,
        /// Written so far.
        done: u64,
        /// In all.
        rows: u64,
    },
    /// The table is written: `rows` rows.
    Finished {
        /// The table.
        table: &'a str,
        /// Written.
        rows: u64,
    },
}

/// What a copy wrote.
#[derive(Debug, Clone)]
pub struct CopyReport {
    /// Each copied table and its rows, in the order written.
    pub tables: Vec<(String, u64)>,
    /// PostgreSQL tables SQLite has no counterpart of, left empty.
    pub postgres_only: Vec<String>,
}

/// One table compared.
#[derive(Debug, Clone)]
pub struct TableCheck {
    /// The table.
    pub table: String,
    /// Read from SQLite.
    pub sqlite: TableDigest,
    /// Read back from PostgreSQL.
    pub postgres: TableDigest,
}

impl TableCheck {
    /// Same row count and checksum.
    pub fn matches(&self) -> bool {
        self.sqlite == self.postgres
    }
}

/// Copies the SQLite database at `sqlite` into `target`, which must hold no
/// rows (its migrations are applied: [`PostgresStore::connect`] did). The
/// SQLite database is migrated first if it is older than this build.
/// Nothing else may write either database meanwhile (the caller holds the
/// home lock).
pub async fn copy_from_sqlite(
    sqlite: &Path,
    target: &PostgresStore,
    progress: &mut (dyn FnMut(CopyEvent<'_>) + Send),
) -> Result<CopyReport, CopyError> {
    let source = sqlite_schema(sqlite).await?;
    let mut client = target.client().await?;
    let tx = client.transaction().await?;
    let plan = schema::plan(&tx, &source).await?;
    refuse_rows(&tx, &plan, target.target()).await?;
    let mut report = CopyReport {
        tables: Vec::with_capacity(plan.tables.len()),
        postgres_only: plan.postgres_only.clone(),
    };
    for table in &plan.tables {
        let rows = copy_table(&tx, sqlite, table, progress).await?;
        report.tables.push((table.name.clone(), rows));
    }
    for table in &plan.tables {
        set_sequences(&tx, table, source.sequences.get(&table.name).copied()).await?;
    }
    // The blocks a search by meaning reads are derived from the copied
    // compact vectors (SQLite has no blocks).
    super::memory_blocks::fill_blocks(&tx).await?;
    tx.commit().await?;
    Ok(report)
}

/// Reads every table the copy carries from both databases and compares
/// their row counts and checksums.
pub async fn compare_with_sqlite(
    sqlite: &Path,
    target: &PostgresStore,
) -> Result<Vec<TableCheck>, CopyError> {
    let source = sqlite_schema(sqlite).await?;
    let mut client = target.client().await?;
    let plan = schema::plan(&client, &source).await?;
    let mut checks = Vec::with_capacity(plan.tables.len());
    for table in plan.tables {
        let path = sqlite.to_path_buf();
        let read = table.clone();
        let sqlite_side = tokio::task::spawn_blocking(move || sqlite_digest(&path, &read));
        let postgres = postgres_digest(&mut client, &table).await?;
        let sqlite = sqlite_side
            .await
            .map_err(|e| CopyError::Reader(e.to_string()))??;
        checks.push(TableCheck {
            table: table.name,
            sqlite,
            postgres,
        });
    }
    Ok(checks)
}

/// Opens the SQLite database (migrating it to this build's schema) and
/// reads its tables.
async fn sqlite_schema(path: &Path) -> Result<SqliteSchema, CopyError> {
    if !path.is_file() {
        return Err(CopyError::NoSource {
            path: path.display().to_string(),
        });
    }
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut conn = open_sqlite(&path)?;
        crate::sqlite::migrations::migrate(&mut conn)?;
        SqliteSchema::read(&conn)
    })
    .await
    .map_err(|e| CopyError::Reader(e.to_string()))?
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, CopyError> {
    let conn = rusqlite::Connection::open(path).map_err(|source| StoreError::Open {
        path: path.display().to_string(),
        source,
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

/// Refuses a target where any table holds a row.
async fn refuse_rows(
    client: &impl deadpool_postgres::GenericClient,
    plan: &Plan,
    target: &str,
) -> Result<(), CopyError> {
    for table in &plan.must_be_empty {
        let row = client
            .query_one(
                &format!(
                    "SELECT count(*) FROM (SELECT 1 FROM {} LIMIT 1000000) AS t",
                    quote(table)
                ),
                &[],
            )
            .await?;
        let rows: i64 = row.get(0);
        if rows > 0 {
            return Err(CopyError::NotEmpty {
                target: target.to_owned(),
                table: table.clone(),
                rows,
            });
        }
    }
    Ok(())
}

/// Copies one table: a reader thread streams its rows in batches into a
/// binary COPY. Returns the rows written.
async fn copy_table(
    tx: &tokio_postgres::Transaction<'_>,
    sqlite: &Path,
    table: &TablePlan,
    progress: &mut (dyn FnMut(CopyEvent<'_>) + Send),
) -> Result<u64, CopyError> {
    let (send, mut batches) = mpsc::channel::<Result<Batch, CopyError>>(2);
    let reader = {
        let path = sqlite.to_path_buf();
        let table = table.clone();
        tokio::task::spawn_blocking(move || read_table(&path, &table, &send))
    };
    let total = match batches.recv().await {
        Some(Ok(Batch::Count(n))) => n,
        Some(Err(e)) => return Err(e),
        Some(Ok(Batch::Rows(_))) | None => {
            return Err(reader_gone(reader).await);
        }
    };
    progress(CopyEvent::Started {
        table: &table.name,
        rows: total,
    });
    let types: Vec<_> = table
        .columns
        .iter()
        .map(|c| c.kind.pg_type(&c.udt))
        .collect();
    let sink = tx.copy_in(&table.copy_in()).await?;
    let mut writer = Box::pin(BinaryCopyInWriter::new(sink, &types));
    let mut done = 0u64;
    while let Some(batch) = batches.recv().await {
        let rows = match batch? {
            Batch::Rows(rows) => rows,
            Batch::Count(_) => continue,
        };
        for row in rows {
            let params = to_params(table, row)?;
            let refs: Vec<&(dyn ToSql + Sync)> =
                params.iter().map(|p| &**p as &(dyn ToSql + Sync)).collect();
            writer.as_mut().write(&refs).await?;
            done += 1;
        }
        progress(CopyEvent::Progress {
            table: &table.name,
            done,
            rows: total,
        });
    }
    reader.await.map_err(|e| CopyError::Reader(e.to_string()))?;
    let written = writer.as_mut().finish().await?;
    progress(CopyEvent::Finished {
        table: &table.name,
        rows: written,
    });
    Ok(written)
}

/// What the reader thread sends: the table's row count first, then rows.
enum Batch {
    Count(u64),
    Rows(Vec<Vec<Cell>>),
}

/// Reads `table` from SQLite into `send`, a batch at a time; stops early
/// when the receiver is gone.
fn read_table(path: &Path, table: &TablePlan, send: &mpsc::Sender<Result<Batch, CopyError>>) {
    let result = (|| {
        let conn = open_sqlite(path)?;
        let count: i64 = conn.query_row(
            &format!("SELECT count(*) FROM {}", quote(&table.name)),
            [],
            |r| r.get(0),
        )?;
        if send
            .blocking_send(Ok(Batch::Count(u64::try_from(count).unwrap_or(0))))
            .is_err()
        {
            return Ok(());
        }
        let mut stmt = conn.prepare(&table.sqlite_select())?;
        let mut rows = stmt.query([])?;
        let mut batch = Vec::with_capacity(BATCH);
        while let Some(row) = rows.next()? {
            batch.push(sqlite_row(table, row)?);
            if batch.len() == BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                if send.blocking_send(Ok(Batch::Rows(full))).is_err() {
                    return Ok(());
                }
            }
        }
        if !batch.is_empty() {
            let _ = send.blocking_send(Ok(Batch::Rows(batch)));
        }
        Ok(())
    })();
    if let Err(e) = result {
        let _ = send.blocking_send(Err(e));
    }
}

fn sqlite_row(table: &TablePlan, row: &rusqlite::Row<'_>) -> Result<Vec<Cell>, CopyError> {
    table
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            Cell::from_sqlite(row.get_ref(i)?, c.kind).map_err(|reason| CopyError::Value {
                table: table.name.clone(),
                column: c.name.clone(),
                reason,
            })
        })
        .collect()
}

fn to_params(
    table: &TablePlan,
    row: Vec<Cell>,
) -> Result<Vec<Box<dyn ToSql + Sync + Send>>, CopyError> {
    row.into_iter()
        .zip(&table.columns)
        .map(|(cell, c)| {
            cell.into_param(c.kind).map_err(|reason| CopyError::Value {
                table: table.name.clone(),
                column: c.name.clone(),
                reason,
            })
        })
        .collect()
}

async fn reader_gone(reader: tokio::task::JoinHandle<()>) -> CopyError {
    match reader.await {
        Ok(()) => CopyError::Reader("it ended before sending any row".into()),
        Err(e) => CopyError::Reader(e.to_string()),
    }
}

/// Sets each identity column's sequence past the highest id copied (or
/// SQLite's AUTOINCREMENT high-water mark, `sqlite_seq`, when higher).
async fn set_sequences(
    tx: &tokio_postgres::Transaction<'_>,
    table: &TablePlan,
    sqlite_seq: Option<i64>,
) -> Result<(), CopyError> {
    for c in table.columns.iter().filter(|c| c.identity) {
        let row = tx
            .query_one(
                &format!(
                    "SELECT coalesce(max({}), 0)::bigint FROM {}",
                    quote(&c.name),
                    quote(&table.name)
                ),
                &[],
            )
            .await?;
        let max: i64 = row.get(0);
        // sqlite_sequence belongs to the INTEGER PRIMARY KEY column, which
        // is the one that reads as itself (not `rowid`).
        let high = if c.sqlite_expr == quote(&c.name) {
            max.max(sqlite_seq.unwrap_or(0))
        } else {
            max
        };
        tx.execute(
            "SELECT setval(pg_get_serial_sequence($1, $2), $3, $4)",
            &[&quote(&table.name), &c.name, &high.max(1), &(high >= 1)],
        )
        .await?;
    }
    Ok(())
}

/// The digest of `table` as SQLite holds it.
fn sqlite_digest(path: &Path, table: &TablePlan) -> Result<TableDigest, CopyError> {
    let conn = open_sqlite(path)?;
    let mut stmt = conn.prepare(&table.sqlite_select())?;
    let mut rows = stmt.query([])?;
    let mut digest = Digester::new();
    while let Some(row) = rows.next()? {
        digest.row(&sqlite_row(table, row)?);
    }
    Ok(digest.finish())
}

/// The digest of `table` as PostgreSQL holds it, read through a cursor so a
/// large table is never in memory at once.
async fn postgres_digest(
    client: &mut deadpool_postgres::Object,
    table: &TablePlan,
) -> Result<TableDigest, CopyError> {
    let tx = client.transaction().await?;
    let portal = tx.bind(&table.postgres_select(), &[]).await?;
    let mut digest = Digester::new();
    loop {
        let rows = tx
            .query_portal(&portal, i32::try_from(BATCH).unwrap_or(1000))
            .await?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let cells = table
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| Cell::from_postgres(row, i, c.kind))
                .collect::<Result<Vec<_>, _>>()?;
            digest.row(&cells);
        }
    }
    tx.commit().await?;
    Ok(digest.finish())
}
