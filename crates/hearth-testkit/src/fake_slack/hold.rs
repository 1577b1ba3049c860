//! Holding chosen Web API calls: a held call gets no answer (and has no
//! effect) until the test releases it, so a test can kill hearth while a
//! given message is being posted, without sleeping.

use std::time::Duration;

use serde_json::Value;

use super::{FakeSlack, Shared};

/// Calls to hold, and how many more.
#[derive(Debug, Clone)]
pub(crate) struct HoldRule {
    method: String,
    piece: String,
    remaining: usize,
}

/// Holds the call when a rule matches it, until the test releases held
/// calls; returns at once otherwise.
pub(crate) async fn hold_if_matching(shared: &Shared, method: &str, body: &Value) {
    let text = body.get("text").and_then(Value::as_str).unwrap_or("");
    let generation = {
        let mut s = shared.lock();
        let Some(rule) = s
            .holds
            .iter_mut()
            .find(|r| r.remaining > 0 && r.method == method && text.contains(&r.piece))
        else {
            return;
        };
        rule.remaining -= 1;
        s.held += 1;
        s.release_generation
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

impl FakeSlack {
    /// Holds the next `n` calls of `method` whose `text` contains `piece`:
    /// they get no answer and have no effect until [`FakeSlack::release`];
    /// then they are handled as usual.
    pub fn hold(&self, method: &str, piece: &str, n: usize) {
        self.shared.lock().holds.push(HoldRule {
            method: method.to_owned(),
            piece: piece.to_owned(),
            remaining: n,
        });
    }

    /// Lets every call held so far go on.
    pub fn release(&self) {
        self.shared.lock().release_generation += 1;
        self.shared.released.notify_waiters();
    }

    /// Waits until `n` calls were held (released or not).
    ///
    /// # Panics
    /// After `within` without them, listing the calls seen.
    pub async fn wait_held(&self, n: usize, within: Duration) {
        if self
            .wait(within, |s| (s.held >= n).then_some(()))
            .await
            .is_none()
        {
            panic!(
                "waited {within:?} for {n} held calls; calls seen: {:#?}",
                self.all_calls()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_slack::BOT_TOKEN;

    #[tokio::test]
    async fn a_held_post_waits_for_release_and_others_go_on() {
        let slack = FakeSlack::start().await.unwrap();
        let post = poster(&slack);
        slack.hold("chat.postMessage", "second", 1);
        let held = tokio::spawn(post("the second"));
        slack.wait_held(1, Duration::from_secs(10)).await;
        assert!(slack.messages().is_empty(), "a held call had an effect");
        assert!(post("the first").await.contains("\"ok\":true"));
        slack.release();
        assert!(held.await.unwrap().contains("\"ok\":true"));
        let texts: Vec<String> = slack.messages().into_iter().map(|m| m.text).collect();
        assert_eq!(texts, ["the first", "the second"]);
        assert_eq!(slack.violations(), Vec::<String>::new());
    }

    /// Posts `text` to a DM over a raw HTTP/1.1 connection (the test kit
    /// has no HTTP client); the response body.
    fn poster(
        slack: &FakeSlack,
    ) -> impl Fn(&'static str) -> std::pin::Pin<Box<dyn Future<Output = String> + Send>> {
        let addr = slack.shared.http_addr;
        move |text| {
            Box::pin(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let body = serde_json::json!({ "channel": "D1", "text": text }).to_string();
                let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                let head = format!(
                    "POST /api/chat.postMessage HTTP/1.1\r\nhost: fake\r\n\
                     authorization: Bearer {BOT_TOKEN}\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                tcp.write_all(head.as_bytes()).await.unwrap();
                tcp.write_all(body.as_bytes()).await.unwrap();
                let mut out = String::new();
                tcp.read_to_string(&mut out).await.unwrap();
                out
            })
        }
    }
}
