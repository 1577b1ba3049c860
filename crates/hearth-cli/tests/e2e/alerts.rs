//! Alerts in the real binary: events sent to a signed webhook (checked by a
//! receiver in this test) and to a Telegram chat (the fake Bot API), retried
//! through the outbox, rate limited per rule; bad rules refused at load.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use hearth_testkit::fake_telegram::{Failure, FakeTelegram, TelegramState, User};
use hearth_testkit::{FakeOpenAi, Reply};
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::{Mutex, mpsc};

use crate::harness::{Hearth, command, fake_config};

const KEY: &str = "alert-signing-key";
const WAIT: Duration = Duration::from_secs(30);

/// One POST the receiver got.
struct Hook {
    signature: String,
    content_type: String,
    body: Bytes,
}

impl Hook {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// The signature is the hex HMAC-SHA256 of the exact body.
    fn assert_signed(&self) {
        let mut mac = Hmac::<Sha256>::new_from_slice(KEY.as_bytes()).unwrap();
        mac.update(&self.body);
        let hex: String = mac
            .finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(self.signature, format!("sha256={hex}"));
        assert_eq!(self.content_type, "application/json");
    }
}

struct Receiver {
    tx: mpsc::UnboundedSender<Hook>,
    /// Statuses to answer with, in order; 200 once they run out.
    statuses: Mutex<Vec<u16>>,
}

async fn receive(
    State(r): State<std::sync::Arc<Receiver>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let _ = r.tx.send(Hook {
        signature: header("x-hearth-signature"),
        content_type: header("content-type"),
        body,
    });
    let mut statuses = r.statuses.lock().await;
    let status = if statuses.is_empty() {
        200
    } else {
        statuses.remove(0)
    };
    StatusCode::from_u16(status).unwrap()
}

/// A webhook receiver on loopback; returns its URL and the POSTs it gets.
async fn receiver(statuses: Vec<u16>) -> (String, mpsc::UnboundedReceiver<Hook>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = std::sync::Arc::new(Receiver {
        tx,
        statuses: Mutex::new(statuses),
    });
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Hook>) -> Hook {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("no webhook request in time")
        .expect("receiver closed")
}

fn provider_refusal() -> Reply {
    Reply::http_error(
        400,
        json!({"error": {"message": "bad request", "type": "invalid_request_error"}}),
    )
}

async fn fail_a_run(h: &Hearth, thread: &str) {
    let (s, v) = h
        .post(json!({"text": "hi", "thread_key": thread, "wait": true}))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "failed", "{v}");
}

#[tokio::test]
async fn failed_runs_reach_a_signed_webhook_retried_and_at_most_one_per_interval() {
    // The first POST is refused with 503: the outbox retries it.
    let (url, mut hooks) = receiver(vec![503]).await;
    // The URL carries credentials, which nothing but the POST may show.
    let origin = url.trim_end_matches("/hook").to_owned();
    let url = url.replace("http://", "http://user:hunter2@") + "?token=XXXXSECRET";
    let fake = FakeOpenAi::start().await;
    for _ in 0..3 {
        fake.push(provider_refusal());
    }
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[alerts]\nwebhook_secret_env = \"ALERT_KEY\"\nmin_interval = \"2s\"\n\
         [[alerts.rules]]\non = \"run.failed\"\nto = \"webhook:{url}\"\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start_with(dir.path(), Some(&config), &[("ALERT_KEY", KEY)]).await;
    for i in 0..3 {
        fail_a_run(&h, &format!("api:alert-{i}")).await;
    }

    let first = next(&mut hooks).await;
    first.assert_signed();
    let body = first.json();
    assert_eq!(body["event"], "run.failed");
    assert_eq!(body["data"]["thread_key"], "api:alert-0");
    assert_eq!(body["data"]["code"], "provider_invalid_request", "{body}");
    assert_eq!(body["suppressed"], 0);
    assert!(body["summary"].as_str().unwrap().contains("api:alert-0"));
    assert!(body["at"].as_str().unwrap().ends_with('Z'));

    // The 503 is retried with the same body.
    let retry = next(&mut hooks).await;
    retry.assert_signed();
    assert_eq!(retry.body, first.body);

    // The two held back come as one alert when the interval ends: the latest,
    // counting the other.
    let held = next(&mut hooks).await;
    held.assert_signed();
    let body = held.json();
    assert_eq!(body["data"]["thread_key"], "api:alert-2", "{body}");
    assert_eq!(body["suppressed"], 1);

    // The receiver has answered; hearth records the delivery just after.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (s, outbox) = h.get("/v1/outbox?limit=10").await;
        assert_eq!(s, 200);
        let items = outbox["items"].as_array().unwrap();
        assert_eq!(items.len(), 2, "{outbox}");
        assert!(items.iter().all(|i| i["channel"] == "webhook"), "{outbox}");
        assert!(
            items.iter().all(|i| i["target"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{origin}#"))),
            "{outbox}"
        );
        if items.iter().all(|i| i["status"] == "sent") {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not recorded as sent: {outbox}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(hooks.try_recv().is_err(), "an alert too many");
    let (_, outbox) = h.get("/v1/outbox?limit=10").await;
    let shown = outbox.to_string();
    assert!(
        !shown.contains("hunter2") && !shown.contains("XXXXSECRET"),
        "{shown}"
    );
    let log = std::fs::read_to_string(h.home.join("serve.log")).unwrap();
    assert!(
        !log.contains("hunter2") && !log.contains("XXXXSECRET"),
        "{log}"
    );
    // Nor does the database hold them.
    let db = rusqlite::Connection::open(h.home.join("hearth.db")).unwrap();
    let mut targets = db.prepare("SELECT target FROM outbox").unwrap();
    let targets: Vec<String> = targets
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(targets.len(), 2);
    for t in targets {
        assert!(!t.contains("hunter2") && !t.contains("XXXXSECRET"), "{t}");
    }
}

const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
const ALICE: i64 = 1001;
const BOB: i64 = 1002;

fn texts(st: &TelegramState, chat: i64) -> Vec<String> {
    st.visible_in(chat).iter().map(|m| m.text.clone()).collect()
}

#[tokio::test]
async fn channel_trouble_reaches_the_webhook_and_failed_runs_a_telegram_chat() {
    let (url, mut hooks) = receiver(Vec::new()).await;
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    // Telegram fails hearth's first three polls: the channel degrades.
    tg.fail_method("getUpdates", 3, Failure::Status(502));
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         allowed_users = [{ALICE}, {BOB}]\npoll_timeout_secs = 1\n\
         [alerts]\nwebhook_secret_env = \"ALERT_KEY\"\n\
         [[alerts.rules]]\non = \"channel.degraded\"\nto = \"webhook:{url}\"\n\
         [[alerts.rules]]\non = \"outbox.failed\"\nmatch = \"telegram\"\nto = \"webhook:{url}\"\n\
         [[alerts.rules]]\non = \"run.*\"\nmatch = \"api:*\"\nto = \"telegram:chat:{ALICE}\"\n",
        fake_config(&fake.base_url()),
        tg.url()
    );
    let h = Hearth::start_with(
        dir.path(),
        Some(&config),
        &[("TG_TOKEN", TOKEN), ("ALERT_KEY", KEY)],
    )
    .await;

    let degraded = next(&mut hooks).await;
    degraded.assert_signed();
    let body = degraded.json();
    assert_eq!(body["event"], "channel.degraded");
    assert_eq!(body["data"]["channel"], "telegram");
    assert!(
        body["data"]["error"].as_str().unwrap().contains("502"),
        "{body}"
    );

    // A run on an API thread fails: Alice's chat is told (the rule's match
    // is on the thread).
    tg.add_chat(ALICE);
    fake.push(provider_refusal());
    fail_a_run(&h, "api:ops").await;
    let told = tg
        .wait_for(
            |st| {
                texts(st, ALICE)
                    .iter()
                    .any(|t| t.contains("hearth alert (run.failed)") && t.contains("api:ops"))
            },
            WAIT,
        )
        .await;
    assert!(
        told,
        "Alice's chat shows {:?}",
        tg.with_state(|st| texts(st, ALICE))
    );

    // Bob blocked the bot: his answer fails for good, and the webhook hears.
    tg.fail_method(
        "sendMessage",
        1,
        Failure::Error {
            code: 403,
            description: "Forbidden: bot was blocked by the user".into(),
        },
    );
    tg.push_update(tg.private_text(&User::new(BOB), "hello"));
    let failed = next(&mut hooks).await;
    failed.assert_signed();
    let body = failed.json();
    assert_eq!(body["event"], "outbox.failed", "{body}");
    assert_eq!(body["data"]["channel"], "telegram");
    assert_eq!(body["data"]["target"], BOB.to_string());
    assert!(body["data"]["error"].as_str().unwrap().contains("blocked"));
    assert!(tg.rejections().is_empty(), "{:?}", tg.rejections());
}

/// `hearth serve` with `alerts` appended to a working config: its exit code
/// and what it printed.
async fn serve_with(alerts: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    std::fs::write(
        dir.path().join("hearth.toml"),
        format!("{}\n{alerts}", fake_config(&fake.base_url())),
    )
    .unwrap();
    let mut cmd = command(dir.path());
    cmd.arg("serve");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(WAIT, cmd.output())
        .await
        .expect("hearth serve did not stop on a bad config")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn bad_alert_rules_stop_hearth_at_load_with_exit_2() {
    let secret = "[alerts]\nwebhook_secret_env = \"ALERT_KEY\"\n";
    let cases = [
        (
            format!(
                "{secret}[[alerts.rules]]\non = \"run.failed\"\nto = \"webhook:http://user:hunter2@example.org/hook?token=XXXXSECRET\"\n"
            ),
            "webhook URL http://example.org must be https",
        ),
        (
            "[[alerts.rules]]\non = \"run.failed\"\nto = \"telegram:chat:5\"\n".to_owned(),
            "[channels.telegram]",
        ),
        (
            "[[alerts.rules]]\non = \"run.failed\"\nto = \"webhook:https://example.org/hook\"\n"
                .to_owned(),
            "alerts.webhook_secret_env",
        ),
        (
            format!(
                "{secret}[[alerts.rules]]\non = \"run.faild\"\nto = \"webhook:https://example.org/h\"\n"
            ),
            "alerts.rules[0].on",
        ),
        (
            format!("{secret}min_interval = \"often\"\n"),
            "alerts.min_interval",
        ),
        // The variable is named but not set.
        (
            format!(
                "{secret}[[alerts.rules]]\non = \"*\"\nto = \"webhook:https://example.org/h\"\n"
            ),
            "ALERT_KEY",
        ),
    ];
    for (alerts, want) in cases {
        let (code, stderr) = serve_with(&alerts, &[]).await;
        assert_eq!(code, Some(2), "{alerts}\n{stderr}");
        assert!(stderr.contains(want), "{want:?} not in {stderr}");
        assert!(
            !stderr.contains("hunter2") && !stderr.contains("XXXXSECRET"),
            "a webhook URL's credentials were shown: {stderr}"
        );
    }
}
