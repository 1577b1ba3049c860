//! Storing a run on PostgreSQL: the insert that keeps one run per thread
//! at a time and each thread's order across replicas, and the idempotency
//! key that makes one run of concurrent twins.

use deadpool_postgres::GenericClient;
use hearth_core::{RunStatus, Timestamp};
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::rows::{self, run_columns};
use crate::codec::to_json;
use crate::error::{Result, StoreError};
use crate::records::{CreateRunOutcome, NewRun};

/// Who claims a run as it is created, until when, with which model (none
/// when empty: a run stored claimed before it is prepared).
pub(super) struct Claim<'a> {
    pub(super) owner: &'a str,
    pub(super) lease_until: Timestamp,
    pub(super) model: &'a str,
    pub(super) mode: Option<&'a str>,
}

/// The class of the per-thread advisory locks ("hear" in ASCII), apart from
/// any other advisory lock.
const THREAD_LOCK_CLASS: i32 = 0x6865_6172;

/// The statement taking a thread's advisory lock, to its transaction's end.
const THREAD_LOCK_SQL: &str = "SELECT pg_advisory_xact_lock($1, hashtext($2))";

/// Inserts a run (queued, or claimed when its thread has nothing
/// unfinished); returns it, or nothing when its idempotency key is taken.
const INSERT_RUN_SQL: &str = concat!(
    // Stored claimed only when its thread has nothing unfinished: a replica
    // that believes the thread idle may not know that another replica runs
    // an earlier message of it, and order comes first.
    // Watched (its end notified, migration 0015) unless stored claimed: a
    // queued run may be claimed by another replica than the one that stored
    // it and has a log of it.
    "INSERT INTO runs (run_id, thread_key, user_key, source, input, idempotency_key, \
     status, created_at, updated_at, scope, roles, lease_owner, lease_until, model, mode, \
     parent_run_id, watched) \
     SELECT $1, $2, $3, $4, $5, $6, CASE WHEN busy THEN 'queued' ELSE $7 END, $8, $8, \
     $9, $10, CASE WHEN busy THEN NULL ELSE $11 END, \
     CASE WHEN busy THEN NULL ELSE $12::BIGINT END, CASE WHEN busy THEN NULL ELSE NULLIF($13, '') END, \
     CASE WHEN busy THEN NULL ELSE $14 END, $15, busy OR $7 = 'queued' \
     FROM (SELECT EXISTS (SELECT 1 FROM runs WHERE thread_key = $2 \
     AND status IN ('queued', 'running', 'awaiting_confirmation')) AS busy) AS thread \
     ON CONFLICT (thread_key, idempotency_key) WHERE idempotency_key IS NOT NULL \
     DO NOTHING RETURNING ",
    run_columns!()
);

/// The parameters of [`INSERT_RUN_SQL`], with what they borrow.
struct RunInsert<'a> {
    run: &'a NewRun,
    status: &'static str,
    roles: String,
    owner: Option<&'a str>,
    lease_until: Option<Timestamp>,
    model: Option<&'a str>,
    mode: Option<&'a str>,
}

impl<'a> RunInsert<'a> {
    fn new(run: &'a NewRun, claim: Option<&'a Claim<'a>>) -> Result<Self> {
        let status = match claim {
            Some(_) => RunStatus::Running,
            None => RunStatus::Queued,
        };
        Ok(RunInsert {
            run,
            status: status.as_str(),
            roles: to_json(&run.roles, "run roles")?,
            owner: claim.map(|c| c.owner),
            lease_until: claim.map(|c| c.lease_until),
            model: claim.map(|c| c.model),
            mode: claim.and_then(|c| c.mode),
        })
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 15] {
        let run = self.run;
        [
            &run.run_id,
            &run.thread_key,
            &run.user_key,
            &run.source,
            &run.input,
            &run.idempotency_key,
            &self.status,
            &run.created_at,
            &run.scope,
            &self.roles,
            &self.owner,
            &self.lease_until,
            &self.model,
            &self.mode,
            &run.parent_run_id,
        ]
    }
}

/// What an insert of `run` returned: the new run, or the run that holds
/// its idempotency key on its thread (committed: the insert that yields to
/// it waits for it).
async fn inserted_or_twin(
    c: &impl GenericClient,
    run: &NewRun,
    inserted: Option<tokio_postgres::Row>,
) -> Result<CreateRunOutcome> {
    if let Some(row) = inserted {
        return Ok(CreateRunOutcome::Created(rows::run(&row)?));
    }
    let existing = c
        .prepare_cached(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE thread_key = $1 AND idempotency_key = $2"
        ))
        .await?;
    match c
        .query_opt(&existing, &[&run.thread_key, &run.idempotency_key])
        .await?
    {
        Some(row) => Ok(CreateRunOutcome::Existing(rows::run(&row)?)),
        None => Err(StoreError::Corrupt(
            "run insert ignored without a conflicting run".into(),
        )),
    }
}

/// Inserts `run` (queued, or already claimed by `claim`), or returns the run
/// that holds its idempotency key on its thread. Of concurrent inserts with
/// the same key, the index lets one in; the others wait for it to commit and
/// then read it.
///
/// `c` must be a transaction: the insert first takes its thread's advisory
/// lock, held to the commit, so the inserts of one thread commit one at a
/// time and in the order of their `seq`. Without it two replicas storing a
/// message on an idle thread at the same instant both see it idle (each
/// statement's snapshot misses the other's uncommitted run) and both store
/// their run claimed: two runs of one thread at once. The insert's snapshot
/// is taken after the lock is granted (READ COMMITTED: one per statement),
/// so it sees every earlier run of the thread.
pub(super) async fn insert_run(
    c: &impl GenericClient,
    run: &NewRun,
    claim: Option<&Claim<'_>>,
) -> Result<CreateRunOutcome> {
    let lock = c.prepare_cached(THREAD_LOCK_SQL).await?;
    c.query_one(&lock, &[&THREAD_LOCK_CLASS, &run.thread_key])
        .await?;
    let insert = c.prepare_cached(INSERT_RUN_SQL).await?;
    let params = RunInsert::new(run, claim)?;
    let inserted = c.query_opt(&insert, &params.params()).await?;
    inserted_or_twin(c, run, inserted).await
}

/// [`insert_run`] in a transaction of its own, its four statements (begin,
/// the thread's lock, the insert, commit) sent together: one round trip
/// instead of four. PostgreSQL still runs them one after the other, so the
/// insert's snapshot is taken once the lock is granted, as in `insert_run`.
/// A failure anywhere rolls the whole transaction back (a statement after a
/// failed one fails, and the commit of a failed transaction rolls it back).
pub(super) async fn store_run(
    store: &PostgresStore,
    run: &NewRun,
    claim: Option<&Claim<'_>>,
) -> Result<CreateRunOutcome> {
    let client = store.client().await?;
    let (lock, insert) = tokio::try_join!(
        client.prepare_cached(THREAD_LOCK_SQL),
        client.prepare_cached(INSERT_RUN_SQL)
    )?;
    let params = RunInsert::new(run, claim)?;
    let params = params.params();
    let thread: [&(dyn ToSql + Sync); 2] = [&THREAD_LOCK_CLASS, &run.thread_key];
    // `biased`: polled in this order, so sent in this order.
    let sent = tokio::try_join!(
        biased;
        client.batch_execute("BEGIN"),
        client.query_one(&lock, &thread),
        client.query_opt(&insert, &params),
        client.batch_execute("COMMIT"),
    );
    let inserted = match sent {
        Ok((_, _, inserted, _)) => inserted,
        Err(e) => {
            // A statement refused before it was sent (the commit among
            // them) would leave the pooled connection inside the
            // transaction, holding the thread's lock: end it here.
            if let Err(rollback) = client.batch_execute("ROLLBACK").await {
                tracing::warn!(error = %rollback, "could not roll back a failed run insert");
            }
            return Err(e.into());
        }
    };
    inserted_or_twin(&client, run, inserted).await
}
