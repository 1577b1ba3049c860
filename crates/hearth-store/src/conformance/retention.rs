//! Purging expired records ([`RetentionStore`]), set up through the runs,
//! confirmations and audit log it purges.

use super::fixtures::{confirmation, created, event, finish};
use crate::confirmations::ConfirmationStore;
use crate::grants::GrantStore;
use crate::records::ConfirmationState;
use crate::retention::{RetentionCutoffs, RetentionStore};
use crate::runs::RunStore;

/// Audit events older than the cut-off go; expired confirmations go once
/// their run is finished, while a run still waiting keeps its question.
pub async fn purge_deletes_old_audit_events_and_confirmations_of_finished_runs<S>(store: S)
where
    S: RetentionStore + RunStore + ConfirmationStore + GrantStore,
{
    for at in [1_000, 9_000] {
        store
            .append_audit(event(at, "grant.add", "user:u"))
            .await
            .unwrap();
    }
    let expiring = |run: &str, call: &str, hash: &str, expires_at: i64| {
        let mut rec = confirmation(run, call, hash);
        rec.created_at = 0;
        rec.expires_at = expires_at;
        rec
    };
    created(&store, "r_wait", "t1").await;
    store
        .request_confirmation(expiring("r_wait", "c1", "h1", 1_000), vec![])
        .await
        .unwrap();
    created(&store, "r_done", "t1").await;
    for (call, hash, expires_at) in [("c1", "h2", 1_000), ("c2", "h3", 9_000)] {
        store
            .request_confirmation(expiring("r_done", call, hash, expires_at), vec![])
            .await
            .unwrap();
        store
            .resolve_confirmation(hash, ConfirmationState::Denied, "user:1", 500, None)
            .await
            .unwrap()
            .unwrap();
    }
    assert!(store.finish_run(finish("r_done", vec![])).await.unwrap());

    let report = store
        .purge_expired(RetentionCutoffs {
            memories_unused_since: 0,
            audit_before: 5_000,
            confirmations_expired_before: 5_000,
            channel_records_before: 0,
            reply_messages_before: 0,
        })
        .await
        .unwrap();
    assert_eq!(
        (report.memories, report.audit_events, report.confirmations),
        (0, 1, 1)
    );
    let events = store.list_audit(10).await.unwrap();
    assert_eq!(events.iter().map(|e| e.at).collect::<Vec<_>>(), vec![9_000]);
    let mut left = Vec::new();
    for hash in ["h1", "h2", "h3"] {
        if store.confirmation_by_hash(hash).await.unwrap().is_some() {
            left.push(hash);
        }
    }
    assert_eq!(left, ["h1", "h3"]);
}
