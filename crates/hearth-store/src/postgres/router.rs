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
impl RouterStore for PostgresStore {
    async fn arm_stats(&self) -> Result<Vec<ArmStats>> {
        Err(StoreError::Corrupt(
            "arm_stats is not yet on PostgreSQL".into(),
        ))
    }

    async fn rate_run(&self, feedback: RunFeedback) -> Result<Vec<ArmStats>> {
        Err(StoreError::Corrupt(
            "rate_run is not yet on PostgreSQL".into(),
        ))
    }

    async fn put_route_step(&self, step: crate::records::StepRecord) -> Result<bool> {
        Err(StoreError::Corrupt(
            "put_route_step is not yet on PostgreSQL".into(),
        ))
    }
}
