//! Scheduled jobs on PostgreSQL.
//!
//! Several replicas may record firings of one job at once (the ticker on
//! one, a firing by hand on another, or two tickers across a lease
//! hand-over). Each write is one statement on the job's row, so PostgreSQL's
//! row lock orders them and each re-reads the row the one before it left:
//! the last run only ever moves forward, and a deleted job is returned once.

use tokio_postgres::Row;

use super::PostgresStore;
use super::rows::col;
use crate::error::{Result, StoreError};
use crate::jobs::{CatchUp, JobFiring, JobRecord, JobStore};

/// The `jobs` columns in the order [`job`] reads them.
macro_rules! job_columns {
    () => {
        "id, name, schedule, timezone, thread_key, user_key, text, catch_up, next_run_at, \
         last_run_at, last_run_id, enabled, created_at"
    };
}

fn job(row: &Row) -> Result<JobRecord> {
    let catch_up: String = col(row, 7)?;
    Ok(JobRecord {
        id: col(row, 0)?,
        name: col(row, 1)?,
        schedule: col(row, 2)?,
        timezone: col(row, 3)?,
        thread_key: col(row, 4)?,
        user_key: col(row, 5)?,
        text: col(row, 6)?,
        catch_up: CatchUp::parse(&catch_up)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown catch_up {catch_up:?}")))?,
        next_run_at: col(row, 8)?,
        last_run_at: col(row, 9)?,
        last_run_id: col(row, 10)?,
        enabled: col(row, 11)?,
        created_at: col(row, 12)?,
    })
}

#[async_trait::async_trait]
impl JobStore for PostgresStore {
    async fn create_job(&self, j: JobRecord) -> Result<()> {
        let client = self.client().await?;
        // A taken id fails on the primary key, as the trait asks.
        client
            .execute(
                concat!(
                    "INSERT INTO jobs (",
                    job_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
                ),
                &[
                    &j.id,
                    &j.name,
                    &j.schedule,
                    &j.timezone,
                    &j.thread_key,
                    &j.user_key,
                    &super::storable(&j.text),
                    &j.catch_up.as_str(),
                    &j.next_run_at,
                    &j.last_run_at,
                    &j.last_run_id,
                    &j.enabled,
                    &j.created_at,
                ],
            )
            .await?;
        Ok(())
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>> {
        let client = self.client().await?;
        client
            .query_opt(
                concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1"),
                &[&id],
            )
            .await?
            .as_ref()
            .map(job)
            .transpose()
    }

    async fn list_jobs(&self) -> Result<Vec<JobRecord>> {
        let client = self.client().await?;
        // The ticker reads this on every pass.
        let stmt = client
            .prepare_cached(concat!(
                "SELECT ",
                job_columns!(),
                " FROM jobs ORDER BY created_at, id"
            ))
            .await?;
        let rows = client.query(&stmt, &[]).await?;
        rows.iter().map(job).collect()
    }

    async fn delete_job(&self, id: &str) -> Result<Option<JobRecord>> {
        let client = self.client().await?;
        // One statement: of two concurrent deletes, only one gets the row.
        client
            .query_opt(
                concat!("DELETE FROM jobs WHERE id = $1 RETURNING ", job_columns!()),
                &[&id],
            )
            .await?
            .as_ref()
            .map(job)
            .transpose()
    }

    async fn record_job_firing(&self, f: JobFiring) -> Result<bool> {
        let client = self.client().await?;
        let (has_next, next_run_at, enabled) = match f.next {
            Some(next) => (true, next.next_run_at, next.enabled),
            None => (false, None, false),
        };
        let (fired_at, run_id) = match &f.fired {
            Some((at, run_id)) => (Some(*at), Some(run_id.as_str())),
            None => (None, None),
        };
        // One UPDATE for the whole firing: the schedule as the ticker
        // planned it (when given), and the last run only when it is not
        // older than the one recorded. Every CASE reads the row as it was
        // before this statement, and a concurrent firing's statement waits
        // for this one and then evaluates against what it wrote. The row
        // count is whether the job exists.
        let stmt = client
            .prepare_cached(
                "UPDATE jobs SET \
                 next_run_at = CASE WHEN $2 THEN $3 ELSE next_run_at END, \
                 enabled = CASE WHEN $2 THEN $4 ELSE enabled END, \
                 last_run_at = CASE WHEN $5::bigint IS NOT NULL \
                     AND (last_run_at IS NULL OR last_run_at <= $5::bigint) \
                     THEN $5::bigint ELSE last_run_at END, \
                 last_run_id = CASE WHEN $5::bigint IS NOT NULL \
                     AND (last_run_at IS NULL OR last_run_at <= $5::bigint) \
                     THEN $6 ELSE last_run_id END \
                 WHERE id = $1",
            )
            .await?;
        let changed = client
            .execute(
                &stmt,
                &[
                    &f.job_id,
                    &has_next,
                    &next_run_at,
                    &enabled,
                    &fired_at,
                    &run_id,
                ],
            )
            .await?;
        Ok(changed == 1)
    }
}
