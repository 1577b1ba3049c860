//! [`Kit`]: what every platform holds the same way. Telegram, Discord and
//! Slack each need their platform's API client (or why there is none), the
//! outbox store, the access rules, the health their loops update, the
//! progress messages of running runs, who the bot is once the platform said,
//! and the wake of the outbox sender; the kit holds these seven and does
//! with them what every platform does: queue a notice, note an event seen,
//! let a private message in or offer pairing, hand a message to the runtime
//! (telling its sender when the runtime refuses it), follow a run's
//! progress.

use std::sync::{Arc, OnceLock};

use hearth_core::{RunEnvelope, now_ms};
use hearth_runtime::Runtime;
use hearth_runtime::surfaces::OutboxStore;
use tokio::sync::Notify;

use crate::access::{Access, Admission};
use crate::channel::{Delivery, Ingress};
use crate::error::{ChannelError, DeliveryError, refusal_notice};
use crate::health::Health;
use crate::hub::Enabled;
use crate::payload::Payload;
use crate::progress::{Progress, ProgressSink};

/// What handling one event (a message, a command, a press) came to, for
/// the platform's acknowledgement: an error that may pass (the store, the
/// platform, shutdown, overload) is returned, so the event is left
/// unacknowledged for the platform to send again (and counts as a channel
/// failure); any other is the runtime's answer to this event, which a
/// retry would only repeat: it is logged and the event acknowledged.
pub(crate) fn settle(
    channel: &'static str,
    handled: Result<(), ChannelError>,
) -> Result<(), ChannelError> {
    match handled {
        Err(e) if !e.is_transient() => {
            tracing::warn!(channel, error = %e, "an event was refused; it is acknowledged and not retried");
            Ok(())
        }
        other => other,
    }
}

/// The seven fields every platform shares, for a platform whose API client
/// is `A` and whose bot identity is `M`.
pub(crate) struct Kit<A, M> {
    name: &'static str,
    /// The platform's API, or why there is none (a token that could not be
    /// read): the channel then stays degraded.
    pub(crate) api: Result<A, String>,
    /// The outbox and the platform's state (cursors, events seen).
    pub(crate) store: Arc<dyn OutboxStore>,
    /// Who may talk to the assistant here.
    pub(crate) access: Access,
    /// Updated by the loops; shown by `/v1/channels` and `/readyz`.
    pub(crate) health: Arc<Health>,
    /// The progress messages of running runs.
    pub(crate) progress: Arc<Progress>,
    /// Who the bot is, once the platform said.
    #[cfg_attr(
        not(any(feature = "telegram", feature = "discord", feature = "slack")),
        expect(
            dead_code,
            reason = "SMS shows no progress message and has no bot identity"
        )
    )]
    pub(crate) me: OnceLock<M>,
    /// Wakes the channel's outbox sender.
    pub(crate) wake: Arc<Notify>,
}

impl<A, M> Kit<A, M> {
    /// The kit of channel `name`, with its API (or why there is none).
    pub(crate) fn new(
        name: &'static str,
        api: Result<A, String>,
        store: Arc<dyn OutboxStore>,
        access: Access,
    ) -> Self {
        Self {
            name,
            api,
            progress: Arc::new(Progress::durable(store.clone(), name)),
            store,
            access,
            health: Arc::default(),
            me: OnceLock::new(),
            wake: Arc::new(Notify::new()),
        }
    }

    /// `telegram`, `discord`, `slack` or `sms`.
    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    /// The platform as the hub holds it: its two sides (the same channel,
    /// seen as `delivery` and as `ingress`) and what the hub shows of it
    /// and wakes.
    pub(crate) fn enable(&self, delivery: Arc<dyn Delivery>, ingress: Arc<dyn Ingress>) -> Enabled {
        Enabled::new(
            delivery,
            ingress,
            self.health.clone(),
            self.wake.clone(),
            self.access.clone(),
        )
    }

    /// The API for a delivery: without one the item waits (the token may
    /// be fixed and hearth restarted before it is too old).
    pub(crate) fn api(&self) -> Result<&A, DeliveryError> {
        self.api
            .as_ref()
            .map_err(|e| DeliveryError::Transient(e.clone()))
    }

    /// The API for a check or a loop, or why there is none.
    pub(crate) fn api_or_why(&self) -> Result<&A, ChannelError> {
        self.api.as_ref().map_err(|e| ChannelError::NoToken {
            channel: self.name,
            detail: e.clone(),
        })
    }

    /// Marks a channel that cannot start (a token is missing) degraded at
    /// once and says why.
    pub(crate) fn cannot_start(&self, why: &str) {
        tracing::error!(channel = self.name, error = %why, "the channel cannot start: a token is missing");
        for _ in 0..3 {
            self.health.failed(why);
        }
    }

    /// Queues a reply outside a run (a command's answer, a refusal) to
    /// `target` and wakes the sender.
    pub(crate) async fn notify(&self, target: &str, payload: &Payload) -> Result<(), ChannelError> {
        crate::outbox::queue_notice(self.store.as_ref(), &self.wake, self.name, target, payload)
            .await
    }

    /// Records platform event `key`; true the first time it is seen (a
    /// redelivered event must not act twice).
    pub(crate) async fn first_sight(&self, key: &str) -> Result<bool, ChannelError> {
        Ok(self.store.first_sight(self.name, key, now_ms()).await?)
    }

    /// Whether a private message from `user` (shown as `display_name`) may
    /// go on; a stranger is offered a pairing code at `target` once, and
    /// the sender woken to send it.
    pub(crate) async fn admit_private(
        &self,
        user: &str,
        display_name: &str,
        target: &str,
    ) -> Result<bool, ChannelError> {
        match self
            .access
            .admit_private(user, display_name, target)
            .await?
        {
            Admission::Allowed => Ok(true),
            Admission::PairingOffered(_) => {
                self.wake.notify_one();
                Ok(false)
            }
            Admission::Ignored => Ok(false),
        }
    }

    /// Hands `inbound` to `runtime`: its run, or `None` when the runtime
    /// refused it (the runtime's answer to this message, not a failure that
    /// may pass): its sender is then told at `target` (in the thread
    /// `reply_to`), and the event is done with.
    pub(crate) async fn ingest(
        &self,
        runtime: &Runtime,
        inbound: hearth_core::Inbound,
        target: &str,
        reply_to: Option<String>,
    ) -> Result<Option<RunEnvelope>, ChannelError> {
        match runtime.ingest(inbound).await {
            Ok(run) => Ok(Some(run)),
            Err(e) if !e.is_transient() => {
                let mut notice = Payload::notice(refusal_notice(&e));
                notice.reply_to = reply_to;
                self.notify(target, &notice).await?;
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Shows the progress of `run` in `target` while it works, through
    /// `sink` (nothing for a run already ended).
    #[cfg_attr(
        not(any(feature = "telegram", feature = "discord", feature = "slack")),
        expect(
            dead_code,
            reason = "SMS shows no progress message and has no bot identity"
        )
    )]
    pub(crate) fn follow(
        &self,
        runtime: &Runtime,
        run: &RunEnvelope,
        target: String,
        sink: Arc<dyn ProgressSink>,
    ) {
        if !run.status.is_terminal() {
            self.progress
                .follow(runtime.clone(), run.run_id.clone(), target, sink);
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_runtime::RuntimeError;
    use hearth_runtime::surfaces::StoreError;

    use super::*;

    #[test]
    fn only_a_failure_that_may_pass_leaves_an_event_to_come_again() {
        // Whatever the runtime answers one event with, the platform is
        // told it was taken, and what follows goes on.
        for refusal in [
            RuntimeError::InvalidInput("text must not be empty".into()),
            RuntimeError::Forbidden("this confirmation belongs to another user".into()),
            RuntimeError::ConfirmationNotFound,
            RuntimeError::RunNotFound("run_1".into()),
            RuntimeError::UnknownModel("x/y".into()),
            RuntimeError::JobNotFound("job_1".into()),
        ] {
            assert!(settle("telegram", Err(refusal.into())).is_ok());
        }
        for may_pass in [
            ChannelError::Store(StoreError::Corrupt("bad row".into())),
            RuntimeError::Store(StoreError::Closed).into(),
            RuntimeError::ShuttingDown.into(),
            RuntimeError::Overloaded {
                queued: 3,
                retry_after_secs: 1,
            }
            .into(),
        ] {
            assert!(settle("slack", Err(may_pass)).is_err());
        }
        assert!(settle("discord", Ok(())).is_ok());
    }
}
