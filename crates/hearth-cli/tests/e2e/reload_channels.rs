//! Live reload of `[channels]` and `[alerts]`: a reload that changes them
//! builds the chat surface again from the new configuration and swaps it in
//! (a channel whose token changed reconnects with the new one, an enabled
//! channel starts, a disabled one stops, a new alert rule fires), answers
//! of runs in flight still reach their chat, a channel configuration that
//! cannot be served is refused with the old channels serving on, and a
//! reload that leaves them alone does not reconnect them.

use std::time::Duration;

use axum::body::Bytes;
use hearth_testkit::fake_telegram::{FakeTelegram, TelegramState, User};
use hearth_testkit::{FakeOpenAi, Gate, Reply};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::harness::{Hearth, fake_config, poll};

const TOKEN: &str = "7000000001:AAoldTOKENoldTOKENoldTOKENoldTOK";
/// The same bot's token after a rotation.
const TOKEN2: &str = "7000000001:BBnewTOKENnewTOKENnewTOKENnewTOK";
const ALICE: i64 = 1001;
const WAIT: Duration = Duration::from_secs(30);

/// The fake provider's config with a Telegram section reading `token_env`.
fn config(fake: &FakeOpenAi, tg: &FakeTelegram, enabled: bool, token_env: &str) -> String {
    format!(
        "{}\n[channels.telegram]\nenabled = {enabled}\ntoken_env = \"{token_env}\"\n\
         api_base = \"{}\"\nallowed_users = [{ALICE}]\npoll_timeout_secs = 1\n",
        fake_config(&fake.base_url()),
        tg.url()
    )
}

async fn start(home: &std::path::Path, cfg: &str) -> Hearth {
    Hearth::start_with(
        home,
        Some(cfg),
        &[
            ("TG_TOKEN", TOKEN),
            ("TG_TOKEN2", TOKEN2),
            ("ALERT_KEY", "alert-key"),
        ],
    )
    .await
}

async fn reload(h: &Hearth, config: &str) -> (u16, Value) {
    std::fs::write(h.home.join("hearth.toml"), config).unwrap();
    h.send(reqwest::Method::POST, "/v1/config/reload", json!({}))
        .await
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn texts(st: &TelegramState, chat: i64) -> Vec<String> {
    st.visible_in(chat).iter().map(|m| m.text.clone()).collect()
}

async fn wait_text(tg: &FakeTelegram, chat: i64, want: &str) {
    let ok = tg
        .wait_for(|st| texts(st, chat).iter().any(|t| t.contains(want)), WAIT)
        .await;
    assert!(
        ok,
        "no message containing {want:?} in chat {chat}; chat shows {:?}",
        tg.with_state(|st| texts(st, chat))
    );
}

/// Telegram's entry in `GET /v1/channels`.
async fn telegram(h: &Hearth) -> Value {
    let (s, v) = h.get("/v1/channels").await;
    assert_eq!(s, 200, "{v}");
    v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "telegram")
        .unwrap()
        .clone()
}

async fn wait_state(h: &Hearth, state: &str) {
    poll(&format!("telegram {state}"), WAIT, || async {
        let t = telegram(h).await;
        if t["state"] == state { Ok(()) } else { Err(t) }
    })
    .await;
}

fn no_rejections(tg: &FakeTelegram) {
    assert!(tg.rejections().is_empty(), "{:?}", tg.rejections());
}

#[tokio::test]
async fn a_changed_token_reconnects_with_it_and_a_run_in_flight_is_still_answered() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    tg.accept_token(TOKEN2);
    let dir = tempfile::tempdir().unwrap();
    let h = start(dir.path(), &config(&fake, &tg, true, "TG_TOKEN")).await;
    let alice = User::new(ALICE);
    tg.push_update(tg.private_text(&alice, "before"));
    wait_text(&tg, ALICE, "echo: before").await;

    // A run held at the provider while the channels are rebuilt: its
    // answer is routed and sent by the new ones.
    let gate = Gate::new();
    fake.push(Reply::text("the held answer").pausing_after(1, gate.clone()));
    tg.push_update(tg.private_text(&alice, "slow one"));
    poll("the held run at the provider", WAIT, || async {
        let n = fake.requests().len();
        if n == 2 { Ok(()) } else { Err(n) }
    })
    .await;

    let (s, r) = reload(&h, &config(&fake, &tg, true, "TG_TOKEN2")).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["channels"], "{r}");
    assert_eq!(r["needs_restart"], json!([]), "{r}");
    // The old loops stopped before the reload answered; whatever reaches
    // the fake from now on uses the new token.
    let from = tg.requests().len();
    gate.open();
    wait_text(&tg, ALICE, "the held answer").await;
    tg.push_update(tg.private_text(&alice, "after"));
    wait_text(&tg, ALICE, "echo: after").await;

    let after: Vec<_> = tg.requests().split_off(from);
    assert!(
        after
            .iter()
            .any(|r| r.method == "getUpdates" && r.token == TOKEN2),
        "no getUpdates with the new token: {:?}",
        after.iter().map(|r| &r.method).collect::<Vec<_>>()
    );
    let old: Vec<_> = after
        .iter()
        .filter(|r| r.token == TOKEN)
        .map(|r| &r.method)
        .collect();
    assert!(old.is_empty(), "the old token is still used: {old:?}");
    wait_state(&h, "connected").await;
    no_rejections(&tg);
}

#[tokio::test]
async fn enabling_a_channel_starts_it_and_disabling_it_stops_it() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let h = start(dir.path(), &config(&fake, &tg, false, "TG_TOKEN")).await;
    let t = telegram(&h).await;
    assert_eq!(
        (t["enabled"].clone(), t["state"].clone()),
        (json!(false), json!("disabled"))
    );
    assert_eq!(tg.with_state(|st| st.calls("getUpdates")), 0);

    let (s, r) = reload(&h, &config(&fake, &tg, true, "TG_TOKEN")).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["channels"], "{r}");
    wait_state(&h, "connected").await;
    assert_eq!(telegram(&h).await["enabled"], true);
    tg.push_update(tg.private_text(&User::new(ALICE), "hello"));
    wait_text(&tg, ALICE, "echo: hello").await;

    let (s, r) = reload(&h, &config(&fake, &tg, false, "TG_TOKEN")).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["channels"], "{r}");
    let t = telegram(&h).await;
    assert_eq!(
        (t["enabled"].clone(), t["state"].clone()),
        (json!(false), json!("disabled"))
    );
    // Stopped before the reload answered: no poll follows, and a message
    // sent now stays with Telegram. (Waiting longer than a poll's timeout
    // is the only way to see that nothing happens.)
    let polls = tg.with_state(|st| st.calls("getUpdates"));
    tg.push_update(tg.private_text(&User::new(ALICE), "anyone?"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(tg.with_state(|st| st.calls("getUpdates")), polls);
    assert_eq!(tg.with_state(TelegramState::pending_updates), 1);
    assert_eq!(fake.requests().len(), 1);
    no_rejections(&tg);
}

/// A webhook receiver on loopback; its URL and the bodies it gets.
async fn receiver() -> (String, mpsc::UnboundedReceiver<Bytes>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: Bytes| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body);
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, rx)
}

#[tokio::test]
async fn an_alert_rule_added_by_a_reload_fires() {
    let (url, mut hooks) = receiver().await;
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let base = fake_config(&fake.base_url());
    let h = start(dir.path(), &base).await;

    let with_rule = format!(
        "{base}\n[alerts]\nwebhook_secret_env = \"ALERT_KEY\"\n\
         [[alerts.rules]]\non = \"run.failed\"\nto = \"webhook:{url}\"\n"
    );
    let (s, r) = reload(&h, &with_rule).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["alerts"], "{r}");
    assert_eq!(r["needs_restart"], json!([]), "{r}");

    fake.push(Reply::http_error(
        400,
        json!({"error": {"message": "bad request", "type": "invalid_request_error"}}),
    ));
    let (s, v) = h
        .post(json!({"text": "hi", "thread_key": "api:alerted", "wait": true}))
        .await;
    assert_eq!((s, v["status"].clone()), (200, json!("failed")), "{v}");
    let body = tokio::time::timeout(WAIT, hooks.recv())
        .await
        .expect("no alert in time")
        .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["event"], "run.failed", "{body}");
    assert_eq!(body["data"]["thread_key"], "api:alerted", "{body}");
}

#[tokio::test]
async fn channels_that_cannot_be_served_are_refused_and_the_old_ones_serve_on() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let good = config(&fake, &tg, true, "TG_TOKEN");
    let h = start(dir.path(), &good).await;
    wait_state(&h, "connected").await;
    let (_, before) = h.get("/v1/config").await;

    // The token variable is not set: serve would refuse to start on it.
    let (s, v) = reload(&h, &config(&fake, &tg, true, "TG_UNSET")).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["error"]["code"], "invalid_config", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("TG_UNSET"),
        "{v}"
    );
    let (_, after) = h.get("/v1/config").await;
    assert_eq!(before, after);
    assert_eq!(telegram(&h).await["state"], "connected");
    tg.push_update(tg.private_text(&User::new(ALICE), "still there?"));
    wait_text(&tg, ALICE, "echo: still there?").await;
    assert_eq!(tg.with_state(|st| st.calls("getMe")), 1);
    no_rejections(&tg);
}

#[tokio::test]
async fn a_reload_that_leaves_the_channels_alone_does_not_reconnect_them() {
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    let good = config(&fake, &tg, true, "TG_TOKEN");
    let h = start(dir.path(), &good).await;
    wait_state(&h, "connected").await;
    let me = tg.with_state(|st| st.calls("getMe"));

    let (s, r) = reload(&h, &format!("{good}[agent]\nmax_steps = 7\n")).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["agent"], "{r}");
    tg.push_update(tg.private_text(&User::new(ALICE), "same bot?"));
    wait_text(&tg, ALICE, "echo: same bot?").await;
    assert_eq!(tg.with_state(|st| st.calls("getMe")), me, "reconnected");

    // Only the alerts change: the chat surface is built again, and the
    // Telegram channel, the same as before, is taken over connected.
    let (url, _hooks) = receiver().await;
    let (s, r) = reload(
        &h,
        &format!(
            "{good}[agent]\nmax_steps = 7\n[alerts]\nwebhook_secret_env = \"ALERT_KEY\"\n\
             [[alerts.rules]]\non = \"run.failed\"\nto = \"webhook:{url}\"\n"
        ),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(names(&r["changed"]), ["alerts"], "{r}");
    tg.push_update(tg.private_text(&User::new(ALICE), "still the same?"));
    wait_text(&tg, ALICE, "echo: still the same?").await;
    assert_eq!(tg.with_state(|st| st.calls("getMe")), me, "reconnected");
    assert_eq!(telegram(&h).await["state"], "connected");
    no_rejections(&tg);
}
