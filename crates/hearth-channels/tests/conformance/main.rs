//! The conformance suite: the same checks against every chat platform,
//! each driven through its fake (`hearth-testkit`) with a real runtime
//! (`hearth_runtime::testing`) whose channels `ChannelsFactory` builds, as
//! `hearth serve` builds them. A [`Platform`] adapts the suite's actions
//! (a user's message, its redelivery, a button press or a texted answer,
//! a scripted 429) to
//! one fake; [`conformance!`] expands every check for every platform, so a
//! failure names both.
//!
//! The checks: a message makes exactly one run; a redelivered update or
//! event makes none; an answer is delivered once; a 429 is honoured (the
//! fakes refuse and count any request before its Retry-After has passed);
//! a confirmation button pressed by someone other than the asker is
//! refused and the confirmation stays pending.

// A build without any platform has nothing to check.
#![cfg(any(
    feature = "telegram",
    feature = "discord",
    feature = "slack",
    feature = "sms"
))]

/// Each platform's [`Platform`].
mod adapters {
    #[cfg(feature = "discord")]
    pub(crate) mod discord;
    #[cfg(feature = "slack")]
    pub(crate) mod slack;
    #[cfg(feature = "sms")]
    pub(crate) mod sms;
    #[cfg(feature = "telegram")]
    pub(crate) mod telegram;
}
mod apps;
mod checks;
mod discord_resume;
mod harness;
mod modes;
mod refused;

pub(crate) use harness::{Harness, Platform, Who};

/// One test per check for a platform, in a module named after it.
macro_rules! conformance {
    ($name:ident, $feature:literal, $platform:ty) => {
        #[cfg(feature = $feature)]
        mod $name {
            use crate::checks;

            #[tokio::test]
            async fn a_message_makes_one_run() {
                checks::a_message_makes_one_run::<$platform>().await;
            }

            #[tokio::test]
            async fn a_redelivered_update_makes_no_run() {
                checks::a_redelivered_update_makes_no_run::<$platform>().await;
            }

            #[tokio::test]
            async fn an_answer_is_delivered_once() {
                checks::an_answer_is_delivered_once::<$platform>().await;
            }

            #[tokio::test]
            async fn a_429_is_honoured() {
                checks::a_429_is_honoured::<$platform>().await;
            }

            #[tokio::test]
            async fn a_confirmation_pressed_by_someone_else_is_refused() {
                checks::a_confirmation_pressed_by_someone_else_is_refused::<$platform>().await;
            }
        }
    };
}

conformance!(telegram, "telegram", crate::adapters::telegram::Telegram);
conformance!(discord, "discord", crate::adapters::discord::Discord);
conformance!(slack, "slack", crate::adapters::slack::Slack);
conformance!(sms, "sms", crate::adapters::sms::Sms);
