//! Scheduled jobs on SQLite.

use rusqlite::{OptionalExtension, Row, params};

use super::SqliteStore;
use super::db::Db;
use super::rows::col;
use crate::error::{Result, StoreError};
use crate::jobs::{CatchUp, JobFiring, JobRecord, JobStore};

/// The jobs table. `next_run_at` is what the scheduler reads; the scheduled
/// instants themselves are remembered by the runs' idempotency keys.
pub(crate) const MIGRATION_V12: &str = "
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    thread_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    text TEXT NOT NULL,
    catch_up TEXT NOT NULL,
    next_run_at INTEGER,
    last_run_at INTEGER,
    last_run_id TEXT,
    enabled INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
";

/// The `jobs` columns in the order [`job`] reads them.
macro_rules! job_columns {
    () => {
        "id, name, schedule, timezone, thread_key, user_key, text, catch_up, next_run_at, \
         last_run_at, last_run_id, enabled, created_at"
    };
}

fn job(row: &Row<'_>) -> Result<JobRecord> {
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

fn create_job(db: &mut Db<'_>, j: &JobRecord) -> Result<()> {
    db.stmt(concat!(
        "INSERT INTO jobs (",
        job_columns!(),
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
    ))?
    .execute(params![
        j.id,
        j.name,
        j.schedule,
        j.timezone,
        j.thread_key,
        j.user_key,
        j.text,
        j.catch_up.as_str(),
        j.next_run_at,
        j.last_run_at,
        j.last_run_id,
        j.enabled,
        j.created_at
    ])?;
    Ok(())
}

fn get_job(db: &mut Db<'_>, id: &str) -> Result<Option<JobRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs WHERE id = ?1"
    ))?;
    let mut found = stmt.query(params![id])?;
    match found.next()? {
        Some(row) => Ok(Some(job(row)?)),
        None => Ok(None),
    }
}

fn list_jobs(db: &mut Db<'_>) -> Result<Vec<JobRecord>> {
    let stmt = db.stmt(concat!(
        "SELECT ",
        job_columns!(),
        " FROM jobs ORDER BY created_at, id"
    ))?;
    let mut out = Vec::new();
    let mut found = stmt.query([])?;
    while let Some(row) = found.next()? {
        out.push(job(row)?);
    }
    Ok(out)
}

fn delete_job(db: &mut Db<'_>, id: &str) -> Result<Option<JobRecord>> {
    let Some(found) = get_job(db, id)? else {
        return Ok(None);
    };
    db.stmt("DELETE FROM jobs WHERE id = ?1")?
        .execute(params![id])?;
    Ok(Some(found))
}

fn record_job_firing(db: &mut Db<'_>, f: &JobFiring) -> Result<bool> {
    let changed = match f.next {
        Some(next) => db
            .stmt("UPDATE jobs SET next_run_at = ?2, enabled = ?3 WHERE id = ?1")?
            .execute(params![f.job_id, next.next_run_at, next.enabled])?,
        None => usize::from(
            db.stmt("SELECT 1 FROM jobs WHERE id = ?1")?
                .query_row(params![f.job_id], |_| Ok(()))
                .optional()?
                .is_some(),
        ),
    };
    if let Some((at, run_id)) = &f.fired {
        db.stmt(
            "UPDATE jobs SET last_run_at = ?2, last_run_id = ?3 \
             WHERE id = ?1 AND (last_run_at IS NULL OR last_run_at <= ?2)",
        )?
        .execute(params![f.job_id, at, run_id])?;
    }
    Ok(changed == 1)
}

#[async_trait::async_trait]
impl JobStore for SqliteStore {
    async fn create_job(&self, job: JobRecord) -> Result<()> {
        self.write(move |db| create_job(db, &job)).await
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>> {
        let id = id.to_owned();
        self.read(move |db| get_job(db, &id)).await
    }

    async fn list_jobs(&self) -> Result<Vec<JobRecord>> {
        self.read(list_jobs).await
    }

    async fn delete_job(&self, id: &str) -> Result<Option<JobRecord>> {
        let id = id.to_owned();
        self.write(move |db| delete_job(db, &id)).await
    }

    async fn record_job_firing(&self, firing: JobFiring) -> Result<bool> {
        self.write(move |db| record_job_firing(db, &firing)).await
    }
}
