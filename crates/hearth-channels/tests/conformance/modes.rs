//! `/mode` through Telegram's fake, in the group Alice and Bob share: a
//! mode is set for the conversation, `bypass` is refused in a group with
//! the reason, and `/mode` alone shows the picker of the six modes.

#![cfg(feature = "telegram")]

use hearth_core::PermissionMode;

use crate::adapters::telegram::Telegram;
use crate::{Harness, Platform, Who};

#[tokio::test]
async fn mode_is_set_by_command_and_bypass_is_refused_in_a_group() {
    let h = Harness::<Telegram>::start().await;
    let sent = h.platform.send(&h.t, Who::Alice, "/mode bypass").await;
    h.platform.wait_delivered("bypass cannot be set").await;
    let thread =
        hearth_core::ThreadKey::new(h.platform.thread(&sent)).unwrap_or_else(|e| panic!("{e}"));
    let mode = |h: &Harness<Telegram>| {
        let rt = h.t.runtime.clone();
        let thread = thread.clone();
        async move {
            rt.thread_mode(&thread)
                .await
                .unwrap_or_else(|e| panic!("{e}"))
                .mode
        }
    };
    assert_eq!(mode(&h).await, PermissionMode::Ask);
    // Changing a shared conversation needs llm.configure there.
    h.platform.send(&h.t, Who::Alice, "/mode auto").await;
    h.platform
        .wait_delivered("permission mode or a new start")
        .await;
    assert_eq!(mode(&h).await, PermissionMode::Ask);
    h.t.store
        .add_grant(hearth_store::Grant {
            subject: "user:telegram:user:1001".into(),
            capability: "llm.configure".into(),
            scope: thread.to_string(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.platform.send(&h.t, Who::Alice, "/mode auto").await;
    h.platform.wait_delivered("Mode: auto").await;
    assert_eq!(mode(&h).await, PermissionMode::Auto);
    h.platform.send(&h.t, Who::Alice, "/mode").await;
    h.platform
        .wait_delivered("What may run without asking?")
        .await;
    // Commands make no runs.
    assert!(h.runs(&thread).await.is_empty());
    h.finish().await;
}

/// A plan asked for in plan mode is carried out with `/runplan auto`: the
/// mode switches and the plan goes back to the model as the next message,
/// whose answer reaches the chat.
#[tokio::test]
async fn runplan_carries_out_the_last_plan() {
    let h = Harness::<Telegram>::start().await;
    let thread = hearth_core::ThreadKey::new(format!("telegram:chat:{}", -100_500))
        .unwrap_or_else(|e| panic!("{e}"));
    h.t.store
        .add_grant(hearth_store::Grant {
            subject: "user:telegram:user:1001".into(),
            capability: "llm.configure".into(),
            scope: thread.to_string(),
            granted_at: 0,
            granted_by: "test".into(),
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    h.platform.send(&h.t, Who::Alice, "/runplan").await;
    h.platform.wait_delivered("no plan to carry out yet").await;
    h.platform.send(&h.t, Who::Alice, "/mode plan").await;
    h.platform.wait_delivered("Mode: plan").await;
    h.model
        .push(hearth_testkit::Reply::text("1. Look around. 2. Tidy up."));
    h.platform.send(&h.t, Who::Alice, "make a plan").await;
    h.platform.wait_delivered("2. Tidy up.").await;
    h.model.push(hearth_testkit::Reply::text("All tidy now."));
    h.platform.send(&h.t, Who::Alice, "/runplan auto").await;
    h.platform.wait_delivered("All tidy now.").await;
    let mode =
        h.t.runtime
            .thread_mode(&thread)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .mode;
    assert_eq!(mode, PermissionMode::Auto);
    let requests = h.model.requests();
    let last = requests.last().unwrap_or_else(|| panic!("no model call"));
    let said = last.to_string();
    assert!(
        said.contains("The plan is approved") && said.contains("2. Tidy up."),
        "{said}"
    );
    h.finish().await;
}
