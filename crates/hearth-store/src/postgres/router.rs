//! The router's counts on PostgreSQL. A run's observations are applied by
//! `finish_run` in the run's own transaction; they and ratings change the
//! counts through `shared::apply_arm_delta`, one atomic upsert each, never
//! a read-modify-write in Rust, so replicas counting the same arm at once
//! all count.

use super::shared::apply_arm_delta;
use super::{PostgresStore, wide};
use crate::codec::to_json;
use crate::error::Result;
use crate::records::StepRecord;
use crate::router::{ArmStats, RouterStore, RunFeedback, rating_changes};

/// Records a rating in one transaction. The run's feedback row is the
/// lock: the first rating inserts it (a concurrent first rating waits on its
/// key, then finds it), a later one reads it `FOR UPDATE`, so two ratings
/// of one run on two replicas are applied one after the other and each
/// takes back exactly what the one before it counted.
async fn rate_run(store: &PostgresStore, f: &RunFeedback) -> Result<Vec<ArmStats>> {
    let mut client = store.client().await?;
    let tx = client.transaction().await?;
    let first = tx
        .execute(
            "INSERT INTO router_feedback (run_id, model, task, rating, at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
            &[&f.run_id, &f.model, &f.task, &f.rating.as_str(), &f.at],
        )
        .await?
        == 1;
    let before = if first {
        None
    } else {
        tx.query_opt(
            "SELECT model, task, rating FROM router_feedback WHERE run_id = $1 FOR UPDATE",
            &[&f.run_id],
        )
        .await?
        .map(|row| -> Result<(String, String, String)> {
            Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
        })
        .transpose()?
    };
    let changes = rating_changes(before, f);
    if changes.is_empty() {
        // Nothing changes; the transaction only read.
        return Ok(changes);
    }
    if !first {
        tx.execute(
            "INSERT INTO router_feedback (run_id, model, task, rating, at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id) DO UPDATE SET \
             model = excluded.model, task = excluded.task, rating = excluded.rating, \
             at = excluded.at",
            &[&f.run_id, &f.model, &f.task, &f.rating.as_str(), &f.at],
        )
        .await?;
    }
    for change in &changes {
        apply_arm_delta(&tx, change).await?;
    }
    tx.commit().await?;
    Ok(changes)
}

#[async_trait::async_trait]
impl RouterStore for PostgresStore {
    async fn arm_stats(&self) -> Result<Vec<ArmStats>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT model, task, successes, failures, runs FROM router_arms \
                 ORDER BY model, task",
                &[],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ArmStats {
                    model: row.try_get(0)?,
                    task: row.try_get(1)?,
                    successes: row.try_get(2)?,
                    failures: row.try_get(3)?,
                    runs: row.try_get(4)?,
                })
            })
            .collect()
    }

    async fn rate_run(&self, feedback: RunFeedback) -> Result<Vec<ArmStats>> {
        rate_run(self, &feedback).await
    }

    async fn put_route_step(&self, step: StepRecord) -> Result<bool> {
        let payload = to_json(&step.payload, "route step payload")?;
        let client = self.client().await?;
        // Every routed run journals one.
        let stmt = client
            .prepare_cached(
                "INSERT INTO run_steps (run_id, idx, kind, name, status, started_at, \
                 finished_at, tokens, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, NULL, $8) \
                 ON CONFLICT (run_id, idx) DO NOTHING",
            )
            .await?;
        let written = client
            .execute(
                &stmt,
                &[
                    &step.run_id,
                    &wide(step.index),
                    &step.kind.as_str(),
                    &step.name,
                    &step.status.as_str(),
                    &step.started_at,
                    &step.finished_at,
                    &payload,
                ],
            )
            .await?;
        Ok(written == 1)
    }
}
