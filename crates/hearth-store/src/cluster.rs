//! Several replicas on one database: who is alive, and which replica holds
//! each duty that only one may perform at a time (a channel's connection,
//! the sweep, retention, jobs).
//!
//! Only a store that several processes can share implements this (see
//! [`Store::cluster`](crate::Store::cluster)); on SQLite the home lock makes
//! the process alone, and the runtime describes itself.

use hearth_core::Timestamp;

use crate::error::Result;

/// What a replica reports about itself at each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaBeat {
    /// `<hostname>-<pid>-<4 random hex>`.
    pub id: String,
    /// Where its HTTP API listens.
    pub addr: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Now, by its clock.
    pub at: Timestamp,
    /// Runs it is executing.
    pub runs_executing: u64,
}

/// A replica as the database knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRecord {
    /// Its id.
    pub id: String,
    /// Where its HTTP API listens.
    pub addr: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its last heartbeat.
    pub last_seen: Timestamp,
    /// Runs it was executing at its last heartbeat.
    pub runs_executing: u64,
    /// The duties whose lease it holds, by name, sorted.
    pub holds: Vec<String>,
}

/// Replicas and duty leases.
#[async_trait::async_trait]
pub trait ClusterStore: Send + Sync {
    /// Records the replica alive (its row created or updated).
    async fn heartbeat(&self, beat: &ReplicaBeat) -> Result<()>;

    /// The replicas whose last heartbeat is at or after `since`, by id, each
    /// with the leases it holds that are unexpired at `now`.
    async fn replicas(&self, since: Timestamp, now: Timestamp) -> Result<Vec<ReplicaRecord>>;

    /// Takes or renews the lease `name` for `holder` until `until`: won when
    /// no one holds it, its lease expired before `now`, or `holder` already
    /// holds it. Of concurrent callers at most one wins.
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool>;

    /// Gives up the lease `name` if `holder` holds it.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<()>;

    /// Removes a replica that stops cleanly, and every lease it holds.
    async fn leave(&self, id: &str) -> Result<()>;

    /// The database server's clock (unix ms), to measure a replica's skew.
    async fn database_now(&self) -> Result<Timestamp>;
}
