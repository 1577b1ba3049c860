//! SMS through `FakeTwilio`: each text is posted to the channel's webhook
//! signed as Twilio signs it, and Twilio posts a text again (same
//! `MessageSid`) when it believes hearth did not take it. SMS has no shared
//! conversation: Alice and Bob each text from their own number, and a
//! confirmation is answered by texting `YES <code>`, a code bound to the
//! number it was sent to.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use hearth_runtime::testing::TestRuntime;
use hearth_testkit::fake_twilio::{ACCOUNT_SID, AUTH_TOKEN, FROM, FakeTwilio, form_body};

use crate::harness::WAIT;
use crate::{Platform, Who};

const PUBLIC_URL: &str = "https://hearth.example.test/channels/sms/twilio";

fn number(who: Who) -> &'static str {
    match who {
        Who::Alice => "+15551110001",
        Who::Bob => "+15551110002",
    }
}

pub(crate) struct Sms {
    fake: FakeTwilio,
    next: AtomicUsize,
}

/// A text as sent: its sid, who sent it and what.
pub(crate) struct Sent {
    sid: String,
    who: Who,
    text: String,
}

impl Sms {
    /// Posts a text to the channel's webhook, as Twilio does, and checks
    /// it was taken (200 with TwiML).
    async fn post(&self, t: &TestRuntime, sid: &str, who: Who, text: &str) {
        let params = FakeTwilio::inbound(sid, number(who), text);
        let pairs: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let signature = FakeTwilio::sign(PUBLIC_URL, &pairs);
        let hook = t
            .runtime
            .webhooks()
            .into_iter()
            .find(|h| h.path() == hearth_channels::sms::PATH)
            .unwrap_or_else(|| panic!("no SMS webhook"));
        let request = http::Request::post(hearth_channels::sms::PATH)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("x-twilio-signature", signature)
            .body(Bytes::from(form_body(&params)))
            .unwrap_or_else(|e| panic!("{e}"));
        let resp = hook.handle(&t.runtime, request).await;
        assert_eq!(resp.status(), 200, "the text was not taken");
    }
}

impl Platform for Sms {
    type Sent = Sent;

    async fn start() -> Self {
        let fake = FakeTwilio::start()
            .await
            .unwrap_or_else(|e| panic!("starting the fake Twilio: {e}"));
        Self {
            fake,
            next: AtomicUsize::new(1),
        }
    }

    fn config(&self) -> String {
        format!(
            "[channels.sms]\nenabled = true\naccount_sid = \"{ACCOUNT_SID}\"\nfrom = \"{FROM}\"\n\
             public_url = \"{PUBLIC_URL}\"\napi_base = \"{}\"\nallowed_users = [\"{}\", \"{}\"]\n",
            self.fake.api_base(),
            number(Who::Alice),
            number(Who::Bob),
        )
    }

    fn env(&self) -> BTreeMap<String, String> {
        [("TWILIO_AUTH_TOKEN", AUTH_TOKEN)]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into()
    }

    async fn ready(&self, t: &TestRuntime) {
        // Push only: the webhook is there once the channels are built; the
        // start-up credential check is not needed to take texts.
        let _ = t;
    }

    async fn send(&self, t: &TestRuntime, who: Who, text: &str) -> Sent {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let sid = format!("SM{n:032}");
        self.post(t, &sid, who, text).await;
        Sent {
            sid,
            who,
            text: text.to_owned(),
        }
    }

    fn thread(&self, sent: &Sent) -> String {
        format!("sms:{}", number(sent.who))
    }

    async fn redeliver(&self, t: &TestRuntime, sent: &Sent) {
        self.post(t, &sent.sid, sent.who, &sent.text).await;
    }

    fn delivered(&self, text: &str) -> usize {
        self.fake
            .sent()
            .iter()
            .filter(|m| m.body.contains(text))
            .count()
    }

    async fn wait_delivered(&self, text: &str) {
        let deadline = tokio::time::Instant::now() + WAIT;
        while self.delivered(text) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no text with {text:?}: {:#?}",
                self.fake.sent()
            );
            self.fake.wait_sent(self.fake.sent().len() + 1, WAIT).await;
        }
    }

    fn posts(&self) -> usize {
        self.fake.sent().len() + self.fake.limited()
    }

    fn script_429(&self, secs: u64) {
        self.fake.rate_limit(secs);
    }

    fn violations(&self) -> Vec<String> {
        self.fake.violations()
    }

    async fn press_approve(&self, t: &TestRuntime, who: Who, sent: &Sent) {
        let prompt = self
            .fake
            .wait_text(number(sent.who), "Reply YES", WAIT)
            .await;
        let code = prompt
            .body
            .split("Reply YES ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or_else(|| panic!("no code in {prompt:?}"))
            .to_owned();
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.post(t, &format!("SM{n:032}"), who, &format!("YES {code}"))
            .await;
    }

    async fn wait_refused(&self, who: Who) {
        self.fake
            .wait_text(number(who), "No question with code", WAIT)
            .await;
    }
}
