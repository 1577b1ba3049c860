//! This process among the replicas that share a store: its id, its
//! heartbeat, the duties only one replica performs at a time, and what
//! `GET /v1/cluster` shows.
//!
//! On SQLite the home lock makes the process alone: it is the one replica
//! and holds every duty. On PostgreSQL each replica heartbeats in the
//! `replicas` table at every upkeep round, and takes a duty (retention) by
//! a lease row that lapses when its holder dies.

use hearth_core::{Timestamp, now_ms};
use hearth_store::{ReplicaBeat, ReplicaRecord};
use tracing::{info, warn};

use crate::error::Result;
use crate::runtime::{Runtime, lease_ms};

/// The duty of the retention clean-up.
pub(crate) const RETENTION: &str = "retention";

/// The duty of firing the scheduled jobs.
pub(crate) const JOBS: &str = "jobs";

/// A new replica id: `<hostname>-<pid>-<4 random hex>`.
pub fn replica_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    // The random tail of a v7 UUID.
    let random = uuid::Uuid::now_v7();
    let bytes = random.as_bytes();
    format!(
        "{host}-{}-{:02x}{:02x}",
        std::process::id(),
        bytes[14],
        bytes[15]
    )
}

/// `GET /v1/cluster`: the store and the replicas alive on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// This process's id.
    pub this: String,
    /// The replicas, by id.
    pub replicas: Vec<ReplicaRecord>,
}

impl Runtime {
    /// This process's replica id (its lease owner id).
    pub fn replica(&self) -> &str {
        &self.inner.options.owner
    }

    /// The store's backend: `sqlite` or `postgres`.
    pub fn store_backend(&self) -> &'static str {
        self.inner.store.backend()
    }

    /// The replicas sharing the store: those seen within three leases on
    /// PostgreSQL; this process alone on SQLite.
    pub async fn cluster(&self) -> Result<ClusterView> {
        let now = now_ms();
        let this = self.inner.options.owner.clone();
        let backend = self.inner.store.backend();
        let Some(cluster) = self.inner.store.cluster() else {
            let mut holds: Vec<String> = self
                .channel_readiness()
                .into_iter()
                .filter_map(|(key, _)| key.strip_prefix("channel:").map(str::to_owned))
                .collect();
            holds.extend(["jobs", RETENTION, "sweep"].map(str::to_owned));
            holds.sort();
            return Ok(ClusterView {
                backend,
                this: this.clone(),
                replicas: vec![ReplicaRecord {
                    id: this,
                    addr: self.inner.options.addr.clone().unwrap_or_default(),
                    started_at: self.inner.options.started_at,
                    last_seen: now,
                    runs_executing: self.inner.executing().len() as u64,
                    holds,
                }],
            });
        };
        let since = now - 3 * lease_ms(&self.inner.options);
        Ok(ClusterView {
            backend,
            this,
            replicas: cluster.replicas(since, now).await?,
        })
    }

    /// Tells the other replicas this one is alive (on a shared store).
    pub(crate) async fn heartbeat(&self) {
        let Some(cluster) = self.inner.store.cluster() else {
            return;
        };
        let options = &self.inner.options;
        let beat = ReplicaBeat {
            id: options.owner.clone(),
            addr: options.addr.clone().unwrap_or_default(),
            started_at: options.started_at,
            at: now_ms(),
            runs_executing: self.inner.executing().len() as u64,
        };
        if let Err(e) = cluster.heartbeat(&beat).await {
            warn!(error = %e, "could not record this replica's heartbeat");
        }
    }

    /// Whether this replica performs `duty` now: always when alone with the
    /// store; on a shared store when it holds (or just took) the duty's
    /// lease, renewed for another lease at each call.
    pub(crate) async fn holds_duty(&self, duty: &str, now: Timestamp) -> bool {
        match self.take_duty(duty, now).await {
            Ok(held) => held,
            Err(e) => {
                warn!(error = %e, duty, "could not take or renew a duty's lease");
                false
            }
        }
    }

    /// Whether other replicas share this one's store (PostgreSQL), so that
    /// a duty (a channel's connection) is held by one of them at a time.
    pub fn shares_store(&self) -> bool {
        self.inner.store.cluster().is_some()
    }

    /// How long a lease lasts (`[store] lease_secs`): a holder renews its
    /// duties well within it, and a dead holder's lapse after it.
    pub fn lease(&self) -> std::time::Duration {
        self.inner.options.lease
    }

    /// Takes or renews the lease of `duty` for this replica, until a lease
    /// after `now`: true when this replica holds it now (always when alone
    /// with the store), false when another replica does; an error when the
    /// store could not say (the caller decides how long its old lease
    /// still covers it).
    pub async fn take_duty(&self, duty: &str, now: Timestamp) -> Result<bool> {
        let Some(cluster) = self.inner.store.cluster() else {
            return Ok(true);
        };
        let until = now + lease_ms(&self.inner.options);
        Ok(cluster
            .acquire_lease(duty, &self.inner.options.owner, until, now)
            .await?)
    }

    /// Gives up `duty` at a clean stop, so another replica takes it at once
    /// instead of when the lease lapses. Nothing when alone with the store.
    pub async fn release_duty(&self, duty: &str) {
        if let Some(cluster) = self.inner.store.cluster()
            && let Err(e) = cluster.release_lease(duty, &self.inner.options.owner).await
        {
            warn!(error = %e, duty, "could not release a duty's lease; it lapses on its own");
        }
    }

    /// The replica that holds `duty` now, among those alive; `None` when
    /// none does (or alone with the store, where this process holds all).
    pub async fn duty_holder(&self, duty: &str) -> Result<Option<String>> {
        let Some(cluster) = self.inner.store.cluster() else {
            return Ok(None);
        };
        let now = now_ms();
        let since = now - 3 * lease_ms(&self.inner.options);
        Ok(cluster
            .replicas(since, now)
            .await?
            .into_iter()
            .find(|r| r.holds.iter().any(|h| h == duty))
            .map(|r| r.id))
    }

    /// Leaves the cluster at a clean shutdown: the row and leases go at
    /// once instead of when they lapse.
    pub(crate) async fn leave_cluster(&self) {
        // Runs claimed and not started go to another replica now; those
        // still executing keep their lease until it lapses, so no one else
        // runs them while this process may.
        if let Some(cluster) = self.inner.store.cluster() {
            match cluster
                .release_run_leases(&self.inner.options.owner, &self.inner.executing())
                .await
            {
                Ok(0) => {}
                Ok(n) => info!(runs = n, "gave up the leases of runs not started"),
                Err(e) => {
                    warn!(error = %e, "could not give up run leases; they lapse on their own")
                }
            }
        }
        if let Some(cluster) = self.inner.store.cluster()
            && let Err(e) = cluster.leave(&self.inner.options.owner).await
        {
            warn!(error = %e, "could not leave the cluster; its leases lapse on their own");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::replica_id;

    #[test]
    fn a_replica_id_is_host_pid_and_four_hex_digits() {
        let id = replica_id();
        let mut parts = id.rsplitn(3, '-');
        let hex = parts.next().unwrap();
        let pid = parts.next().unwrap();
        assert_eq!(hex.len(), 4);
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(pid, std::process::id().to_string());
        assert!(!parts.next().unwrap().is_empty(), "{id}");
    }
}
