//! STUB (being ported from `sqlite/`): every method fails until its
//! PostgreSQL version is written. Replace this whole file.
#![allow(unused_imports, unused_variables)]

use hearth_core::{Message, Timestamp};

use super::PostgresStore;
use crate::channels::*;
use crate::confirmations::*;
use crate::error::{Result, StoreError};
use crate::grants::*;
use crate::history::*;
use crate::jobs::*;
use crate::memory::*;
use crate::records::*;
use crate::retention::*;
use crate::router::*;
use crate::runs::*;
use crate::secret_store::*;
use crate::threads::*;
use crate::tokens::*;
use crate::usage::*;

#[async_trait::async_trait]
impl RunStore for PostgresStore {
    async fn create_run(&self, run: NewRun) -> Result<CreateRunOutcome> {
        Err(StoreError::Corrupt(
            "create_run is not yet on PostgreSQL".into(),
        ))
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>> {
        Err(StoreError::Corrupt(
            "get_run is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunRecord>> {
        Err(StoreError::Corrupt(
            "list_runs is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_threads(&self, limit: u32) -> Result<Vec<ThreadActivity>> {
        Err(StoreError::Corrupt(
            "list_threads is not yet on PostgreSQL".into(),
        ))
    }

    async fn run_stats(&self, scope: &str, since: Timestamp, top: u32) -> Result<RunStats> {
        Err(StoreError::Corrupt(
            "run_stats is not yet on PostgreSQL".into(),
        ))
    }

    async fn unfinished_runs(&self) -> Result<Vec<RunRecord>> {
        Err(StoreError::Corrupt(
            "unfinished_runs is not yet on PostgreSQL".into(),
        ))
    }

    async fn claim_run(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<RunRecord>> {
        Err(StoreError::Corrupt(
            "claim_run is not yet on PostgreSQL".into(),
        ))
    }

    async fn claim_run_with_model(
        &self,
        run_id: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
        model: &str,
    ) -> Result<Option<RunRecord>> {
        Err(StoreError::Corrupt(
            "claim_run_with_model is not yet on PostgreSQL".into(),
        ))
    }

    async fn set_run_model(&self, run_id: &str, model: &str) -> Result<()> {
        Err(StoreError::Corrupt(
            "set_run_model is not yet on PostgreSQL".into(),
        ))
    }

    async fn release_foreign_leases(&self, owner: &str) -> Result<u64> {
        Err(StoreError::Corrupt(
            "release_foreign_leases is not yet on PostgreSQL".into(),
        ))
    }

    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_until: Timestamp,
    ) -> Result<u64> {
        Err(StoreError::Corrupt(
            "renew_leases is not yet on PostgreSQL".into(),
        ))
    }

    async fn put_step(&self, step: StepRecord) -> Result<()> {
        Err(StoreError::Corrupt(
            "put_step is not yet on PostgreSQL".into(),
        ))
    }

    async fn steps(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        Err(StoreError::Corrupt("steps is not yet on PostgreSQL".into()))
    }

    async fn add_steer(&self, run_id: &str, text: &str, at: Timestamp) -> Result<SteerRecord> {
        Err(StoreError::Corrupt(
            "add_steer is not yet on PostgreSQL".into(),
        ))
    }

    async fn steers(&self, run_id: &str) -> Result<Vec<SteerRecord>> {
        Err(StoreError::Corrupt(
            "steers is not yet on PostgreSQL".into(),
        ))
    }

    async fn finish_run(&self, finish: RunFinish) -> Result<bool> {
        Err(StoreError::Corrupt(
            "finish_run is not yet on PostgreSQL".into(),
        ))
    }
}
