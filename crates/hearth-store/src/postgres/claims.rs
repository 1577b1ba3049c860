//! Claims of the next runnable run, for replicas that pull work from the
//! shared store instead of reading every unfinished run (issue 19).
//!
//! One statement per claim: the subquery picks the oldest claimable run and
//! locks it `FOR UPDATE SKIP LOCKED`, so concurrent claimers each lock a
//! different candidate instead of queuing on the same one; the outer `UPDATE`
//! re-checks claimability on the row as the lock found it. A run is
//! claimable when it is queued, or unfinished with a lease that lapsed (its
//! replica died), no earlier run of its thread is unfinished, and no ended
//! run of its thread still has an unexpired lease: a run cancelled by a
//! replica that was not executing it keeps its executor's lease until that
//! replica stopped it and let go (migration 0023), so that the thread's
//! next run does not start beside it.
//!
//! Why SKIP LOCKED cannot let two runs of one thread run at once: a run is a
//! candidate only when every earlier run of its thread is finished in the
//! claimer's snapshot, and a run never goes back from finished to
//! unfinished, so a stale snapshot can only hide a candidate, never make
//! one. A skipped (locked) run stays unfinished for the others, so the runs
//! behind it on its thread are not candidates either. The lapsed run itself
//! has no earlier unfinished run (it was claimable when it started), so the
//! `NOT EXISTS` never hides it behind itself.
//!
//! A claimed run becomes watched when it had another holder (or none): the
//! replica that stored it or held it before may have a log of it, which its
//! end must reach (`hearth_ended`, migration 0015).

use hearth_core::Timestamp;

use super::PostgresStore;
use super::rows::{self, run_columns};
use crate::cluster::Claimed;
use crate::error::Result;

/// The claim, with `{thread}` the extra condition on the candidate's
/// thread (empty for any thread). `$1` owner, `$2` lease until, `$3` now.
macro_rules! claim_sql {
    ($thread:literal) => {
        concat!(
            "UPDATE runs SET status = CASE status WHEN 'awaiting_confirmation' THEN status \
             ELSE 'running' END, lease_owner = $1, lease_until = $2, updated_at = $3, \
             watched = watched OR lease_owner IS DISTINCT FROM $1 \
             WHERE run_id = (SELECT c.run_id FROM runs AS c \
             WHERE c.status IN ('queued', 'running', 'awaiting_confirmation') \
             AND (c.status = 'queued' OR c.lease_owner IS NULL OR c.lease_until IS NULL \
             OR c.lease_until < $3) ",
            $thread,
            " AND NOT EXISTS (SELECT 1 FROM runs AS earlier \
             WHERE earlier.thread_key = c.thread_key AND earlier.seq < c.seq \
             AND earlier.status IN ('queued', 'running', 'awaiting_confirmation')) \
             AND NOT EXISTS (SELECT 1 FROM runs AS held WHERE held.thread_key = c.thread_key \
             AND held.lease_owner IS NOT NULL AND held.lease_until >= $3 \
             AND held.status IN ('succeeded', 'failed', 'cancelled')) \
             ORDER BY c.seq LIMIT 1 FOR UPDATE SKIP LOCKED) \
             AND (status = 'queued' OR (status IN ('running', 'awaiting_confirmation') \
             AND (lease_owner IS NULL OR lease_until IS NULL OR lease_until < $3))) \
             RETURNING ",
            run_columns!(),
            ", (SELECT s.body::text FROM run_supplied AS s WHERE s.run_id = runs.run_id)"
        )
    };
}

/// The column of a claim's row after the run's: what the run's surface
/// supplied (migration 0022), if anything.
const SUPPLIED_COLUMN: usize = 22;

/// Claims the oldest claimable run (of `thread_key` when given), with what
/// its surface supplied when it was stored queued with any.
pub(crate) async fn claim_next(
    store: &PostgresStore,
    thread_key: Option<&str>,
    owner: &str,
    lease_until: Timestamp,
    now: Timestamp,
) -> Result<Option<Claimed>> {
    let client = store.client().await?;
    let row = match thread_key {
        None => {
            let stmt = client.prepare_cached(claim_sql!("")).await?;
            client
                .query_opt(&stmt, &[&owner, &lease_until, &now])
                .await?
        }
        Some(thread) => {
            let stmt = client
                .prepare_cached(claim_sql!("AND c.thread_key = $4"))
                .await?;
            client
                .query_opt(&stmt, &[&owner, &lease_until, &now, &thread])
                .await?
        }
    };
    row.map(|row| {
        Ok(Claimed {
            run: rows::run(&row)?,
            supplied: rows::col(&row, SUPPLIED_COLUMN)?,
        })
    })
    .transpose()
}

/// Gives up `owner`'s leases on runs other than `keep` (on ended runs too:
/// one ended elsewhere holds its thread until let go); the update trigger
/// tells the other replicas.
pub(crate) async fn release_run_leases(
    store: &PostgresStore,
    owner: &str,
    keep: &[String],
) -> Result<u64> {
    let client = store.client().await?;
    Ok(client
        .execute(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL \
             WHERE lease_owner = $1 AND NOT (run_id = ANY($2))",
            &[&owner, &keep],
        )
        .await?)
}

/// Gives up `owner`'s lease on the ended run `run_id`; the update trigger
/// wakes the replicas when its thread has a queued run (migration 0023).
pub(crate) async fn let_go(store: &PostgresStore, run_id: &str, owner: &str) -> Result<bool> {
    let client = store.client().await?;
    let stmt = client
        .prepare_cached(
            "UPDATE runs SET lease_owner = NULL, lease_until = NULL \
             WHERE run_id = $1 AND lease_owner = $2 \
             AND status IN ('succeeded', 'failed', 'cancelled')",
        )
        .await?;
    Ok(client.execute(&stmt, &[&run_id, &owner]).await? == 1)
}
