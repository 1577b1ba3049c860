//! Recovery and upkeep: runs a dead process left unfinished are queued again,
//! the leases of the runs this process executes are renewed, and in-memory
//! state that outlived its use is dropped.
//!
//! Queuing a run here never decides that it executes: the store's atomic
//! claim does. So a sweep that races ingest or a follow-up, or another
//! process, cannot make a run execute twice.

use std::sync::Arc;

use hearth_core::{RunStatus, now_ms};
use tracing::{info, warn};

use crate::error::Result;
use crate::runtime::{Runtime, lease_ms};

impl Runtime {
    /// Re-queues every run a previous process left unfinished, then starts the
    /// lease heartbeat, the periodic sweep, the retention job and the chat
    /// surface. Returns how many runs were queued again.
    pub async fn start(&self) -> Result<usize> {
        // Before recovery: a recovered run's answer must find the progress
        // message the previous process showed, to clean it up, and a
        // recovered run that fails is alerted about too.
        if let Some(surface) = self.inner.surface.get() {
            surface.restore(self).await;
        }
        self.inner
            .incognito
            .load(self.inner.store.incognito_threads().await?);
        // Recovered runs in a guild are offered its enabled apps' tools.
        self.refresh_app_tools().await;
        if self.inner.options.sole_owner {
            // The home is locked by this process: whoever held these leases is dead.
            let released = self
                .inner
                .store
                .release_foreign_leases(&self.inner.options.owner)
                .await?;
            if released > 0 {
                info!(runs = released, "released the leases of a previous process");
            }
        }
        self.heartbeat().await;
        self.start_budget().await?;
        // Listening before the first pull: work queued in between wakes it.
        self.start_wakeups();
        let recovered = self.sweep().await?;
        if recovered > 0 {
            info!(runs = recovered, "recovered unfinished runs");
        }
        self.start_retention();
        self.start_jobs();
        self.inner.memory.start();
        // After recovery: replies left in the outbox by a previous process
        // go out; their runs are not executed again.
        if let Some(surface) = self.inner.surface.get() {
            surface.start(self.clone());
        }
        let weak = Arc::downgrade(&self.inner);
        let every = self.inner.options.sweep_every;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                Runtime { inner }.upkeep().await;
            }
        });
        Ok(recovered)
    }

    /// One round of the periodic work.
    async fn upkeep(&self) {
        self.heartbeat().await;
        let inner = &self.inner;
        let executing = inner.executing();
        if !executing.is_empty() {
            let until = now_ms() + lease_ms(&inner.options);
            if let Err(e) = inner
                .store
                .renew_leases(&inner.options.owner, &executing, until)
                .await
            {
                warn!(error = %e, "could not renew run leases");
            }
        }
        if inner.store.cluster().is_some() {
            // A lapsed lease notifies nobody: each round pulls once.
            self.request_pull();
            self.settle_followed().await;
            self.renew_incognito().await;
        } else if !self.is_shutting_down()
            && let Err(e) = self.sweep().await
        {
            warn!(error = %e, "recovery sweep failed");
        }
        inner.bus.evict_expired();
        let scheduler = &inner.scheduler;
        if let Some(store) = inner.incognito.purge_if_idle(|id| scheduler.knows(id)) {
            // Closing an SQLite database joins its threads: not on the executor.
            tokio::task::spawn_blocking(move || drop(store));
        }
    }

    /// Queues the unfinished runs this process does not have in its queues
    /// and nobody else holds: queued ones, and running ones whose lease
    /// expired or is this process's own (its end could not be stored).
    /// On a shared store the runs are claimed one by one with the store's
    /// `claim_next` instead (see `wakeups.rs`).
    pub(crate) async fn sweep(&self) -> Result<usize> {
        if self.inner.store.cluster().is_some() {
            return self.pull().await;
        }
        let now = now_ms();
        let owner = self.inner.options.owner.as_str();
        let mut n = 0;
        for run in self.inner.store.unfinished_runs().await? {
            if self.inner.scheduler.knows(&run.run_id) {
                continue;
            }
            let free = run.status == RunStatus::Queued
                || run.lease_owner.as_deref().is_none_or(|o| o == owner)
                || run.lease_until.is_none_or(|t| t < now);
            if !free {
                continue;
            }
            if run.source == crate::direct::DIRECT_SOURCE {
                self.inner.direct.put(&run.run_id);
            }
            self.inner.families.resumed(&run);
            self.inner.bus.open(&run.run_id, run.status);
            self.schedule(&run.thread_key, &run.run_id);
            n += 1;
        }
        Ok(n)
    }

    /// Runs the retention clean-up now (in the background) and every
    /// `RETENTION_EVERY`, for as long as the runtime lives.
    fn start_retention(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(crate::retention::RETENTION_EVERY);
            // After a long pause (a suspended laptop) one round is enough.
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let store = inner.store.clone();
                // One replica at a time cleans a shared store.
                if !(Runtime { inner })
                    .holds_duty(crate::cluster::RETENTION, now_ms())
                    .await
                {
                    continue;
                }
                if let Err(e) = crate::retention::run_once(store.as_ref(), now_ms()).await {
                    warn!(error = %e, "retention clean-up failed; retrying at the next round");
                }
            }
        });
    }
}
