//! The suite's side of every check: a [`Platform`] (one fake, and how the
//! suite's actions look on it) and the [`Harness`] that starts it with a
//! real runtime and the fake model.

use std::collections::BTreeMap;
use std::time::Duration;

use hearth_channels::ChannelsFactory;
use hearth_core::records::RunFilter;
use hearth_core::records::outbox::OutboxStatus;
use hearth_runtime::testing::{TestRuntime, fake_toml};
use hearth_testkit::FakeOpenAi;

/// Long enough for anything a check waits for; reached only on failure.
pub(crate) const WAIT: Duration = Duration::from_secs(20);

/// The two users of every check: Alice asks, Bob is someone else in the
/// same shared conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Who {
    Alice,
    Bob,
}

/// One platform, as the suite drives it through its fake. Every message is
/// sent in a conversation Alice and Bob share (a Telegram group, a Discord
/// guild channel, a Slack channel thread), addressed to the bot.
pub(crate) trait Platform: Sized {
    /// What [`Platform::send`] gives back to redeliver.
    type Sent;

    /// Starts the fake.
    async fn start() -> Self;

    /// The `[channels.<name>]` table that points hearth at the fake.
    fn config(&self) -> String;

    /// The environment that table reads (tokens, secrets).
    fn env(&self) -> BTreeMap<String, String>;

    /// Waits until the channel is connected and knows who the bot is.
    async fn ready(&self, t: &TestRuntime);

    /// `who` sends `text` to the bot; returns once the platform has handed
    /// it over (and, where it waits for one, got hearth's acknowledgement).
    async fn send(&self, t: &TestRuntime, who: Who, text: &str) -> Self::Sent;

    /// The thread key of the conversation `sent` was sent in.
    fn thread(&self, sent: &Self::Sent) -> String;

    /// The platform delivers `sent` again, as it does when it believes
    /// hearth did not take it; returns once hearth has handled it.
    async fn redeliver(&self, t: &TestRuntime, sent: &Self::Sent);

    /// How many of the bot's messages (still shown) contain `text`.
    fn delivered(&self, text: &str) -> usize;

    /// Waits until a message of the bot's contains `text`.
    async fn wait_delivered(&self, text: &str);

    /// Attempts to post a message so far, refused ones included.
    fn posts(&self) -> usize;

    /// The next post of a message is answered 429, retry after `secs`.
    fn script_429(&self, secs: u64);

    /// Requests the platform refused as breaking its rules (reading them
    /// marks them checked).
    fn violations(&self) -> Vec<String>;

    /// `who` presses Approve on the confirmation prompt shown after `sent`
    /// (waiting for the prompt first).
    async fn press_approve(&self, t: &TestRuntime, who: Who, sent: &Self::Sent);

    /// Waits until `who` was told their press does not count.
    async fn wait_refused(&self, who: Who);
}

/// A platform's fake, the fake model, and a started runtime whose channels
/// talk to the fake.
pub(crate) struct Harness<P> {
    pub(crate) platform: P,
    pub(crate) model: FakeOpenAi,
    pub(crate) t: TestRuntime,
}

impl<P: Platform> Harness<P> {
    /// Starts the fakes and the runtime, and waits until the channel is up.
    pub(crate) async fn start() -> Self {
        let model = FakeOpenAi::start().await;
        let platform = P::start().await;
        let toml = format!(
            "{}\n{}",
            fake_toml(&model.base_url(), "", ""),
            platform.config()
        );
        let env = platform.env();
        let t =
            TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
        platform.ready(&t).await;
        Self { platform, model, t }
    }

    /// The runs of `thread`.
    pub(crate) async fn runs(&self, thread: &str) -> Vec<hearth_core::RunEnvelope> {
        let filter = RunFilter {
            thread_key: Some(thread.to_owned()),
            status: None,
            limit: 100,
            ..Default::default()
        };
        match self.t.runtime.list_runs(&filter).await {
            Ok(runs) => runs,
            Err(e) => panic!("listing the runs of {thread}: {e}"),
        }
    }

    /// Waits until the outbox holds no pending item (every reply queued so
    /// far was delivered or given up).
    pub(crate) async fn outbox_settled(&self) {
        let settled = async {
            loop {
                let pending = self
                    .t
                    .store
                    .list_outbox(Some(OutboxStatus::Pending), 10)
                    .await
                    .unwrap_or_else(|e| panic!("reading the outbox: {e}"));
                if pending.is_empty() {
                    return;
                }
                // The outbox has no notification to wait on from here.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        if tokio::time::timeout(WAIT, settled).await.is_err() {
            panic!("the outbox still has pending items after {WAIT:?}");
        }
    }

    /// Checks the platform refused nothing and stops the runtime.
    pub(crate) async fn finish(self) {
        let violations = self.platform.violations();
        assert!(
            violations.is_empty(),
            "the platform refused requests: {violations:#?}"
        );
        self.t.runtime.shutdown(Duration::from_millis(200)).await;
    }
}
