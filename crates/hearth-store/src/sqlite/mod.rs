//! The SQLite backend: one writer thread that commits queued writes in shared
//! transactions, and a couple of reader threads, all on one WAL database file.

mod apps;
mod checkpoint;
mod confirmations;
mod db;
mod grants;
mod history;
mod jobs;
mod memory;
pub(crate) mod migrations;
mod outbox;
mod pairings;
mod private_file;
mod reader;
mod reply_messages;
mod router;
mod rows;
mod runs;
mod search;
mod secrets;
mod threads;
mod tokens;
mod usage;
mod vector_cache;
mod writer;

#[cfg(test)]
mod context_cache_tests;
#[cfg(test)]
mod worker_tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc as bounded, oneshot};

use self::db::Db;
use self::reader::ReadJob;
use self::writer::Job;
use crate::Store;
use crate::error::{Result, StoreError};

/// Reader connections; reads are short, so two keep up with the writer.
const READERS: usize = 2;
/// Page cache per connection in KiB: small, to keep an idle server small.
const WRITER_CACHE_KIB: i64 = 1024;
const READER_CACHE_KIB: i64 = 512;
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// How hard a commit tries to reach the disk before the write call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// WAL with `synchronous=NORMAL`: a commit survives a killed process; a
    /// power loss may drop the last commits but never corrupts the database.
    #[default]
    Normal,
    /// WAL with `synchronous=FULL`: each commit is fsynced before the write
    /// call returns (concurrent writes share the fsync).
    Strict,
}

impl Durability {
    fn synchronous(self) -> &'static str {
        match self {
            Self::Normal => "NORMAL",
            Self::Strict => "FULL",
        }
    }
}

/// The SQLite `Store`. Cheap to clone (the state is shared); the worker
/// threads stop, and the database is closed, when the last clone is dropped.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    commits: Arc<AtomicU64>,
    /// Decoded thread contexts, so a thread that keeps talking decodes
    /// only its new messages.
    contexts: Arc<crate::context_cache::ContextCache>,
    /// Users' compact vectors held between searches by meaning.
    vectors: Arc<vector_cache::VectorCache>,
    // Field order matters: the senders drop first so the threads see their
    // queues close, then `Workers` joins them.
    writer: bounded::Sender<Box<dyn Job>>,
    /// `None` in memory, where the writer thread serves reads too.
    readers: Option<reader::ReadSender>,
    _checkpoint_stop: mpsc::Sender<()>,
    _workers: Workers,
}

/// Joins the worker threads on drop, so that when the last store handle is
/// gone the database file is closed (and its WAL checkpointed).
struct Workers(Vec<JoinHandle<()>>);

impl Drop for Workers {
    fn drop(&mut self) {
        let handles = std::mem::take(&mut self.0);
        // The last handle is often dropped by a task on the async executor;
        // joining there would stall every task on that thread until the
        // writer finished its batch and SQLite closed the file. A thread of
        // the blocking pool waits instead (the runtime waits for it at
        // shutdown). Outside a runtime, joining here is fine.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || join_all(handles))),
            Err(_) => join_all(handles),
        }
    }
}

fn join_all(handles: Vec<JoinHandle<()>>) {
    for handle in handles {
        // A worker that panicked has nothing left to clean up.
        let _ = handle.join();
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path`, migrates it, and
    /// starts the writer and reader threads. Synchronous and fast: it is called
    /// at start-up, also outside any async runtime.
    pub fn open(path: &Path, durability: Durability) -> Result<SqliteStore> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        private_file::create(path)?;
        let mut conn = Connection::open(path).map_err(open_err)?;
        configure_writer(&conn, durability).map_err(open_err)?;
        migrations::migrate(&mut conn)?;

        let checkpoint_conn = Connection::open(path).map_err(open_err)?;
        checkpoint_conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(open_err)?;
        let mut reader_conns = Vec::with_capacity(READERS);
        for _ in 0..READERS {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let reader = Connection::open_with_flags(path, flags).map_err(open_err)?;
            configure_reader(&reader).map_err(open_err)?;
            reader_conns.push(reader);
        }

        // Declared before the channels so that, if a spawn fails, the senders
        // (dropped first, in reverse order) let the started threads exit
        // before `workers` joins them.
        let mut workers = Workers(Vec::with_capacity(READERS + 2));
        let commits = Arc::new(AtomicU64::new(0));
        let (writer_tx, writer_rx) = bounded::channel(writer::QUEUE);
        let (reader_tx, reader_rx) = reader::queue(reader::QUEUE);
        let writer_commits = Arc::clone(&commits);
        workers.0.push(spawn("hearth-store-writer", move || {
            writer::run(conn, writer_rx, writer_commits)
        })?);
        for (i, reader) in reader_conns.into_iter().enumerate() {
            let queue = reader_rx.clone();
            workers
                .0
                .push(spawn(&format!("hearth-store-reader-{i}"), move || {
                    reader::run(reader, queue)
                })?);
        }
        let (checkpoint_tx, checkpoint_rx) = mpsc::channel();
        let checkpoint_commits = Arc::clone(&commits);
        workers.0.push(spawn("hearth-store-checkpoint", move || {
            checkpoint::run(checkpoint_conn, checkpoint_rx, checkpoint_commits)
        })?);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                commits,
                contexts: Arc::default(),
                vectors: Arc::default(),
                writer: writer_tx,
                readers: Some(reader_tx),
                _checkpoint_stop: checkpoint_tx,
                _workers: workers,
            }),
        })
    }

    /// A database that lives only in memory and is gone when the last handle
    /// drops: for incognito threads, whose runs must never touch the disk.
    /// One thread serves its writes and reads.
    pub fn open_in_memory() -> Result<SqliteStore> {
        let open_err = |source| StoreError::Open {
            path: ":memory:".into(),
            source,
        };
        let mut conn = Connection::open_in_memory().map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)
            .map_err(open_err)?;
        migrations::migrate(&mut conn)?;
        let mut workers = Workers(Vec::with_capacity(1));
        let commits = Arc::new(AtomicU64::new(0));
        let (writer_tx, writer_rx) = bounded::channel(writer::QUEUE);
        // Never read from: there is no checkpoint thread in memory.
        let (checkpoint_tx, _) = mpsc::channel();
        let writer_commits = Arc::clone(&commits);
        workers.0.push(spawn("hearth-store-memory", move || {
            writer::run(conn, writer_rx, writer_commits)
        })?);
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path: PathBuf::from(":memory:"),
                commits,
                contexts: Arc::default(),
                vectors: Arc::default(),
                writer: writer_tx,
                readers: None,
                _checkpoint_stop: checkpoint_tx,
                _workers: workers,
            }),
        })
    }

    /// Bounds the memory used to keep users' compact vectors between
    /// searches by meaning (`[memory] vector_cache_mb`; 0 holds none).
    pub fn set_vector_cache_bytes(&self, bytes: usize) {
        self.inner.vectors.set_limit(bytes);
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Write transactions committed since the store was opened; with many
    /// concurrent writers this grows slower than the number of writes.
    pub fn committed_batches(&self) -> u64 {
        self.inner.commits.load(Ordering::Relaxed)
    }

    /// Runs `op` on the writer thread inside the next batch transaction and
    /// returns once that transaction is committed.
    async fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db<'_>) -> Result<T> + Send + 'static,
    {
        self.submit(true, op).await
    }

    /// Like `write`, for a write whose loss in a power cut is harmless:
    /// in strict durability it does not wait for an fsync of its own.
    async fn write_lazy<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db<'_>) -> Result<T> + Send + 'static,
    {
        self.submit(false, op).await
    }

    async fn submit<T, F>(&self, durable: bool, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db<'_>) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.inner
            .writer
            .send(writer::job(durable, op, tx))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs `op` on a reader thread.
    async fn read<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Db<'_>) -> Result<T> + Send + 'static,
    {
        let Some(readers) = &self.inner.readers else {
            return self.write(op).await;
        };
        let (tx, rx) = oneshot::channel();
        let job: ReadJob = Box::new(move |db| {
            let _ = tx.send(op(db));
        });
        readers.send(job).await?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(body)
        .map_err(StoreError::Spawn)
}

fn configure_writer(conn: &Connection, durability: Durability) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            mode,
            "database does not support WAL; concurrent reads will wait on writes"
        );
    }
    conn.pragma_update(None, "synchronous", durability.synchronous())?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "cache_size", -WRITER_CACHE_KIB)?;
    // Checkpoints run on their own thread (see `checkpoint`), not in commits.
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    // Deleted rows (an erased user's memories, a cleared history) are
    // overwritten rather than left readable in free pages; FAST does it
    // where it costs no extra I/O.
    conn.pragma_update(None, "secure_delete", "FAST")?;
    Ok(())
}

fn configure_reader(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    conn.pragma_update(None, "cache_size", -READER_CACHE_KIB)?;
    // Readers never write; this turns a bug that tries into an error.
    conn.pragma_update(None, "query_only", "ON")?;
    Ok(())
}

/// The schema version must be the one this build writes.
fn ping(db: &mut Db<'_>) -> Result<()> {
    let found = migrations::user_version(db.conn())?;
    if found == migrations::LATEST {
        return Ok(());
    }
    if found > migrations::LATEST {
        return Err(StoreError::TooNew {
            found,
            supported: migrations::LATEST,
        });
    }
    Err(StoreError::Corrupt(format!(
        "schema version {found}, expected {}",
        migrations::LATEST
    )))
}

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        self.read(ping).await
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }
}
