//! Replicas and duty leases on PostgreSQL.

use hearth_core::Timestamp;

use super::PostgresStore;
use super::rows::{col, unsigned};
use super::wide;
use crate::cluster::{ClusterStore, ReplicaBeat, ReplicaRecord, Wake};
use crate::error::Result;

#[async_trait::async_trait]
impl ClusterStore for PostgresStore {
    async fn heartbeat(&self, beat: &ReplicaBeat) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO replicas (id, addr, started_at, last_seen, runs_executing) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (id) DO UPDATE SET addr = excluded.addr, \
                 last_seen = excluded.last_seen, runs_executing = excluded.runs_executing",
            )
            .await?;
        client
            .execute(
                &stmt,
                &[
                    &beat.id,
                    &beat.addr,
                    &beat.started_at,
                    &beat.at,
                    &wide(beat.runs_executing),
                ],
            )
            .await?;
        Ok(())
    }

    async fn replicas(&self, since: Timestamp, now: Timestamp) -> Result<Vec<ReplicaRecord>> {
        let client = self.client().await?;
        let rows = client
            .query(
                "SELECT r.id, r.addr, r.started_at, r.last_seen, r.runs_executing, \
                 coalesce(array_agg(l.name ORDER BY l.name) FILTER (WHERE l.name IS NOT NULL), \
                 '{}') \
                 FROM replicas r LEFT JOIN leases l ON l.holder = r.id AND l.until >= $2 \
                 WHERE r.last_seen >= $1 \
                 GROUP BY r.id ORDER BY r.id",
                &[&since, &now],
            )
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ReplicaRecord {
                    id: col(row, 0)?,
                    addr: col(row, 1)?,
                    started_at: col(row, 2)?,
                    last_seen: col(row, 3)?,
                    runs_executing: unsigned(row, 4)?,
                    holds: col(row, 5)?,
                })
            })
            .collect()
    }

    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<bool> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO leases (name, holder, until) VALUES ($1, $2, $3) \
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until \
                 WHERE leases.holder = excluded.holder OR leases.until < $4",
            )
            .await?;
        let won = client
            .execute(&stmt, &[&name, &holder, &until, &now])
            .await?;
        Ok(won == 1)
    }

    async fn lease_holder(&self, name: &str, now: Timestamp) -> Result<Option<String>> {
        let client = self.client().await?;
        client
            .query_opt(
                "SELECT holder FROM leases WHERE name = $1 AND until >= $2",
                &[&name, &now],
            )
            .await?
            .map(|row| col(&row, 0))
            .transpose()
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<()> {
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM leases WHERE name = $1 AND holder = $2",
                &[&name, &holder],
            )
            .await?;
        Ok(())
    }

    async fn leave(&self, id: &str) -> Result<()> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        tx.execute("DELETE FROM leases WHERE holder = $1", &[&id])
            .await?;
        tx.execute("DELETE FROM replicas WHERE id = $1", &[&id])
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn database_now(&self) -> Result<Timestamp> {
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT",
                &[],
            )
            .await?;
        col(&row, 0)
    }

    async fn claim_next(
        &self,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<crate::cluster::Claimed>> {
        super::claims::claim_next(self, None, owner, lease_until, now).await
    }

    async fn claim_next_of_thread(
        &self,
        thread_key: &str,
        owner: &str,
        lease_until: Timestamp,
        now: Timestamp,
    ) -> Result<Option<crate::cluster::Claimed>> {
        super::claims::claim_next(self, Some(thread_key), owner, lease_until, now).await
    }

    async fn watch_end(&self, run_id: &str) -> Result<()> {
        let client = self.client().await?;
        let stmt = client
            .prepare_cached("UPDATE runs SET watched = TRUE WHERE run_id = $1 AND NOT watched")
            .await?;
        client.execute(&stmt, &[&run_id]).await?;
        Ok(())
    }

    async fn release_run_leases(&self, owner: &str, keep: &[String]) -> Result<u64> {
        super::claims::release_run_leases(self, owner, keep).await
    }

    async fn let_go(&self, run_id: &str, owner: &str) -> Result<bool> {
        super::claims::let_go(self, run_id, owner).await
    }

    fn listen(&self) -> tokio::sync::mpsc::Receiver<Wake> {
        PostgresStore::listen(self)
    }
}
