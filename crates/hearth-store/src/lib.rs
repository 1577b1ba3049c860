//! hearth-store: durable state behind the `Store` trait.
//!
//! Callers (runtime, engine, server, CLI) see only `Store` and the record types
//! here; the SQLite implementation (`sqlite`) is one backend, and a PostgreSQL
//! backend can be added beside it without touching callers. The trait speaks in
//! domain operations (create a run, journal a step, finish a run atomically with
//! its messages), not SQL, so each backend keeps its own queries and dialect.
//!
//! `Store` is the sum of one trait per aggregate ([`RunStore`],
//! [`ThreadStore`], [`UsageStore`], [`GrantStore`], [`TokenStore`],
//! [`SecretStore`], [`MemoryStore`], [`ConfirmationStore`],
//! [`RetentionStore`], [`OutboxStore`], [`AccessStore`], [`HistoryStore`], [`JobStore`], [`AppStore`]); `use hearth_store::prelude::*` brings them all into
//! scope. With the `conformance` feature, `conformance` holds one test
//! suite per aggregate that every backend must pass.

pub mod apps;
pub mod budget;
pub mod channels;
pub mod cluster;
mod codec;
pub mod confirmations;
#[cfg(feature = "conformance")]
pub mod conformance;
mod context_cache;
pub mod error;
pub mod grants;
pub mod history;
pub mod jobs;
pub mod memory;
mod nearest;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod records;
pub mod retention;
pub mod router;
pub mod runs;
pub mod secret_store;
pub mod secrets;
pub mod sqlite;
pub mod threads;
pub mod tokens;
pub mod usage;

pub use apps::{AppEnablement, AppStore, AppVersionRecord, AppVersionStatus};
pub use budget::BudgetLedger;
pub use channels::{
    AccessStore, AllowedUser, ChannelStore, NewOutboxItem, OutboxCounts, OutboxItem, OutboxKind,
    OutboxStatus, OutboxStore, PairingLimits, PairingOutcome, PairingRecord, ReplyMessage,
    ReplyRouter, RunEnd,
};
pub use cluster::{Claimed, ClusterStore, ReplicaBeat, ReplicaRecord, Wake};
pub use confirmations::ConfirmationStore;
pub use error::{Result, StoreError};
pub use grants::GrantStore;
pub use history::{
    HistoryEntry, HistoryPage, HistorySeen, HistoryStore, SUMMARY_ROLE, StoredSummary,
    ThreadContext,
};
pub use jobs::{CatchUp, JobFiring, JobRecord, JobStore, NextFiring};
pub use memory::{
    MemoryHit, MemoryRecord, MemoryScope, MemoryStore, NearMemory, NewMemory, SavedMemory,
};
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use records::*;
pub use retention::{PurgeReport, RetentionCutoffs, RetentionStore};
pub use router::{ArmStats, Rating, RouterStore, RunFeedback};
pub use runs::{Finished, RunStart, RunStore};
pub use secret_store::SecretStore;
pub use sqlite::{Durability, SqliteStore};
pub use threads::ThreadStore;
pub use tokens::TokenStore;
pub use usage::{CallUsage, ModelCall, UsageStore};

/// The store traits, for callers that use a concrete store (a trait object
/// `dyn Store` reaches every aggregate's methods without them).
pub mod prelude {
    pub use crate::{
        AccessStore, AppStore, ChannelStore, ConfirmationStore, GrantStore, HistoryStore, JobStore,
        MemoryStore, OutboxStore, RetentionStore, RouterStore, RunStore, SecretStore, Store,
        ThreadStore, TokenStore, UsageStore,
    };
}

/// Durable state of hearth: every aggregate's operations. Every method that
/// writes returns only after the write is committed (and, in strict
/// durability, synced to disk).
#[async_trait::async_trait]
pub trait Store:
    RunStore
    + ThreadStore
    + UsageStore
    + GrantStore
    + TokenStore
    + SecretStore
    + MemoryStore
    + ConfirmationStore
    + RetentionStore
    + ChannelStore
    + HistoryStore
    + JobStore
    + RouterStore
    + AppStore
    + Send
    + Sync
    + 'static
{
    /// Checks that the store is reachable and migrated (for `/readyz`).
    async fn ping(&self) -> Result<()>;

    /// The backend's name: `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// Replicas and duty leases, when several processes may share this
    /// store; `None` when the process is alone with it (SQLite).
    fn cluster(&self) -> Option<&dyn ClusterStore> {
        None
    }

    /// Budget reservations and use shared with the other replicas; `None`
    /// when the process is alone with the store (SQLite), where budgets
    /// live in its memory.
    fn budget_ledger(&self) -> Option<std::sync::Arc<dyn BudgetLedger>> {
        None
    }

    /// [`RunStore::create_claimed_run_seeing_history`] for a run whose
    /// `model` and `mode` were chosen from the defaults, without its
    /// thread's settings read: stored claimed with them only when its
    /// thread has no settings of its own that would choose otherwise (a
    /// model, a thinking level other than `off`, a mode); else stored held
    /// (claimed by `owner`, without a model or mode) for its worker to
    /// prepare from those settings and claim again. The returned run's
    /// model tells which (none or empty: held). A store whose reads are in
    /// process reads the settings first; PostgreSQL checks them in the
    /// insert (migration 0021), by the rule of
    /// [`ThreadState::has_own_settings`].
    async fn create_claimed_run_assuming_defaults(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: hearth_core::Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<(CreateRunOutcome, Option<HistorySeen>)> {
        if self
            .thread_settings(&run.thread_key)
            .await?
            .has_own_settings()
        {
            let outcome = self
                .create_claimed_run(run, owner, lease_until, "", None)
                .await?;
            return Ok((outcome, None));
        }
        self.create_claimed_run_seeing_history(run, owner, lease_until, model, mode)
            .await
    }

    /// Stores `run` as [`RunStore::create_run`] does, or claimed as `claim`
    /// says (as [`RunStore::create_claimed_run_seeing_history`], or with
    /// `assumes_defaults` as [`Store::create_claimed_run_assuming_defaults`]),
    /// with `supplied`: what the surface that took the message sent for its
    /// run beyond it (a model, a conversation of its own; JSON). When the
    /// run is stored queued, another replica may claim it, so a shared
    /// store keeps `supplied` with it and returns it with the claim
    /// ([`ClusterStore::claim_next`]); a run stored claimed is run by the
    /// caller, which holds them. A store of one process keeps nothing: the
    /// process that took the message runs it.
    async fn create_run_supplied(
        &self,
        run: NewRun,
        claim: Option<RunClaim<'_>>,
        supplied: &str,
    ) -> Result<(CreateRunOutcome, Option<HistorySeen>)> {
        let _ = supplied;
        match claim {
            None => Ok((self.create_run(run).await?, None)),
            Some(c) if c.assumes_defaults => {
                self.create_claimed_run_assuming_defaults(
                    run,
                    c.owner,
                    c.lease_until,
                    c.model,
                    c.mode,
                )
                .await
            }
            Some(c) => {
                self.create_claimed_run_seeing_history(run, c.owner, c.lease_until, c.model, c.mode)
                    .await
            }
        }
    }

    /// What a run reads as it starts or resumes: its journal (as
    /// [`RunStore::journal_of_run`]) and its thread's context (as
    /// [`HistoryStore::thread_context`]), read together; a store may answer
    /// them in one round trip.
    async fn run_start(&self, run_id: &str, thread_key: &str) -> Result<RunStart> {
        let ((steps, steers), context) =
            tokio::try_join!(self.journal_of_run(run_id), self.thread_context(thread_key))?;
        Ok(RunStart {
            steps,
            steers,
            context,
        })
    }
}
