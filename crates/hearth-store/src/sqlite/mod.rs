//! The SQLite backend: one writer thread that commits queued writes in shared
//! transactions, and a couple of reader threads, all on one WAL database file.

mod checkpoint;
mod confirmations;
mod db;
mod memory;
mod migrations;
mod ops;
mod private_file;
mod reader;
mod rows;
mod writer;

#[cfg(test)]
mod queue_tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use hearth_core::{Message, Timestamp, now_ms};
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{mpsc as bounded, oneshot};

use self::db::Db;
use self::reader::ReadJob;
use self::writer::Job;
use crate::Store;
use crate::error::{Result, StoreError};
use crate::records::{
    AuditEvent, ConfirmationRecord, ConfirmationState, CreateRunOutcome, Grant, NewRun, NewSession,
    NewToken, RunFilter, RunFinish, RunRecord, SecretInfo, SteerRecord, StepRecord, ThreadState,
    TokenRecord, UsageQuery, UsageRow,
};

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
    // Field order matters: the senders drop first so the threads see their
    // queues close, then `Workers` joins them.
    writer: bounded::Sender<Box<dyn Job>>,
    /// `None` in memory, where the writer thread serves reads too.
    readers: Option<bounded::Sender<ReadJob>>,
    _checkpoint_stop: mpsc::Sender<()>,
    _workers: Workers,
}

/// Joins the worker threads on drop, so that when the last store handle is
/// gone the database file is closed (and its WAL checkpointed).
struct Workers(Vec<JoinHandle<()>>);

impl Drop for Workers {
    fn drop(&mut self) {
        for handle in self.0.drain(..) {
            // A worker that panicked has nothing left to clean up.
            let _ = handle.join();
        }
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
        let (reader_tx, reader_rx) = bounded::channel(reader::QUEUE);
        let reader_rx = Arc::new(Mutex::new(reader_rx));
        let writer_commits = Arc::clone(&commits);
        workers.0.push(spawn("hearth-store-writer", move || {
            writer::run(conn, writer_rx, writer_commits)
        })?);
        for (i, reader) in reader_conns.into_iter().enumerate() {
            let queue = Arc::clone(&reader_rx);
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
                writer: writer_tx,
                readers: None,
                _checkpoint_stop: checkpoint_tx,
                _workers: workers,
            }),
        })
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
        let (tx, rx) = oneshot::channel();
        self.inner
            .writer
            .send(writer::job(op, tx))
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
        readers.send(job).await.map_err(|_| StoreError::Closed)?;
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

#[async_trait::async_trait]
impl Store for SqliteStore {
    async fn ping(&self) -> Result<()> {
        self.read(ops::ping).await
    }

    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome> {
        self.write(move |db| ops::create_run(db, run)).await
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| ops::get_run(db, &run_id)).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        let filter = filter.clone();
        self.read(move |db| ops::list_runs(db, &filter)).await
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>> {
        self.read(ops::unfinished_runs).await
    }

    async fn start_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
    ) -> Result<bool> {
        let (run_id, owner, model) = (run_id.to_owned(), owner.to_owned(), model.to_owned());
        let now = now_ms();
        self.write(move |db| ops::start_run(db, &run_id, &owner, lease_until, &model, now))
            .await
    }

    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        self.write(move |db| ops::claim_run(db, &run_id, &owner, lease_until, now))
            .await
    }

    async fn set_run_model(&self, run_id: &str, model: &str) -> Result<()> {
        let (run_id, model) = (run_id.to_owned(), model.to_owned());
        self.write(move |db| ops::set_run_model(db, &run_id, &model))
            .await
    }

    async fn release_foreign_leases(&self, owner: &str) -> Result<u64> {
        let owner = owner.to_owned();
        self.write(move |db| ops::release_foreign_leases(db, &owner))
            .await
    }

    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_until: Timestamp,
    ) -> Result<u64> {
        let (owner, run_ids) = (owner.to_owned(), run_ids.to_vec());
        self.write(move |db| ops::renew_leases(db, &owner, &run_ids, lease_until))
            .await
    }

    async fn put_step(&self, step: StepRecord) -> Result<()> {
        self.write(move |db| ops::put_step(db, &step)).await
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| ops::steps(db, &run_id)).await
    }

    async fn add_steer(&self, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord> {
        let (run_id, text) = (run_id.to_owned(), text.to_owned());
        self.write(move |db| ops::add_steer(db, &run_id, &text, at))
            .await
    }

    async fn steers(&self, run_id: &str) -> Result<Vec<SteerRecord>> {
        let run_id = run_id.to_owned();
        self.read(move |db| ops::steers(db, &run_id)).await
    }

    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>> {
        let query = query.clone();
        self.read(move |db| ops::usage(db, &query)).await
    }

    async fn finish_run(&self, finish: RunFinish) -> Result<bool> {
        self.write(move |db| ops::finish_run(db, &finish)).await
    }

    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| ops::thread_history(db, &thread_key, limit))
            .await
    }

    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState> {
        let thread_key = thread_key.to_owned();
        self.read(move |db| ops::thread_state(db, &thread_key))
            .await
    }

    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()> {
        let (thread_key, model) = (thread_key.to_owned(), model.map(str::to_owned));
        let now = now_ms();
        self.write(move |db| ops::set_thread_model(db, &thread_key, model.as_deref(), now))
            .await
    }

    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()> {
        let (thread_key, level) = (thread_key.to_owned(), level.to_owned());
        let now = now_ms();
        self.write(move |db| ops::set_thread_thinking(db, &thread_key, &level, now))
            .await
    }

    async fn clear_thread_history(&self, thread_key: &str) -> Result<()> {
        let thread_key = thread_key.to_owned();
        self.write(move |db| ops::clear_thread_history(db, &thread_key))
            .await
    }

    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession> {
        let (thread_key, run) = (thread_key.to_owned(), cancelled_run.map(str::to_owned));
        self.write(move |db| ops::new_session(db, &thread_key, run.as_deref(), at))
            .await
    }

    async fn create_token(&self, token: NewToken) -> Result<()> {
        self.write(move |db| ops::create_token(db, &token)).await
    }

    async fn list_tokens(&self) -> Result<Vec<TokenRecord>> {
        self.read(ops::list_tokens).await
    }

    async fn revoke_token(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        let now = now_ms();
        self.write(move |db| ops::revoke_token(db, &id, now)).await
    }

    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool> {
        let hash_hex = hash_hex.to_owned();
        self.read(move |db| ops::token_hash_valid(db, &hash_hex))
            .await
    }

    async fn active_token_count(&self) -> Result<u64> {
        self.read(ops::active_token_count).await
    }

    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()> {
        let name = name.to_owned();
        self.write(move |db| ops::put_secret(db, &name, &sealed, at))
            .await
    }

    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let name = name.to_owned();
        self.read(move |db| ops::get_secret(db, &name)).await
    }

    async fn list_secrets(&self) -> Result<Vec<SecretInfo>> {
        self.read(ops::list_secrets).await
    }

    async fn delete_secret(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.write(move |db| ops::delete_secret(db, &name)).await
    }

    async fn add_grant(&self, grant: Grant) -> Result<bool> {
        self.write(move |db| ops::add_grant(db, &grant)).await
    }

    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool> {
        self.write(move |db| ops::add_grant_audited(db, &grant, &event))
            .await
    }

    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool> {
        let (subject, capability, scope) =
            (subject.to_owned(), capability.to_owned(), scope.to_owned());
        self.write(move |db| ops::remove_grant(db, &subject, &capability, &scope))
            .await
    }

    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool> {
        let (subject, capability, scope) =
            (subject.to_owned(), capability.to_owned(), scope.to_owned());
        self.write(move |db| ops::remove_grant_audited(db, &subject, &capability, &scope, &event))
            .await
    }

    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>> {
        let scope = scope.map(str::to_owned);
        self.read(move |db| ops::list_grants(db, scope.as_deref()))
            .await
    }

    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>> {
        let (subjects, scopes) = (subjects.to_vec(), scopes.to_vec());
        self.read(move |db| ops::grants_for(db, &subjects, &scopes))
            .await
    }

    async fn append_audit(&self, event: AuditEvent) -> Result<()> {
        self.write(move |db| ops::append_audit(db, &event)).await
    }

    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>> {
        self.read(move |db| ops::list_audit(db, limit)).await
    }

    async fn request_confirmation(&self, rec: ConfirmationRecord) -> Result<ConfirmationRecord> {
        self.write(move |db| confirmations::request(db, &rec)).await
    }

    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>> {
        let (run_id, call_id) = (run_id.to_owned(), call_id.to_owned());
        self.read(move |db| confirmations::for_call(db, &run_id, &call_id))
            .await
    }

    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>> {
        let token_hash = token_hash.to_owned();
        self.read(move |db| confirmations::by_hash(db, &token_hash))
            .await
    }

    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>> {
        let (run_id, thread_key) = (run_id.map(str::to_owned), thread_key.map(str::to_owned));
        self.read(move |db| confirmations::pending(db, run_id.as_deref(), thread_key.as_deref()))
            .await
    }

    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>> {
        let (token_hash, by) = (token_hash.to_owned(), by.to_owned());
        self.write(move |db| {
            confirmations::resolve(db, &token_hash, state, &by, at, audit.as_ref())
        })
        .await
    }

    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()> {
        let thread_key = thread_key.to_owned();
        let now = now_ms();
        self.write(move |db| ops::set_thread_incognito(db, &thread_key, enabled, now))
            .await
    }

    async fn incognito_threads(&self) -> Result<Vec<String>> {
        self.read(ops::incognito_threads).await
    }

    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()> {
        self.write(move |db| {
            for step in &steps {
                ops::record_anonymous_llm_call(db, step)?;
            }
            Ok(())
        })
        .await
    }
}
