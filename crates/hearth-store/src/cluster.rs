//! Several replicas on one database: who is alive, and which replica holds
//! each duty that only one may perform at a time (a channel's connection,
//! the sweep, retention, jobs).
//!
//! Only a store that several processes can share implements this (see
//! [`Store::cluster`](crate::Store::cluster)); on SQLite the home lock makes
//! the process alone, and the runtime describes itself.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::RunRecord;

/// A run a replica claimed from the queue, with what the surface that took
/// its message supplied for it beyond the message (JSON, as the runtime
/// wrote it with [`Store::create_run_supplied`](crate::Store::create_run_supplied)),
/// when the run was stored queued with any.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The run, claimed.
    pub run: RunRecord,
    /// Its supplied part, if it has one.
    pub supplied: Option<String>,
}

/// What the database tells a replica (PostgreSQL `LISTEN`/`NOTIFY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A run may have become claimable: one was queued, its lease was
    /// given up, or the run before it on its thread ended.
    Work,
    /// A run ended (on whichever replica); the run id.
    Ended(String),
    /// A run began waiting for a confirmation; the run id.
    Asks(String),
    /// A confirmation of a run was answered; the run id.
    Confirmation(String),
    /// A thread's incognito mode was turned on or off.
    Incognito {
        /// The thread.
        thread_key: String,
        /// Whether it is incognito now.
        on: bool,
    },
    /// A job was added, changed or removed (on whichever replica): the
    /// holder of the jobs duty looks at the jobs again.
    Jobs,
    /// The listening connection is (again) established. What was notified
    /// while it was down is lost: look at the store again.
    Connected,
    /// The listening connection dropped (or could not be made); it is made
    /// again with back-off.
    Lost,
}

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

    /// Who holds the lease `name`, if its lease is unexpired at `now`.
    async fn lease_holder(&self, name: &str, now: Timestamp) -> Result<Option<String>>;

    /// Gives up the lease `name` if `holder` holds it.
    async fn release_lease(&self, name: &str, holder: &str) -> Result<()>;

    /// Removes a replica that stops cleanly, and every lease it holds.
    async fn leave(&self, id: &str) -> Result<()>;

    /// The database server's clock (unix ms), to measure a replica's skew.
    async fn database_now(&self) -> Result<Timestamp>;

    /// Claims the oldest claimable run for `owner` until `lease_until`, in
    /// one statement: a queued run, or an unfinished one whose lease lapsed
    /// before `now`, whose thread has no earlier unfinished run. Concurrent
    /// claimers skip each other's candidates instead of waiting on them, and
    /// each run is claimed by one of them. `None` when nothing is claimable.
    async fn claim_next(
        &self,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Claimed>>;

    /// [`ClusterStore::claim_next`] among the runs of `thread_key` only: the
    /// replica that ended a thread's run takes the thread's next one at once.
    async fn claim_next_of_thread(
        &self,
        thread_key: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<Claimed>>;

    /// Gives up the leases `owner` holds on runs other than `keep` (a
    /// replica stopping: runs it claimed and did not start go to another
    /// replica now, not when their lease lapses; threads of runs ended
    /// elsewhere that it stopped go on). Returns how many.
    async fn release_run_leases(&self, owner: &str, keep: &[String]) -> Result<u64>;

    /// Gives up `owner`'s lease on `run_id` once the run ended: a run ended
    /// by another replica (a cancel answered there, a new session) keeps
    /// the lease of the replica executing it, and its thread's next run
    /// waits, until that replica stopped it and calls this. True when a
    /// lease was given up.
    async fn let_go(&self, run_id: &str, owner: &str) -> Result<bool>;

    /// Asks that the end of `run_id` be notified to every replica
    /// (`Wake::Ended`): this replica holds a log of a run it may not execute
    /// (it follows it, or cancels it from here). The end of a run nobody
    /// asked for is not notified, so most ends commit without the lock a
    /// notification takes (migration 0015). Call it before reading the run
    /// or ending it: an end committed before it is then read, one after it
    /// is notified.
    async fn watch_end(&self, run_id: &str) -> Result<()>;

    /// Starts listening for what other replicas notify, on a connection of
    /// its own that is made again (with back-off) whenever it drops; ends
    /// when the receiver is dropped.
    fn listen(&self) -> tokio::sync::mpsc::Receiver<Wake>;
}
