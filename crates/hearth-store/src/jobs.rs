//! Scheduled jobs: what fires, when it fires next, and what its last firing
//! made. The schedule itself is only text here; parsing it and computing
//! instants belongs to the runtime.

use crate::error::Result;

pub use hearth_core::records::jobs::{CatchUp, JobFiring, JobRecord, NextFiring};

/// Scheduled jobs.
#[async_trait::async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Stores a new job. An id already used is an error.
    async fn create_job(&self, job: JobRecord) -> Result<()>;

    /// One job by id.
    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>>;

    /// Every job, oldest first.
    async fn list_jobs(&self) -> Result<Vec<JobRecord>>;

    /// Deletes a job and returns it as it was; `None` when there is no such job.
    async fn delete_job(&self, id: &str) -> Result<Option<JobRecord>>;

    /// Records a firing (or a skip): the last run, and when `firing.next`
    /// is given the next instant and whether the job stays enabled. The
    /// last run only moves forward: a
    /// firing of an instant older than the recorded one leaves
    /// `last_run_at`/`last_run_id` alone. False when the job is gone.
    async fn record_job_firing(&self, firing: JobFiring) -> Result<bool>;
}
