//! Runs and their journal: creating, claiming and finishing runs, their
//! steps and the messages steered into them.

use hearth_core::Timestamp;

use crate::error::Result;
use crate::records::{
    CreateRunOutcome, NewRun, RunFilter, RunFinish, RunRecord, RunStats, SteerRecord, StepRecord,
    ThreadActivity,
};

/// Runs, their leases and their journal.
#[async_trait::async_trait]
pub trait RunStore: Send + Sync + 'static {
    /// Stores a new queued run, or returns the existing run when `idempotency_key`
    /// was already used on the same thread (never a second run, also when the
    /// same key arrives concurrently).
    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome>;

    /// One run by id.
    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>>;

    /// Runs matching `filter`, newest first.
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>>;

    /// The threads that have runs, the one with the newest run first, at
    /// most `limit` (1-1000).
    async fn list_threads(&self, limit: u32) -> Result<Vec<ThreadActivity>>;

    /// Whether any run on `thread_key` belongs to a user other than
    /// `user_key` (whether the thread is not that user's alone): an index
    /// seek, however many runs the thread has.
    async fn thread_has_other_users(&self, thread_key: &str, user_key: &str) -> Result<bool>;

    /// Aggregate health of the runs stored with `scope` (see
    /// `NewRun::scope`) created at or after `since`: counts by status, the
    /// p50/p95 of accept-to-end time of the finished ones, and the `top`
    /// most called tools. Nothing per user.
    async fn run_stats(&self, scope: &str, since: Timestamp, top: u32) -> Result<RunStats>;

    /// Runs not yet terminal (`queued`, `running`, `awaiting_confirmation`),
    /// oldest first: what recovery must pick up again.
    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>>;

    /// The runs `parent_run_id`'s `delegate` calls started (its sub-agents),
    /// oldest first; an index lookup, so a run with none costs one probe.
    async fn child_runs(&self, parent_run_id: &str) -> Result<Vec<RunRecord>>;

    /// A run and the runs it started (as [`child_runs`](Self::child_runs)),
    /// as its envelope shows them; `None` when there is no such run. A store
    /// may answer both in one read.
    async fn run_with_children(&self, run_id: &str) -> Result<Option<(RunRecord, Vec<RunRecord>)>> {
        let Some(run) = self.get_run(run_id).await? else {
            return Ok(None);
        };
        Ok(Some((run, self.child_runs(run_id).await?)))
    }

    /// Claims a run for execution by `owner` until `lease_until`: wins only when the run is
    /// `queued`, or is `running`/`awaiting_confirmation` with no lease, an expired lease
    /// (`lease_until < now`) or a lease already held by `owner`. On a win the run is `running`
    /// (an `awaiting_confirmation` run keeps that status) with the new owner and lease, and the
    /// updated record is returned. Terminal runs and runs under another owner's live lease give
    /// `None`. Of concurrent callers exactly one wins. A store that several
    /// replicas share also gives `None` while an earlier run of the same
    /// thread is unfinished, so a thread's order holds between replicas (in
    /// one process the thread's queue keeps it).
    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>>;

    /// `claim_run` that also records, in the same write, the model the run
    /// will use (one commit per start instead of two) and, unless the run
    /// has one already (a claim after a restart), its permission `mode`:
    /// the returned record's `mode` is the one the run keeps.
    async fn claim_run_with_model(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<Option<RunRecord>>;

    /// `create_run` and, when that stored a new run, `claim_run_with_model`
    /// on it, in one write where the store can (one commit per accepted
    /// message instead of two, for a thread with nothing else to run). An
    /// existing twin is returned as `create_run` returns it, unclaimed.
    async fn create_claimed_run(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<CreateRunOutcome> {
        let now = run.created_at;
        let created = match self.create_run(run).await? {
            CreateRunOutcome::Created(run) => run,
            existing @ CreateRunOutcome::Existing(_) => return Ok(existing),
        };
        Ok(CreateRunOutcome::Created(
            match self
                .claim_run_with_model(&created.run_id, owner, lease_until, now, model, mode)
                .await?
            {
                Some(claimed) => claimed,
                // Claimed by someone else in between: theirs to run.
                None => created,
            },
        ))
    }

    /// [`Self::create_claimed_run`], also saying what the insert saw of the
    /// run's thread's stored history ([`HistorySeen`](crate::HistorySeen)):
    /// for a run stored claimed, `Empty` means its history is empty until it
    /// ends (only a thread's runs write its history, and none other of its
    /// thread is unfinished), so it needs no read of it, and `Newest` lets a
    /// store that holds the context up to that row skip the read
    /// ([`HistoryStore::thread_context_seen`](crate::HistoryStore::thread_context_seen)).
    /// `None` when the store does not tell (its reads are in process and
    /// cheap). Says nothing about a run stored queued or an existing twin.
    async fn create_claimed_run_seeing_history(
        &self,
        run: NewRun,
        owner: &str,
        lease_until: Timestamp,
        model: &str,
        mode: Option<&str>,
    ) -> Result<(CreateRunOutcome, Option<crate::HistorySeen>)> {
        let outcome = self
            .create_claimed_run(run, owner, lease_until, model, mode)
            .await?;
        Ok((outcome, None))
    }

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

    /// A run's journaled steps and steered messages together, as a run that
    /// starts or resumes reads them (a store may answer both in one read).
    async fn journal_of_run(&self, run_id: &str) -> Result<(Vec<StepRecord>, Vec<SteerRecord>)> {
        Ok((self.steps(run_id).await?, self.steers(run_id).await?))
    }

    /// Ends a run: sets its terminal status, output or error, appends
    /// `messages` to its thread's history, creates `follow_ups` and marks
    /// its pending confirmations `expired` by [`crate::RUN_ENDED`], all in
    /// one transaction. Returns false (and changes nothing) when the run was
    /// already terminal.
    async fn finish_run(&self, finish: RunFinish) -> Result<bool>;

    /// [`finish_run`](Self::finish_run), also telling whether a later run of
    /// the thread was queued when the run ended: `Some(false)` when none
    /// was, `None` when not known. The replica that ends a run claims its
    /// thread's next run at once only when one may be queued; a run queued
    /// after the end was seen wakes the replicas itself (its insert
    /// notifies them).
    async fn finish_run_seeing_next(&self, finish: RunFinish) -> Result<(bool, Option<bool>)> {
        Ok((self.finish_run(finish).await?, None))
    }

    /// [`finish_run_seeing_next`](Self::finish_run_seeing_next), also
    /// giving the run as it ended when the store has it without another
    /// read (PostgreSQL: the end's statement returns it), so a caller
    /// answering with the ended run reads nothing more.
    async fn finish_run_returning(&self, finish: RunFinish) -> Result<Finished> {
        let (ended, next_queued) = self.finish_run_seeing_next(finish).await?;
        Ok(Finished {
            ended,
            next_queued,
            run: None,
        })
    }
}

/// What [`RunStore::finish_run_returning`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// The run ended here (false: it was terminal already, and nothing was
    /// written).
    pub ended: bool,
    /// Whether a later run of the thread was queued when it ended (`None`:
    /// not known).
    pub next_queued: Option<bool>,
    /// The run as it ended, as the store now holds it, when the store gave
    /// it with the end (`None`: read it when it is needed).
    pub run: Option<RunRecord>,
}

/// What a run reads as it starts or resumes: its journal and its thread's
/// context ([`Store::run_start`](crate::Store::run_start)).
#[derive(Debug, Clone, PartialEq)]
pub struct RunStart {
    /// Its journaled steps, by index.
    pub steps: Vec<StepRecord>,
    /// Messages steered into it, oldest first.
    pub steers: Vec<SteerRecord>,
    /// Its thread's context (as `HistoryStore::thread_context`).
    pub context: crate::history::ThreadContext,
}

/// How many of the newest runs per thread asked for `list_threads` reads
/// first: the newest `limit` threads are found among the newest `limit *
/// RECENT_RUNS_PER_THREAD` runs whenever that many threads have a run
/// there (a thread with no run in that window has an older last run than
/// each that has), so a page of threads does not group a million runs.
pub(crate) const RECENT_RUNS_PER_THREAD: u32 = 20;
