//! The router's memory: per (arm, task class) counts of successes, failures
//! and routed runs, and the rating given to runs. Counts, not posteriors:
//! the priors live in config, so changing them applies to what was learnt.

use crate::error::Result;

pub use hearth_core::records::router::{ArmStats, Rating, RunFeedback};

/// The router's counts.
#[async_trait::async_trait]
pub trait RouterStore: Send + Sync + 'static {
    /// Every (arm, task class) with what was observed of it.
    async fn arm_stats(&self) -> Result<Vec<ArmStats>>;

    /// Records a rating of a run: one observation on its arm and task. A
    /// run has at most one rating: rating it again replaces the first
    /// (the same rating twice changes nothing). Returns the changes made to
    /// the counts (none when nothing changed).
    async fn rate_run(&self, feedback: RunFeedback) -> Result<Vec<ArmStats>>;

    /// Journals a run's `route` step unless its index is taken (a run
    /// resumed after a crash keeps the journal it has). Returns whether it
    /// was written. Its loss in a power cut is harmless, so it may commit
    /// without a sync of its own.
    async fn put_route_step(&self, step: crate::records::StepRecord) -> Result<bool>;
}

/// `(successes, failures)` that one rating counts for.
fn counts(rating: Rating) -> (i64, i64) {
    match rating {
        Rating::Up => (1, 0),
        Rating::Down => (0, 1),
    }
}

/// What rating a run as `f` changes in the arms' counts, given the rating
/// stored for it before (`(model, task, rating)`): nothing when it is the
/// same rating of the same arm; else the earlier rating taken back from the
/// arm it was counted in (when that is another arm) and the new one counted,
/// net, in `f`'s arm. Each backend applies these in the rating's transaction.
pub(crate) fn rating_changes(
    before: Option<(String, String, String)>,
    f: &RunFeedback,
) -> Vec<ArmStats> {
    let (mut successes, mut failures) = counts(f.rating);
    let mut changes = Vec::with_capacity(2);
    if let Some((model, task, rating)) = before {
        let same_arm = model == f.model && task == f.task;
        if same_arm && rating == f.rating.as_str() {
            return changes;
        }
        let old = if rating == Rating::Up.as_str() {
            Rating::Up
        } else {
            Rating::Down
        };
        let (s, fl) = counts(old);
        if same_arm {
            successes -= s;
            failures -= fl;
        } else {
            changes.push(ArmStats {
                model,
                task,
                successes: -s,
                failures: -fl,
                runs: 0,
            });
        }
    }
    changes.push(ArmStats {
        model: f.model.clone(),
        task: f.task.clone(),
        successes,
        failures,
        runs: 0,
    });
    changes
}
