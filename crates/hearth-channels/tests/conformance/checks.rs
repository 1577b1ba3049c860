//! The checks every platform passes, each generic over its [`Platform`].

use std::time::{Duration, Instant};

use hearth_core::RunStatus;
use hearth_testkit::{Reply, ToolCallSpec};
use serde_json::json;

use crate::{Harness, Platform, Who};

/// A message makes exactly one run, and one model call.
pub(crate) async fn a_message_makes_one_run<P: Platform>() {
    let h = Harness::<P>::start().await;
    let sent = h.platform.send(&h.t, Who::Alice, "hello once").await;
    h.platform.wait_delivered("echo: hello once").await;
    let runs = h.runs(&h.platform.thread(&sent)).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::Succeeded);
    assert_eq!(h.model.request_count(), 1);
    h.finish().await;
}

/// The same update or event delivered again (the platform thought hearth
/// had not taken it) makes no second run and no second answer.
pub(crate) async fn a_redelivered_update_makes_no_run<P: Platform>() {
    let h = Harness::<P>::start().await;
    let sent = h.platform.send(&h.t, Who::Alice, "only one run").await;
    h.platform.wait_delivered("echo: only one run").await;
    h.platform.redeliver(&h.t, &sent).await;
    h.outbox_settled().await;
    let runs = h.runs(&h.platform.thread(&sent)).await;
    assert_eq!(runs.len(), 1, "the redelivery made a run: {runs:?}");
    assert_eq!(h.platform.delivered("echo: only one run"), 1);
    h.finish().await;
}

/// The answer reaches the conversation once: by the time the outbox says
/// it is sent, one message carries it.
pub(crate) async fn an_answer_is_delivered_once<P: Platform>() {
    let h = Harness::<P>::start().await;
    h.platform.send(&h.t, Who::Alice, "answer me").await;
    h.platform.wait_delivered("echo: answer me").await;
    h.outbox_settled().await;
    assert_eq!(h.platform.delivered("echo: answer me"), 1);
    let sent =
        h.t.store
            .list_outbox(Some(hearth_core::records::outbox::OutboxStatus::Sent), 10)
            .await
            .unwrap_or_else(|e| panic!("reading the outbox: {e}"));
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].attempts, 0, "delivered at the first attempt");
    h.finish().await;
}

/// A 429 on the answer is waited out: the answer arrives once, no sooner
/// than Retry-After, and no request reached the platform before then (the
/// fake refuses and counts one).
pub(crate) async fn a_429_is_honoured<P: Platform>() {
    const RETRY_AFTER: u64 = 1;
    let h = Harness::<P>::start().await;
    h.platform.script_429(RETRY_AFTER);
    let posts = h.platform.posts();
    let started = Instant::now();
    h.platform.send(&h.t, Who::Alice, "rate me").await;
    h.platform.wait_delivered("echo: rate me").await;
    assert!(
        started.elapsed() >= Duration::from_secs(RETRY_AFTER),
        "the answer came {:?} after a 429 saying to wait {RETRY_AFTER} s",
        started.elapsed()
    );
    h.outbox_settled().await;
    assert_eq!(h.platform.delivered("echo: rate me"), 1);
    assert_eq!(
        h.platform.posts() - posts,
        2,
        "one post refused with 429, one after Retry-After"
    );
    h.finish().await;
}

/// Bob pressing Approve on the prompt of Alice's run is refused: he is told
/// so, and the confirmation stays pending (the run waits for Alice).
pub(crate) async fn a_confirmation_pressed_by_someone_else_is_refused<P: Platform>() {
    let h = Harness::<P>::start().await;
    h.model.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    let sent = h.platform.send(&h.t, Who::Alice, "forget it").await;
    let thread = h.platform.thread(&sent);
    h.platform.press_approve(&h.t, Who::Bob, &sent).await;
    h.platform.wait_refused(Who::Bob).await;
    let pending =
        h.t.store
            .pending_confirmations(None, Some(&thread))
            .await
            .unwrap_or_else(|e| panic!("reading the confirmations: {e}"));
    assert_eq!(
        pending.len(),
        1,
        "the confirmation was answered: {pending:?}"
    );
    let runs = h.runs(&thread).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, RunStatus::AwaitingConfirmation);
    assert_eq!(h.platform.delivered("Approved by"), 0);
    h.finish().await;
}
