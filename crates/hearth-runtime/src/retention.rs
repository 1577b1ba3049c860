//! Retention: how long hearth keeps what it stores, in one place, and the
//! periodic job that deletes what has been kept long enough.
//!
//! The durations are named constants here and nowhere else; the store only
//! deletes by the cut-off times computed from them. The job logs how many
//! records it deleted, never what they said.

use std::time::Duration;

use hearth_core::Timestamp;
use hearth_store::{PurgeReport, RetentionCutoffs, RetentionStore};

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// A memory neither saved again nor found by a search for this long is
/// deleted: a fact unused for a year is more likely stale than useful.
pub const MEMORY_TTL_DAYS: i64 = 365;
/// Audit events are kept a little over a year, so a yearly review still sees
/// the whole year.
pub const AUDIT_TTL_DAYS: i64 = 400;
/// A confirmation is kept this long after it expired (decided or not), for
/// looking into a recent run; it is never needed again after its run ends.
pub const CONFIRMATION_TTL_DAYS: i64 = 7;
/// Delivered and failed chat replies (without their text once delivered),
/// platform event ids kept to drop redeliveries, and old pairing requests:
/// redeliveries come within minutes, and a week of outbox history is enough
/// to look into a missed reply.
pub const CHANNEL_RECORDS_TTL_DAYS: i64 = 7;
/// Which platform message carries which run's answer: a 👍 or 👎 on an
/// answer rates its run for the router while this is kept. Reactions come
/// soon after an answer is read, and a rating of a month-old answer says
/// little about the router's choices now.
pub const REPLY_MESSAGES_TTL_DAYS: i64 = 30;
/// How often the clean-up runs (and once at start; `Runtime::start` runs it).
pub const RETENTION_EVERY: Duration = Duration::from_secs(6 * 60 * 60);

/// The cut-offs for a purge at `now`.
pub fn cutoffs(now: Timestamp) -> RetentionCutoffs {
    RetentionCutoffs {
        memories_unused_since: now.saturating_sub(MEMORY_TTL_DAYS * DAY_MS),
        audit_before: now.saturating_sub(AUDIT_TTL_DAYS * DAY_MS),
        confirmations_expired_before: now.saturating_sub(CONFIRMATION_TTL_DAYS * DAY_MS),
        channel_records_before: now.saturating_sub(CHANNEL_RECORDS_TTL_DAYS * DAY_MS),
        reply_messages_before: now.saturating_sub(REPLY_MESSAGES_TTL_DAYS * DAY_MS),
    }
}

/// Deletes everything kept longer than its TTL as of `now`, and logs the
/// counts.
pub async fn run_once(
    store: &dyn RetentionStore,
    now: Timestamp,
) -> hearth_store::Result<PurgeReport> {
    let report = store.purge_expired(cutoffs(now)).await?;
    tracing::info!(
        memories = report.memories,
        audit_events = report.audit_events,
        confirmations = report.confirmations,
        channel_records = report.channel_records,
        reply_messages = report.reply_messages,
        "retention clean-up done"
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_store::{
        Durability, MemoryScope, MemoryStore, NewMemory, RetentionStore, SqliteStore,
    };

    #[test]
    fn cutoffs_follow_the_named_ttls() {
        let now = 1_000 * DAY_MS;
        assert_eq!(
            cutoffs(now),
            RetentionCutoffs {
                memories_unused_since: 635 * DAY_MS,
                audit_before: 600 * DAY_MS,
                confirmations_expired_before: 993 * DAY_MS,
                channel_records_before: 993 * DAY_MS,
                reply_messages_before: 970 * DAY_MS,
            }
        );
    }

    #[tokio::test]
    async fn run_once_deletes_only_what_outlived_its_ttl() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
        let now = 1_000 * DAY_MS;
        for (text, at) in [
            ("stale fact", now - (MEMORY_TTL_DAYS + 1) * DAY_MS),
            ("recent fact", now - (MEMORY_TTL_DAYS - 1) * DAY_MS),
        ] {
            store
                .save_memory(NewMemory {
                    user_key: "u".into(),
                    thread_key: None,
                    text: text.into(),
                    run_id: None,
                    at,
                })
                .await
                .unwrap();
        }
        let report = run_once(&store, now).await.unwrap();
        assert_eq!(
            report,
            PurgeReport {
                memories: 1,
                audit_events: 0,
                confirmations: 0,
                channel_records: 0,
                reply_messages: 0,
            }
        );
        let scope = MemoryScope {
            user_key: "u".into(),
            thread_key: None,
        };
        let left: Vec<String> = store
            .list_memories(&scope, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(left, vec!["recent fact".to_owned()]);
        // Idempotent: a second round finds nothing more.
        let again = store.purge_expired(cutoffs(now)).await.unwrap();
        assert_eq!(again, PurgeReport::default());
    }
}
