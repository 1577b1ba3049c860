//! hearth-store: durable state behind the `Store` trait.
//!
//! Callers (runtime, engine, server, CLI) see only `Store` and the record types
//! here; the SQLite implementation (`sqlite`) is one backend, and a PostgreSQL
//! backend can be added beside it without touching callers. The trait speaks in
//! domain operations (create a run, journal a step, finish a run atomically with
//! its messages), not SQL, so each backend keeps its own queries and dialect.

pub mod error;
pub mod memory;
pub mod records;
pub mod retention;
pub mod secrets;
pub mod sqlite;

pub use error::{Result, StoreError};
pub use memory::{MemoryHit, MemoryRecord, MemoryScope, MemoryStore, NewMemory, SavedMemory};
pub use records::*;
pub use retention::{PurgeReport, RetentionCutoffs, RetentionStore};
pub use sqlite::{Durability, SqliteStore};

use hearth_core::{Message, Timestamp};

/// Durable state of hearth. Every method that writes returns only after the
/// write is committed (and, in strict durability, synced to disk).
#[async_trait::async_trait]
pub trait Store: MemoryStore + RetentionStore + Send + Sync + 'static {
    /// Checks that the store is reachable and migrated (for `/readyz`).
    async fn ping(&self) -> Result<()>;

    /// Stores a new queued run, or returns the existing run when `idempotency_key`
    /// was already used on the same thread (never a second run, also when the
    /// same key arrives concurrently).
    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome>;

    /// One run by id.
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>>;

    /// Runs matching `filter`, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    /// Runs not yet terminal (`queued`, `running`, `awaiting_confirmation`),
    /// oldest first: what recovery must pick up again.
    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>>;

    /// Marks a run `running` under `owner` until `lease_until`, with the model
    /// that runs it. Returns false when the run is already terminal.
    async fn start_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
    ) -> Result<bool>;

    /// Claims a run for execution by `owner` until `lease_until`: wins only when the run is
    /// `queued`, or is `running`/`awaiting_confirmation` with no lease, an expired lease
    /// (`lease_until < now`) or a lease already held by `owner`. On a win the run is `running`
    /// (an `awaiting_confirmation` run keeps that status) with the new owner and lease, and the
    /// updated record is returned. Terminal runs and runs under another owner's live lease give
    /// `None`. Of concurrent callers exactly one wins.
    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>>;

    /// Records the model a run uses (after it was claimed).
    async fn set_run_model(&self, run_id: &str, model: &str) -> Result<()>;

    /// Clears the leases of unfinished runs held by owners other than `owner` (used at start by
    /// a process that holds the home's exclusive lock, so it knows their owners are dead).
    async fn release_foreign_leases(&self, owner: &str) -> Result<u64>;

    /// Extends to `lease_until` the leases of those of `run_ids` that `owner`
    /// holds and that are not terminal (heartbeat of the runs really
    /// executing; a run whose executor is gone must let its lease lapse so
    /// recovery can claim it). Returns how many were renewed.
    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_until: Timestamp,
    ) -> Result<u64>;

    /// Appends or replaces (same run and index) one journal step.
    async fn put_step(&self, step: StepRecord) -> Result<()>;

    /// The journaled steps of a run, by index.
    async fn steps(&self, run_id: &str) -> Result<Vec<StepRecord>>;

    /// Stores a message steered into a run (not yet terminal) and returns it
    /// with its id.
    async fn add_steer(&self, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord>;

    /// The messages steered into a run, oldest first.
    async fn steers(&self, run_id: &str) -> Result<Vec<SteerRecord>>;

    /// Ends a run: sets its terminal status, output or error, and appends
    /// `messages` to its thread's history and creates `follow_ups`, all in one
    /// transaction. Returns false
    /// (and changes nothing) when the run was already terminal.
    async fn finish_run(&self, finish: RunFinish) -> Result<bool>;

    /// The last `limit` messages of a thread, oldest first.
    async fn thread_history(&self, thread_key: &str, limit: u32) -> Result<Vec<Message>>;

    /// A thread's runtime settings and message count (defaults when unknown).
    async fn thread_state(&self, thread_key: &str) -> Result<ThreadState>;

    /// Sets (or with `None` clears) a thread's model override.
    async fn set_thread_model(&self, thread_key: &str, model: Option<&str>) -> Result<()>;

    /// Sets a thread's thinking level (`off`, `low`, `medium`, `high`).
    async fn set_thread_thinking(&self, thread_key: &str, level: &str) -> Result<()>;

    /// Turns a thread's incognito flag on or off (the flag is kept; what an
    /// incognito thread says is not).
    async fn set_thread_incognito(&self, thread_key: &str, enabled: bool) -> Result<()>;

    /// Threads whose incognito flag is on.
    async fn incognito_threads(&self) -> Result<Vec<String>>;

    /// Counts model calls of runs stored elsewhere (incognito) in usage,
    /// without their thread or user: only provider, model, tokens, timing.
    /// Steps that are not finished model calls are skipped.
    async fn record_anonymous_usage(&self, steps: Vec<StepRecord>) -> Result<()>;

    /// Deletes a thread's message history (its settings stay).
    async fn clear_thread_history(&self, thread_key: &str) -> Result<()>;

    /// Starts a new session on a thread: marks `cancelled_run` (a run of that
    /// thread) `cancelled` unless it is already terminal, and deletes the
    /// thread's message history, in one transaction; so a cancelled run that
    /// finishes late cannot append to the new session, and a failure leaves
    /// both as they were.
    async fn new_session(
        &self,
        thread_key: &str,
        cancelled_run: Option<&str>,
        at: Timestamp,
    ) -> Result<NewSession>;

    /// Model calls grouped for usage and cost.
    async fn usage(&self, query: &UsageQuery) -> Result<Vec<UsageRow>>;

    /// Stores a new API token by the SHA-256 hex of its secret.
    async fn create_token(&self, token: NewToken) -> Result<()>;

    /// All tokens, revoked ones included, newest first.
    async fn list_tokens(&self) -> Result<Vec<TokenRecord>>;

    /// Revokes a token by id. Returns false when no active token has that id.
    async fn revoke_token(&self, id: &str) -> Result<bool>;

    /// True when an unrevoked token has this hash.
    async fn token_hash_valid(&self, hash_hex: &str) -> Result<bool>;

    /// Number of unrevoked tokens.
    async fn active_token_count(&self) -> Result<u64>;

    /// Stores a sealed secret under `name`, replacing any value it had (its
    /// `created_at` is kept). `sealed` is ciphertext from `secrets::Sealer`;
    /// the store never sees plaintext.
    async fn put_secret(&self, name: &str, sealed: Vec<u8>, at: Timestamp) -> Result<()>;

    /// The sealed bytes of a secret, if stored.
    async fn get_secret(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// Every stored secret's name and dates (never values), by name.
    async fn list_secrets(&self) -> Result<Vec<SecretInfo>>;

    /// Deletes a secret. Returns false when none has that name.
    async fn delete_secret(&self, name: &str) -> Result<bool>;

    /// Stores a grant. Returns false (and changes nothing) when the same
    /// subject already holds the same capability in the same scope.
    async fn add_grant(&self, grant: Grant) -> Result<bool>;

    /// Stores a grant and, only when it was new, `event` in the audit log,
    /// in one transaction. Returns whether the grant was new.
    async fn add_grant_audited(&self, grant: Grant, event: AuditEvent) -> Result<bool>;

    /// Removes a grant. Returns false when there was none.
    async fn remove_grant(&self, subject: &str, capability: &str, scope: &str) -> Result<bool>;

    /// Removes a grant and, only when one was removed, stores `event` in the
    /// audit log, in one transaction. Returns whether a grant was removed.
    async fn remove_grant_audited(
        &self,
        subject: &str,
        capability: &str,
        scope: &str,
        event: AuditEvent,
    ) -> Result<bool>;

    /// Every grant, or only those in `scope`, by subject then capability.
    async fn list_grants(&self, scope: Option<&str>) -> Result<Vec<Grant>>;

    /// The grants of any of `subjects` in any of `scopes`, by subject, then
    /// capability, then scope.
    async fn grants_for(&self, subjects: &[String], scopes: &[String]) -> Result<Vec<Grant>>;

    /// Appends one event to the audit log.
    async fn append_audit(&self, event: AuditEvent) -> Result<()>;

    /// The newest `limit` audit events, newest first (0 means 100; at most 1000).
    async fn list_audit(&self, limit: u32) -> Result<Vec<AuditEvent>>;

    /// Stores a pending confirmation and marks its run
    /// `awaiting_confirmation`, in one transaction. When the run already has
    /// a confirmation for the same call, nothing changes but the run's status
    /// (if it is still pending) and that one is returned.
    async fn request_confirmation(&self, rec: ConfirmationRecord) -> Result<ConfirmationRecord>;

    /// The confirmation of one tool call of a run.
    async fn confirmation_for_call(
        &self,
        run_id: &str,
        call_id: &str,
    ) -> Result<Option<ConfirmationRecord>>;

    /// A confirmation by token hash.
    async fn confirmation_by_hash(&self, token_hash: &str) -> Result<Option<ConfirmationRecord>>;

    /// The pending confirmations of a run, or of a thread's runs.
    async fn pending_confirmations(
        &self,
        run_id: Option<&str>,
        thread_key: Option<&str>,
    ) -> Result<Vec<ConfirmationRecord>>;

    /// Answers a pending confirmation (`state` is approved, denied or expired),
    /// puts its run back to `running` and stores `audit` in the audit log, in
    /// one transaction. Returns `None` (and changes nothing, `audit` not
    /// stored either) when it is not pending any more, so a token is used at
    /// most once.
    async fn resolve_confirmation(
        &self,
        token_hash: &str,
        state: ConfirmationState,
        by: &str,
        at: Timestamp,
        audit: Option<AuditEvent>,
    ) -> Result<Option<ConfirmationRecord>>;
}
