//! Storing a run on PostgreSQL: the insert that keeps one run per thread
//! at a time and each thread's order across replicas, the idempotency key
//! that makes one run of concurrent twins, and the statement that stores
//! the messages arriving together (`batch_queue.rs`).

use deadpool_postgres::GenericClient;
use hearth_core::{RunStatus, Timestamp};
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::rows::{self, run_columns};
use crate::codec::to_json;
use crate::error::{Result, StoreError};
use crate::history::HistorySeen;
use crate::records::{CreateRunOutcome, NewRun};

/// Who claims a run as it is created (migration 0021 has what
/// `assumes_defaults` changes).
pub(super) use crate::records::RunClaim as Claim;

/// The class of the per-thread advisory locks ("hear" in ASCII), apart from
/// any other advisory lock: `hearth_store_run` (migration 0016) takes
/// `(class, hashtext(thread_key))` with the class as the literal 1751474546,
/// and anything else that takes a thread's lock must take the same.
#[cfg(test)]
const THREAD_LOCK_CLASS: i32 = 0x6865_6172;

/// Stores a run: the thread's advisory lock, then the insert (queued, or
/// claimed when its thread has nothing unfinished), in one statement
/// (`hearth_store_run_seeing_newest`, migration 0024; 0016 has why its
/// insert sees every earlier run of the thread, 0018 why what it says of
/// the thread's messages holds until the run ends, 0021 what
/// `assumes_defaults` changes); returns the run, or nothing when its
/// idempotency key is taken, and the id of its thread's newest stored row
/// (NULL: none), asked in the insert's snapshot.
const STORE_RUN_SQL: &str = concat!(
    "SELECT ",
    run_columns!(),
    ", newest_message FROM (SELECT (r.run).*, r.newest_message \
     FROM hearth_store_run_seeing_newest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14, $15, $16) AS r) AS stored"
);

/// The column of [`STORE_RUN_SQL`]'s row after the run's.
const NEWEST_MESSAGE_COLUMN: usize = 22;

/// [`STORE_RUN_SQL`] that also keeps `$17`, what the run's surface supplied
/// beyond its message (JSON text), when the run is stored queued: another
/// replica may claim it then, and a claim returns it (migration 0022). In
/// the statement that stores the run, so no replica sees the run without
/// it. Same row as [`STORE_RUN_SQL`]'s.
const STORE_RUN_SUPPLIED_SQL: &str = concat!(
    "WITH stored AS (SELECT (r.run).*, r.newest_message \
     FROM hearth_store_run_seeing_newest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14, $15, $16) AS r), \
     kept AS (INSERT INTO run_supplied (run_id, body) \
     SELECT run_id, $17::text::jsonb FROM stored WHERE status = 'queued') \
     SELECT ",
    run_columns!(),
    ", newest_message FROM stored"
);

/// Stores several runs (`hearth_store_runs_seeing_newest`, migration
/// 0024; 0019 has why of the batch): a row per run stored, as
/// [`STORE_RUN_SQL`]'s, then its position in the arrays (from 1); none for
/// a run whose idempotency key was taken.
const STORE_RUNS_SQL: &str = concat!(
    "SELECT ",
    run_columns!(),
    ", newest_message, i FROM (SELECT (r.run).*, r.newest_message, r.i \
     FROM hearth_store_runs_seeing_newest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, \
     $12, $13, $14, $15, $16) AS r) AS stored"
);

/// The column of [`STORE_RUNS_SQL`]'s row after `newest_message`.
const POSITION_COLUMN: usize = NEWEST_MESSAGE_COLUMN + 1;

/// The parameters of [`STORE_RUN_SQL`], with what they borrow.
struct RunInsert<'a> {
    run: &'a NewRun,
    input: std::borrow::Cow<'a, str>,
    status: &'static str,
    roles: String,
    owner: Option<&'a str>,
    lease_until: Option<Timestamp>,
    model: Option<&'a str>,
    mode: Option<&'a str>,
    assumes_defaults: bool,
}

impl<'a> RunInsert<'a> {
    fn new(run: &'a NewRun, claim: Option<&'a Claim<'a>>) -> Result<Self> {
        let status = match claim {
            Some(_) => RunStatus::Running,
            None => RunStatus::Queued,
        };
        Ok(RunInsert {
            run,
            input: super::storable(&run.input),
            status: status.as_str(),
            roles: to_json(&run.roles, "run roles")?,
            owner: claim.map(|c| c.owner),
            lease_until: claim.map(|c| c.lease_until),
            model: claim.map(|c| c.model),
            mode: claim.and_then(|c| c.mode),
            assumes_defaults: claim.is_some_and(|c| c.assumes_defaults),
        })
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 16] {
        let run = self.run;
        [
            &run.run_id,
            &run.thread_key,
            &run.user_key,
            &run.source,
            &self.input,
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
            &self.assumes_defaults,
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
/// that holds its idempotency key on its thread; with a new run, what the
/// insert saw of its thread's stored history. Of concurrent inserts with the same
/// key, the index lets one in; the others wait for it to commit and then
/// read it.
///
/// `c` is inside a transaction (the fallback end of a run storing its
/// follow-ups): the thread's advisory lock that the function takes is
/// held to that transaction's commit, so the inserts of one thread commit
/// one at a time and in the order of their `seq`. Without it two replicas
/// storing a message on an idle thread at the same instant both see it idle
/// and both store their run claimed: two runs of one thread at once. The
/// same function as [`store_run`], so both write the same columns the same
/// way, and a follow-up costs one statement.
///
/// With `supplied`, it is kept with the run if the run is stored queued
/// ([`STORE_RUN_SUPPLIED_SQL`]).
pub(super) async fn insert_run(
    c: &impl GenericClient,
    run: &NewRun,
    claim: Option<&Claim<'_>>,
    supplied: Option<&str>,
) -> Result<(CreateRunOutcome, Option<HistorySeen>)> {
    let params = RunInsert::new(run, claim)?;
    let inserted = match supplied {
        None => {
            let store = c.prepare_cached(STORE_RUN_SQL).await?;
            c.query_opt(&store, &params.params()).await?
        }
        Some(supplied) => {
            let store = c.prepare_cached(STORE_RUN_SUPPLIED_SQL).await?;
            let mut all: Vec<&(dyn ToSql + Sync)> = params.params().to_vec();
            all.push(&supplied);
            c.query_opt(&store, &all).await?
        }
    };
    let seen = inserted.as_ref().map(seen_history).transpose()?;
    Ok((inserted_or_twin(c, run, inserted).await?, seen))
}

/// What an inserted run's row says of its thread's stored history.
fn seen_history(row: &tokio_postgres::Row) -> Result<HistorySeen> {
    Ok(
        match row.try_get::<_, Option<i64>>(NEWEST_MESSAGE_COLUMN)? {
            Some(id) => HistorySeen::Newest(id),
            None => HistorySeen::Empty,
        },
    )
}

/// [`insert_run`] in a transaction of its own, with the messages that
/// arrive together (`batch_queue.rs`): one statement in autocommit,
/// committed before PostgreSQL answers it (the commit comes at the
/// statement's Sync, and its error, a deferred constraint's, is the
/// statement's), so a message is accepted only once committed. A failure
/// rolls it all back and leaves no transaction open on the pooled
/// connection.
pub(super) async fn store_run(
    store: &PostgresStore,
    run: NewRun,
    claim: Option<&Claim<'_>>,
) -> Result<(CreateRunOutcome, Option<HistorySeen>)> {
    let queued = QueuedRun {
        run,
        claim: claim.map(|c| ClaimOwned {
            owner: c.owner.to_owned(),
            lease_until: c.lease_until,
            model: c.model.to_owned(),
            mode: c.mode.map(str::to_owned),
            assumes_defaults: c.assumes_defaults,
        }),
    };
    store.runs().write(queued).await
}

/// A message waiting in the store's queue to be stored, with its claim.
pub(super) struct QueuedRun {
    run: NewRun,
    claim: Option<ClaimOwned>,
}

impl QueuedRun {
    /// `run`, claimed by `(owner, lease until, model)` when given, that
    /// model chosen from the defaults when `assumes_defaults`.
    #[cfg(feature = "conformance")]
    pub(super) fn new(
        run: NewRun,
        claim: Option<(&str, Timestamp, &str)>,
        assumes_defaults: bool,
    ) -> Self {
        QueuedRun {
            run,
            claim: claim.map(|(owner, lease_until, model)| ClaimOwned {
                owner: owner.to_owned(),
                lease_until,
                model: model.to_owned(),
                mode: None,
                assumes_defaults,
            }),
        }
    }
}

/// A [`Claim`] that owns its text, to wait in a queue.
pub(super) struct ClaimOwned {
    owner: String,
    lease_until: Timestamp,
    model: String,
    mode: Option<String>,
    assumes_defaults: bool,
}

impl ClaimOwned {
    fn borrowed(&self) -> Claim<'_> {
        Claim {
            owner: &self.owner,
            lease_until: self.lease_until,
            model: &self.model,
            mode: self.mode.as_deref(),
            assumes_defaults: self.assumes_defaults,
        }
    }
}

/// One parameter array of [`STORE_RUNS_SQL`]: `value` of each insert.
fn column<'a, T>(inserts: &'a [RunInsert<'a>], value: impl Fn(&'a RunInsert<'a>) -> T) -> Vec<T> {
    inserts.iter().map(value).collect()
}

/// Stores `runs`, of any threads, in their order and in one statement:
/// every thread's lock taken first, in one order for all, then each run as
/// [`insert_run`] stores it (`hearth_store_runs`, migration 0019, which has
/// why). One run alone is [`insert_run`]'s statement.
pub(super) async fn store_together(
    pool: &deadpool_postgres::Pool,
    target: &str,
    runs: &[QueuedRun],
) -> Result<Vec<(CreateRunOutcome, Option<HistorySeen>)>> {
    let client = super::pooled(pool, target).await?;
    if let [one] = runs {
        let claim = one.claim.as_ref().map(ClaimOwned::borrowed);
        return Ok(vec![
            insert_run(&client, &one.run, claim.as_ref(), None).await?,
        ]);
    }
    let claims: Vec<Option<Claim<'_>>> = runs
        .iter()
        .map(|q| q.claim.as_ref().map(ClaimOwned::borrowed))
        .collect();
    let inserts = runs
        .iter()
        .zip(&claims)
        .map(|(q, claim)| RunInsert::new(&q.run, claim.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    let run_ids = column(&inserts, |i| i.run.run_id.as_str());
    let threads = column(&inserts, |i| i.run.thread_key.as_str());
    let users = column(&inserts, |i| i.run.user_key.as_str());
    let sources = column(&inserts, |i| i.run.source.as_str());
    let input = column(&inserts, |i| i.input.as_ref());
    let keys = column(&inserts, |i| i.run.idempotency_key.as_deref());
    let statuses = column(&inserts, |i| i.status);
    let created = column(&inserts, |i| i.run.created_at);
    let scopes = column(&inserts, |i| i.run.scope.as_deref());
    let roles = column(&inserts, |i| i.roles.as_str());
    let owners = column(&inserts, |i| i.owner);
    let leases = column(&inserts, |i| i.lease_until);
    let models = column(&inserts, |i| i.model);
    let modes = column(&inserts, |i| i.mode);
    let parents = column(&inserts, |i| i.run.parent_run_id.as_deref());
    let assumed = column(&inserts, |i| i.assumes_defaults);
    let stmt = client.prepare_cached(STORE_RUNS_SQL).await?;
    let rows = client
        .query(
            &stmt,
            &[
                &run_ids, &threads, &users, &sources, &input, &keys, &statuses, &created, &scopes,
                &roles, &owners, &leases, &models, &modes, &parents, &assumed,
            ],
        )
        .await?;
    let mut stored: Vec<Option<tokio_postgres::Row>> = runs.iter().map(|_| None).collect();
    for row in rows {
        let i: i32 = row.try_get(POSITION_COLUMN)?;
        let slot = usize::try_from(i - 1)
            .ok()
            .and_then(|i| stored.get_mut(i))
            .ok_or_else(|| StoreError::Corrupt(format!("a batch of runs answered for run {i}")))?;
        *slot = Some(row);
    }
    let mut out = Vec::with_capacity(runs.len());
    for (q, row) in runs.iter().zip(stored) {
        let seen = row.as_ref().map(seen_history).transpose()?;
        out.push((inserted_or_twin(&client, &q.run, row).await?, seen));
    }
    Ok(out)
}

/// Stores `run` with what its surface supplied (see [`insert_run`]), in a
/// statement of its own in autocommit, outside the queue of messages that
/// are stored together: such messages are few (an OpenAI-compatible
/// client's), and each waits for a model's answer anyway.
pub(super) async fn store_run_supplied(
    store: &PostgresStore,
    run: NewRun,
    claim: Option<&Claim<'_>>,
    supplied: &str,
) -> Result<(CreateRunOutcome, Option<HistorySeen>)> {
    let client = store.client().await?;
    insert_run(&client, &run, claim, Some(supplied)).await
}

#[cfg(test)]
mod tests {
    /// The function takes the lock class the comment and the code name
    /// (0018's, which 0016's calls now).
    #[test]
    fn the_function_takes_the_thread_lock_class() {
        let literal = super::THREAD_LOCK_CLASS.to_string();
        for sql in [
            include_str!("../../migrations/postgres/0016_store_run.sql"),
            include_str!("../../migrations/postgres/0018_store_run_sees_history.sql"),
            include_str!("../../migrations/postgres/0021_store_run_assuming_defaults.sql"),
            include_str!("../../migrations/postgres/0024_store_run_sees_newest_message.sql"),
        ] {
            assert!(
                sql.contains(&format!(
                    "pg_advisory_xact_lock({literal}, hashtext(p_thread_key))"
                )),
                "{literal}"
            );
        }
    }
}
