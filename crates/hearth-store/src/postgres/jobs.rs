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
impl JobStore for PostgresStore {
    async fn create_job(&self, job: JobRecord) -> Result<()> {
        Err(StoreError::Corrupt(
            "create_job is not yet on PostgreSQL".into(),
        ))
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>> {
        Err(StoreError::Corrupt(
            "get_job is not yet on PostgreSQL".into(),
        ))
    }

    async fn list_jobs(&self) -> Result<Vec<JobRecord>> {
        Err(StoreError::Corrupt(
            "list_jobs is not yet on PostgreSQL".into(),
        ))
    }

    async fn delete_job(&self, id: &str) -> Result<Option<JobRecord>> {
        Err(StoreError::Corrupt(
            "delete_job is not yet on PostgreSQL".into(),
        ))
    }

    async fn record_job_firing(&self, firing: JobFiring) -> Result<bool> {
        Err(StoreError::Corrupt(
            "record_job_firing is not yet on PostgreSQL".into(),
        ))
    }
}
