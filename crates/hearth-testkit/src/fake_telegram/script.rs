//! Which requests a test scripts, and holding them: a held call gets no
//! answer (and has no effect) until the test releases it, so a test can
//! stand a slow platform in one chat, or kill hearth while a given message
//! is being sent, without sleeping.

use serde_json::{Map, Value};

use super::{FakeTelegram, Shared};

/// Which requests an injected failure or a hold applies to: every field
/// given must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matching {
    /// The method (Telegram ignores case); any when `None`.
    pub method: Option<String>,
    /// The `chat_id` parameter; any chat when `None`.
    pub chat_id: Option<i64>,
    /// A piece of the `text` parameter; any text when `None`.
    pub text: Option<String>,
}

impl Matching {
    /// Calls of `method`.
    pub fn method(method: &str) -> Self {
        Self {
            method: Some(method.to_owned()),
            ..Self::default()
        }
    }

    /// Only those to `chat_id`.
    pub fn in_chat(mut self, chat_id: i64) -> Self {
        self.chat_id = Some(chat_id);
        self
    }

    /// Only those whose `text` contains `piece`.
    pub fn with_text(mut self, piece: &str) -> Self {
        self.text = Some(piece.to_owned());
        self
    }

    pub(super) fn matches(&self, method: &str, params: &Map<String, Value>) -> bool {
        let method_ok = self
            .method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method));
        // Telegram takes a chat id as a number or a string.
        let chat = params.get("chat_id").and_then(|c| match c {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.parse().ok(),
            _ => None,
        });
        let chat_ok = self.chat_id.is_none_or(|id| chat == Some(id));
        let text = params.get("text").and_then(Value::as_str).unwrap_or("");
        let text_ok = self.text.as_deref().is_none_or(|t| text.contains(t));
        method_ok && chat_ok && text_ok
    }
}

/// Calls to hold, and how many more.
#[derive(Debug, Clone)]
pub(super) struct HoldRule {
    matching: Matching,
    remaining: usize,
}

/// Holds the call when a rule matches it, until the test releases held
/// calls; returns at once otherwise.
pub(super) async fn hold_if_matching(shared: &Shared, method: &str, params: &Map<String, Value>) {
    let generation = {
        let mut st = shared.lock();
        let Some(rule) = st
            .holds
            .iter_mut()
            .find(|r| r.remaining > 0 && r.matching.matches(method, params))
        else {
            return;
        };
        rule.remaining -= 1;
        st.held += 1;
        st.release_generation
    };
    shared.changed.notify_waiters();
    loop {
        let released = shared.released.notified();
        let mut released = std::pin::pin!(released);
        // Registered before the check, so a release cannot slip between.
        released.as_mut().enable();
        if shared.lock().release_generation > generation {
            return;
        }
        released.await;
    }
}

impl FakeTelegram {
    /// Answers the next `n` calls that match `matching` with `failure`.
    pub fn fail_matching(&self, matching: Matching, n: usize, failure: super::Failure) {
        let mut st = self.shared.lock();
        st.failures
            .extend(std::iter::repeat_n((matching, failure), n));
    }

    /// Holds the next `n` calls that match `matching`: they get no answer
    /// and have no effect until [`FakeTelegram::release`]; then they are
    /// handled as usual. [`super::TelegramState::held`] counts them.
    pub fn hold(&self, matching: Matching, n: usize) {
        self.shared.lock().holds.push(HoldRule {
            matching,
            remaining: n,
        });
    }

    /// Lets every call held so far go on.
    pub fn release(&self) {
        self.shared.lock().release_generation += 1;
        self.shared.released.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::fake_telegram::Failure;
    use crate::fake_telegram::tests::{TOKEN, call};

    const WAIT: Duration = Duration::from_secs(10);

    #[test]
    fn every_given_field_must_match() {
        let p = |v: Value| v.as_object().cloned().unwrap();
        let m = Matching::method("sendMessage").in_chat(5).with_text("two");
        assert!(m.matches("SENDMESSAGE", &p(json!({"chat_id": 5, "text": "one two"}))));
        assert!(m.matches("sendMessage", &p(json!({"chat_id": "5", "text": "two"}))));
        assert!(!m.matches("sendMessage", &p(json!({"chat_id": 6, "text": "two"}))));
        assert!(!m.matches("sendMessage", &p(json!({"chat_id": 5, "text": "one"}))));
        assert!(!m.matches("editMessageText", &p(json!({"chat_id": 5, "text": "two"}))));
        assert!(Matching::default().matches("getMe", &p(json!({}))));
    }

    #[tokio::test]
    async fn a_held_call_waits_for_release_and_others_go_on() {
        let fake = FakeTelegram::start(TOKEN).await;
        for chat in [1, 2] {
            fake.add_chat(chat);
        }
        fake.hold(Matching::method("sendMessage").in_chat(1), 1);
        let held = {
            let fake = &fake;
            async move { call(fake, "sendMessage", json!({"chat_id": 1, "text": "slow"})).await }
        };
        let mut held = std::pin::pin!(held);
        tokio::select! {
            _ = held.as_mut() => panic!("the held call was answered"),
            ok = fake.wait_for(|st| st.held() == 1, WAIT) => assert!(ok),
        }
        assert!(fake.sent().is_empty(), "a held call had an effect");
        let (status, _) = call(&fake, "sendMessage", json!({"chat_id": 2, "text": "fast"})).await;
        assert_eq!(status, 200);
        fake.release();
        let (status, _) = held.await;
        assert_eq!(status, 200);
        let texts: Vec<String> = fake.sent().into_iter().map(|m| m.text).collect();
        assert_eq!(texts, ["fast", "slow"]);
        // Only the first matching call was held.
        let (status, _) = call(&fake, "sendMessage", json!({"chat_id": 1, "text": "next"})).await;
        assert_eq!(status, 200);
        assert_eq!(fake.with_state(|st| st.held()), 1);
    }

    #[tokio::test]
    async fn a_failure_can_target_one_text() {
        let fake = FakeTelegram::start(TOKEN).await;
        fake.add_chat(1);
        fake.fail_matching(
            Matching::method("sendMessage").with_text("second"),
            1,
            Failure::Status(502),
        );
        let send =
            |text: &'static str| call(&fake, "sendMessage", json!({"chat_id": 1, "text": text}));
        assert_eq!(send("first").await.0, 200);
        assert_eq!(send("the second").await.0, 502);
        assert_eq!(send("the second").await.0, 200);
        assert!(fake.rejections().is_empty());
    }
}
