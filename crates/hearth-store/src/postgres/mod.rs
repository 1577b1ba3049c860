//! The PostgreSQL backend: the same `Store` as SQLite, for several hearth
//! replicas sharing one database (issue 19).
//!
//! Connections come from a small pool (`[store] pool_size`); every write that
//! must be atomic is one transaction on one pooled connection. Each aggregate
//! keeps its SQL in its own module, as on SQLite; `shared` holds the writes
//! several aggregates make inside their own transactions (an audit event, an
//! outbox item, a history message, a model call). The schema lives in
//! `migrations/postgres`, applied at start-up under an advisory lock so that
//! replicas starting together migrate once.
//!
//! Types at the boundary are those of SQLite: ids TEXT, times BIGINT unix-ms,
//! JSON TEXT, sealed secrets and embeddings BYTEA, counters BIGINT (`i64` on
//! the Rust side; `u32`/`u64` arguments are widened with [`wide`]).

mod access_cache;
mod apps;
mod batch_queue;
mod budget;
mod claims;
mod cluster;
mod confirmations;
#[cfg(test)]
mod context_cache_tests;
pub mod copy;
mod copy_pairs;
mod finish;
mod grants;
mod history;
mod jobs;
mod listen;
mod memory;
mod memory_blocks;
mod migrations;
mod near;
mod outbox;
mod pairings;
mod retention;
mod router;
mod rows;
mod run_insert;
mod runs;
mod search;
mod secrets;
pub(crate) mod shared;
mod threads;
mod tls;
mod tokens;
mod usage;
mod vector_cache;

#[cfg(feature = "conformance")]
pub mod testing;

use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};

use crate::Store;
use crate::error::{Result, StoreError};

pub use vector_cache::DEFAULT_VECTOR_CACHE_BYTES;

/// The PostgreSQL `Store`. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// `host:port/database`, for messages (never the password).
    target: String,
    /// For the listening connection, which is not pooled.
    config: tokio_postgres::Config,
    /// Its TLS, as the pool's.
    tls: tokio_postgres_rustls::MakeRustlsConnect,
    /// Blocks of compact vectors held for searches by meaning.
    vectors: vector_cache::VectorCache,
    /// Run ends written together (`batch_queue`).
    ends: batch_queue::Queue<batch_queue::Ends>,
    /// Messages stored together (`batch_queue`).
    runs: batch_queue::Queue<batch_queue::Runs>,
    /// Threads' settings read together (`batch_queue`).
    settings: batch_queue::Queue<batch_queue::Settings>,
    /// Tokens and grants held while a listener hears their changes.
    access: Arc<access_cache::AccessCache>,
    /// Decoded contexts of the threads that talk most (`history.rs`).
    contexts: crate::context_cache::ContextCache,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("target", &self.inner.target)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to the database at `url` (a libpq-style URL, read from the
    /// environment variable `var`, which messages name instead of the URL),
    /// with at most `pool_size` connections, and migrates it.
    pub async fn connect(url: &str, var: &str, pool_size: usize) -> Result<PostgresStore> {
        let store = Self::connect_unmigrated(url, var, pool_size).await?;
        let mut client = store.client().await?;
        migrations::migrate(&mut client).await?;
        Ok(store)
    }

    /// Connects as [`connect`](Self::connect) does, without applying any
    /// migration: for checks that must see the schema as they find it
    /// (`hearth doctor`). The first connection is made now.
    pub async fn connect_unmigrated(
        url: &str,
        var: &str,
        pool_size: usize,
    ) -> Result<PostgresStore> {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| StoreError::BadUrl {
            var: var.to_owned(),
            reason: url_error(&e),
        })?;
        let target = describe(&config);
        let tls = tls::connector(&mut config, &target)?;
        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            // The connection used last is handed out first, so that a replica
            // that needs two keeps the same two server processes busy instead
            // of waking each of the pool's in turn: on a 2-core machine the
            // server spent a tenth to a quarter less CPU per run at 16 in
            // flight (BENCHMARKS.md, "the connection used last first").
            .queue_mode(deadpool_postgres::QueueMode::Lifo)
            .build()
            .map_err(|e| StoreError::Connect {
                target: target.clone(),
                reason: e.to_string(),
            })?;
        let store = PostgresStore {
            inner: Arc::new(Inner {
                ends: batch_queue::Queue::new(pool.clone(), target.clone()),
                runs: batch_queue::Queue::new(pool.clone(), target.clone()),
                settings: batch_queue::Queue::new(pool.clone(), target.clone()),
                pool,
                target,
                config,
                tls,
                vectors: vector_cache::VectorCache::new(DEFAULT_VECTOR_CACHE_BYTES),
                access: Arc::default(),
                contexts: crate::context_cache::ContextCache::default(),
            }),
        };
        drop(store.client().await?);
        Ok(store)
    }

    /// The schema version the database holds (0: none yet) and the one this
    /// build writes.
    pub async fn schema_version(&self) -> Result<(u32, u32)> {
        let client = self.client().await?;
        let exists: bool = client
            .query_one(
                "SELECT to_regclass('hearth_schema_migrations') IS NOT NULL",
                &[],
            )
            .await?
            .get(0);
        let found = if exists {
            migrations::current_version(&client).await?
        } else {
            0
        };
        Ok((found, migrations::LATEST))
    }

    /// Bounds the memory this replica uses to hold users' compact vectors
    /// between searches by meaning (`[memory] vector_cache_mb`; 0 holds
    /// none, and every search reads them from the database). Lowering it
    /// drops what no longer fits at once.
    pub fn set_vector_cache_bytes(&self, bytes: usize) {
        self.inner.vectors.set_capacity(bytes);
    }

    fn vector_cache(&self) -> &vector_cache::VectorCache {
        &self.inner.vectors
    }

    /// `host:port/database` of the server (no user, no password).
    pub fn target(&self) -> &str {
        &self.inner.target
    }

    /// Starts the connection that listens for other replicas' wake-ups.
    pub(crate) fn listen(&self) -> tokio::sync::mpsc::Receiver<crate::cluster::Wake> {
        listen::start(
            self.inner.config.clone(),
            self.inner.tls.clone(),
            self.inner.target.clone(),
            Arc::clone(&self.inner.access),
        )
    }

    /// A second connection for work that can use one (a search by meaning
    /// reads half its blocks on each): one free now, or opened now when the
    /// pool has room; `None` rather than waiting for another to be returned.
    pub(crate) async fn spare_client(&self) -> Option<Object> {
        let mut now = deadpool_postgres::Timeouts::new();
        now.wait = Some(std::time::Duration::ZERO);
        self.inner.pool.timeout_get(&now).await.ok()
    }

    /// A pooled connection.
    pub(crate) async fn client(&self) -> Result<Object> {
        pooled(&self.inner.pool, &self.inner.target).await
    }

    /// The queue that writes run ends arriving together in one statement.
    fn ends(&self) -> &batch_queue::Queue<batch_queue::Ends> {
        &self.inner.ends
    }

    /// The queue that stores messages arriving together in one statement.
    fn runs(&self) -> &batch_queue::Queue<batch_queue::Runs> {
        &self.inner.runs
    }

    /// The queue that reads the settings of threads asked for together in
    /// one statement.
    fn settings(&self) -> &batch_queue::Queue<batch_queue::Settings> {
        &self.inner.settings
    }
}

#[cfg(feature = "conformance")]
impl PostgresStore {
    /// Ends the runs of `finishes` as the store writes ends that arrive
    /// together, in one batch of exactly these (each must fit one statement
    /// and name its own run): whether one statement wrote them all, and
    /// each one's outcome, in order.
    #[doc(hidden)]
    pub async fn end_as_one_batch(
        &self,
        finishes: Vec<crate::records::RunFinish>,
    ) -> (bool, Vec<Result<crate::runs::Finished>>) {
        let (together, ended) = batch_queue::write_as_one_batch::<batch_queue::Ends>(
            &self.inner.pool,
            &self.inner.target,
            finishes,
        )
        .await;
        let finished = ended.into_iter().map(|e| e.map(|e| e.finished)).collect();
        (together, finished)
    }

    /// Reads the settings of `thread_keys` as the store reads those asked
    /// for together, in one batch of exactly these: whether one statement
    /// read them all, and each one's settings, in order.
    #[doc(hidden)]
    pub async fn settings_as_one_batch(
        &self,
        thread_keys: Vec<String>,
    ) -> (bool, Vec<Result<crate::records::ThreadState>>) {
        batch_queue::write_as_one_batch::<batch_queue::Settings>(
            &self.inner.pool,
            &self.inner.target,
            thread_keys,
        )
        .await
    }

    /// Stores `runs` as the store stores messages that arrive together, in
    /// one batch of exactly these, each claimed by `owner` until
    /// `lease_until` with `model` (as a replica stores the messages it
    /// takes) when `claimed`: whether one statement stored them all, and
    /// each one's outcome with whether its thread had a message, in order.
    #[doc(hidden)]
    pub async fn store_as_one_batch(
        &self,
        runs: Vec<(crate::records::NewRun, bool)>,
        owner: &str,
        lease_until: hearth_core::Timestamp,
        model: &str,
        assumes_defaults: bool,
    ) -> (
        bool,
        Vec<Result<(crate::records::CreateRunOutcome, Option<crate::HistorySeen>)>>,
    ) {
        let queued = runs
            .into_iter()
            .map(|(run, claimed)| {
                run_insert::QueuedRun::new(
                    run,
                    claimed.then_some((owner, lease_until, model)),
                    assumes_defaults,
                )
            })
            .collect();
        batch_queue::write_as_one_batch::<batch_queue::Runs>(
            &self.inner.pool,
            &self.inner.target,
            queued,
        )
        .await
    }
}

/// `text` as PostgreSQL can store it: its `text` type cannot hold U+0000,
/// and refuses the whole statement for one, where SQLite stores it. A NUL
/// in free text (a message, a model's answer, a fact) carries no meaning,
/// so it is stored as U+FFFD, the replacement character, rather than the
/// write failing: a run whose answer held one would otherwise fail its end
/// and be run again, with the same answer, for ever; a delivery error a
/// platform worded so could not be recorded. JSON columns need nothing:
/// JSON writes it as the escape `\u0000`.
pub(crate) fn storable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The same for an optional text.
pub(crate) fn storable_opt(text: Option<&str>) -> Option<std::borrow::Cow<'_, str>> {
    text.map(storable)
}

/// A connection of `pool`, whose database `target` names in the error.
async fn pooled(pool: &Pool, target: &str) -> Result<Object> {
    pool.get().await.map_err(|e| StoreError::Connect {
        target: target.to_owned(),
        reason: pool_error(e),
    })
}

/// Why a URL did not parse, without echoing any of it.
fn url_error(e: &tokio_postgres::Error) -> String {
    let text = e.to_string();
    // The parser names the option it rejects, not its value; keep only that.
    match text.split_once(':') {
        Some((head, _)) => head.to_owned(),
        None => text,
    }
}

/// Why the pool gave no connection: the server's or the network's own words.
fn pool_error(e: deadpool_postgres::PoolError) -> String {
    match e {
        deadpool_postgres::PoolError::Backend(e) => match e.as_db_error() {
            Some(db) => db.message().to_owned(),
            None => match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            },
        },
        other => other.to_string(),
    }
}

/// `host:port/database` for messages and `/readyz`.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// A count or limit as the BIGINT every PostgreSQL counter is.
pub(crate) fn wide(n: impl Into<u64>) -> i64 {
    i64::try_from(n.into()).unwrap_or(i64::MAX)
}

/// A BIGINT count back to the unsigned width the trait speaks in.
pub(crate) fn narrow<T: TryFrom<i64> + Default>(n: i64) -> T {
    T::try_from(n.max(0)).unwrap_or_default()
}

#[async_trait::async_trait]
impl Store for PostgresStore {
    async fn ping(&self) -> Result<()> {
        let client = self.client().await?;
        migrations::check_current(&client).await
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn cluster(&self) -> Option<&dyn crate::ClusterStore> {
        Some(self)
    }

    fn budget_ledger(&self) -> Option<Arc<dyn crate::BudgetLedger>> {
        Some(Arc::new(self.clone()))
    }

    async fn run_start(&self, run_id: &str, thread_key: &str) -> Result<crate::RunStart> {
        history::run_start(self, run_id, thread_key).await
    }

    async fn create_claimed_run_assuming_defaults(
        &self,
        run: crate::records::NewRun,
        owner: &str,
        lease_until: hearth_core::Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<(crate::records::CreateRunOutcome, Option<crate::HistorySeen>)> {
        // The settings are checked by the insert (migration 0021), not read.
        let claim = run_insert::Claim {
            owner,
            lease_until,
            model,
            mode,
            assumes_defaults: true,
        };
        run_insert::store_run(self, run, Some(&claim)).await
    }

    async fn create_run_supplied(
        &self,
        run: crate::records::NewRun,
        claim: Option<crate::records::RunClaim<'_>>,
        supplied: &str,
    ) -> Result<(crate::records::CreateRunOutcome, Option<crate::HistorySeen>)> {
        run_insert::store_run_supplied(self, run, claim.as_ref(), supplied).await
    }
}
