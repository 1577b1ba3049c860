//! The router's counts on SQLite. A run's observations are applied by
//! `finish_run` in the run's own transaction (see `apply`).

use rusqlite::{OptionalExtension, params};

use super::SqliteStore;
use super::db::Db;
use crate::error::Result;
use crate::records::StepRecord;
use crate::router::{ArmStats, RouterStore, RunFeedback, rating_changes};

/// Counts per (arm, task class), and one rating per run.
pub(crate) const MIGRATION_V13: &str = "
CREATE TABLE IF NOT EXISTS router_arms (
    model TEXT NOT NULL,
    task TEXT NOT NULL,
    successes INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    runs INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model, task)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS router_feedback (
    run_id TEXT PRIMARY KEY NOT NULL,
    model TEXT NOT NULL,
    task TEXT NOT NULL,
    rating TEXT NOT NULL,
    at INTEGER NOT NULL
);
";

/// Adds `delta` to its arm's counts (inside the caller's transaction);
/// counts never go below zero.
pub(crate) fn apply(db: &mut Db<'_>, delta: &ArmStats) -> Result<()> {
    db.stmt(
        "INSERT INTO router_arms (model, task, successes, failures, runs) \
         VALUES (?1, ?2, MAX(?3, 0), MAX(?4, 0), MAX(?5, 0)) \
         ON CONFLICT (model, task) DO UPDATE SET \
         successes = MAX(successes + ?3, 0), failures = MAX(failures + ?4, 0), \
         runs = MAX(runs + ?5, 0)",
    )?
    .execute(params![
        delta.model,
        delta.task,
        delta.successes,
        delta.failures,
        delta.runs
    ])?;
    Ok(())
}

fn arm_stats(db: &mut Db<'_>) -> Result<Vec<ArmStats>> {
    let stmt = db.stmt(
        "SELECT model, task, successes, failures, runs FROM router_arms ORDER BY model, task",
    )?;
    let mut out = Vec::new();
    let mut rows = stmt.query([])?;
    while let Some(row) = rows.next()? {
        out.push(ArmStats {
            model: row.get(0)?,
            task: row.get(1)?,
            successes: row.get(2)?,
            failures: row.get(3)?,
            runs: row.get(4)?,
        });
    }
    Ok(out)
}

fn rate_run(db: &mut Db<'_>, f: &RunFeedback) -> Result<Vec<ArmStats>> {
    let before: Option<(String, String, String)> = db
        .stmt("SELECT model, task, rating FROM router_feedback WHERE run_id = ?1")?
        .query_row(params![f.run_id], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let changes = rating_changes(before, f);
    if changes.is_empty() {
        return Ok(changes);
    }
    db.stmt(
        "INSERT INTO router_feedback (run_id, model, task, rating, at) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT (run_id) DO UPDATE SET model = excluded.model, task = excluded.task, \
         rating = excluded.rating, at = excluded.at",
    )?
    .execute(params![f.run_id, f.model, f.task, f.rating.as_str(), f.at])?;
    for change in &changes {
        apply(db, change)?;
    }
    Ok(changes)
}

fn put_route_step(db: &mut Db<'_>, step: &StepRecord) -> Result<bool> {
    let payload = super::rows::to_json(&step.payload, "route step payload")?;
    let written = db
        .stmt(
            "INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, finished_at, \
             tokens, payload) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8) \
             ON CONFLICT (run_id, idx) DO NOTHING",
        )?
        .execute(params![
            step.run_id,
            step.index,
            step.kind.as_str(),
            step.name,
            step.status.as_str(),
            step.started_at,
            step.finished_at,
            payload
        ])?;
    Ok(written == 1)
}

#[async_trait::async_trait]
impl RouterStore for SqliteStore {
    async fn arm_stats(&self) -> Result<Vec<ArmStats>> {
        self.read(arm_stats).await
    }

    async fn rate_run(&self, feedback: RunFeedback) -> Result<Vec<ArmStats>> {
        self.write(move |db| rate_run(db, &feedback)).await
    }

    async fn put_route_step(&self, step: StepRecord) -> Result<bool> {
        self.write_lazy(move |db| put_route_step(db, &step)).await
    }
}
