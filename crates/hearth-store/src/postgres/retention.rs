//! `RetentionStore` on PostgreSQL: every kind of expired record deleted in
//! one transaction, as on SQLite, so a pass that fails half-way deletes
//! nothing and the next one starts from the same state.

use super::PostgresStore;
use super::memory::purge_memories;
use crate::error::Result;
use crate::retention::{PurgeReport, RetentionCutoffs, RetentionStore};

#[async_trait::async_trait]
impl RetentionStore for PostgresStore {
    async fn purge_expired(&self, c: RetentionCutoffs) -> Result<PurgeReport> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let memories = purge_memories(&tx, c.memories_unused_since).await?;
        let audit_events = tx
            .execute("DELETE FROM audit WHERE at < $1", &[&c.audit_before])
            .await?;
        // A run that is still unfinished may yet look its confirmation up
        // (after a restart, or from another replica), so only confirmations
        // of finished runs go.
        let confirmations = tx
            .execute(
                "DELETE FROM confirmations WHERE expires_at < $1 AND NOT EXISTS ( \
                     SELECT 1 FROM runs r WHERE r.run_id = confirmations.run_id \
                     AND r.status IN ('queued', 'running', 'awaiting_confirmation'))",
                &[&c.confirmations_expired_before],
            )
            .await?;
        // Delivered or given-up outbox items (a pending reply is still owed),
        // handled platform event ids, pairing requests past their expiry.
        let channel_records = super::outbox::purge(&tx, c.channel_records_before).await?;
        let reply_messages =
            super::outbox::purge_reply_messages(&tx, c.reply_messages_before).await?;
        // What the surfaces supplied for runs stored queued (migration
        // 0022) is read by the claim of the run's replica, and again only
        // if the run is resumed: nobody reads it once the run ended.
        tx.execute(
            "DELETE FROM run_supplied AS s USING runs AS r WHERE r.run_id = s.run_id \
             AND r.status NOT IN ('queued', 'running', 'awaiting_confirmation')",
            &[],
        )
        .await?;
        tx.commit().await?;
        Ok(PurgeReport {
            memories,
            audit_events,
            confirmations,
            channel_records,
            reply_messages,
        })
    }
}
