//! Confirmations ([`ConfirmationStore`], with runs and the audit log).

use hearth_core::RunStatus;

use super::fixtures::{audit, awaiting, confirmation, created};
use crate::confirmations::ConfirmationStore;
use crate::grants::GrantStore;
use crate::records::ConfirmationState;
use crate::runs::RunStore;

/// Runs every check of this suite, each on a store from `fresh` (empty).
pub async fn confirmations_suite<S: ConfirmationStore + RunStore + GrantStore>(
    fresh: impl AsyncFn() -> S,
) {
    a_run_awaiting_confirmation_keeps_its_status_when_claimed(fresh().await).await;
    resolving_a_confirmation_stores_its_audit_event_only_when_it_resolves(fresh().await).await;
}

/// A run awaiting confirmation keeps its status when claimed.
async fn a_run_awaiting_confirmation_keeps_its_status_when_claimed<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    created(&store, "run_1", "t1").await;
    store
        .claim_run("run_1", "node-a", 5_000, 1_000)
        .await
        .unwrap()
        .unwrap();
    store
        .request_confirmation(confirmation("run_1", "call_1", "hash_1"), vec![])
        .await
        .unwrap();
    assert!(
        store
            .claim_run("run_1", "node-b", 9_000, 2_000)
            .await
            .unwrap()
            .is_none()
    );
    let taken = store
        .claim_run("run_1", "node-b", 9_000, 5_001)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.status, RunStatus::AwaitingConfirmation);
    assert_eq!(taken.lease_owner.as_deref(), Some("node-b"));
}

/// Resolving a confirmation stores its audit event only when it resolves.
async fn resolving_a_confirmation_stores_its_audit_event_only_when_it_resolves<
    S: ConfirmationStore + RunStore + GrantStore,
>(
    store: S,
) {
    awaiting(&store).await;

    let rec = store
        .resolve_confirmation(
            "hash_1",
            ConfirmationState::Approved,
            "user:1",
            2_000,
            Some(audit("approved")),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rec.state, ConfirmationState::Approved);
    assert_eq!(
        store.get_run("run_1").await.unwrap().unwrap().status,
        RunStatus::Running
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);

    // Used once: a second answer changes nothing and records nothing.
    assert!(
        store
            .resolve_confirmation(
                "hash_1",
                ConfirmationState::Denied,
                "user:1",
                3_000,
                Some(audit("denied"))
            )
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.list_audit(0).await.unwrap(), vec![audit("approved")]);
}
