//! SMS end to end: the real binary on the fake Twilio, answering with the
//! fake provider. Incoming texts are posted to hearth's webhook signed as
//! Twilio signs them; every send hearth makes is checked by the fake.

use std::time::{Duration, Instant};

use hearth_testkit::fake_twilio::{
    ACCOUNT_SID, AUTH_TOKEN, FROM, FakeTwilio, form_body, sign_with,
};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config};

const ALICE: &str = "+15551230001";
const BOB: &str = "+15551230002";
/// The URL Twilio is configured to call (a proxy in front of hearth): the
/// signature is over it, not over hearth's own address.
const PUBLIC_URL: &str = "https://hearth.example.test/channels/sms/twilio";
const TWIML: &str = r#"<?xml version="1.0" encoding="UTF-8"?><Response></Response>"#;
const WAIT: Duration = Duration::from_secs(30);

struct Setup {
    dir: tempfile::TempDir,
    fake: FakeOpenAi,
    twilio: FakeTwilio,
    hearth: Hearth,
}

fn config(fake: &FakeOpenAi, twilio: &FakeTwilio, extra: &str) -> String {
    format!(
        "{}\n[channels.sms]\nenabled = true\naccount_sid = \"{ACCOUNT_SID}\"\nfrom = \"{FROM}\"\n\
         public_url = \"{PUBLIC_URL}\"\napi_base = \"{}\"\nallowed_users = [\"{ALICE}\"]\n{extra}",
        fake_config(&fake.base_url()),
        twilio.api_base()
    )
}

async fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let twilio = FakeTwilio::start().await.unwrap();
    let hearth = Hearth::start_with(
        &dir.path().join("home"),
        Some(&config(&fake, &twilio, extra)),
        &[("TWILIO_AUTH_TOKEN", AUTH_TOKEN)],
    )
    .await;
    Setup {
        dir,
        fake,
        twilio,
        hearth,
    }
}

/// Posts `params` to hearth's SMS webhook with `signature` (if any):
/// status, content type and body.
async fn post(
    h: &Hearth,
    params: &[(String, String)],
    signature: Option<&str>,
) -> (u16, String, String) {
    let mut req = h
        .http
        .post(h.at("/channels/sms/twilio"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(params));
    if let Some(sig) = signature {
        req = req.header("x-twilio-signature", sig);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, r.text().await.unwrap())
}

fn pairs(params: &[(String, String)]) -> Vec<(&str, &str)> {
    params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// A text from `from` as Twilio posts it, signed with the account's token.
async fn text(h: &Hearth, sid: &str, from: &str, body: &str) -> (u16, String, String) {
    let params = FakeTwilio::inbound(sid, from, body);
    let sig = FakeTwilio::sign(PUBLIC_URL, &pairs(&params));
    post(h, &params, Some(&sig)).await
}

/// Sends a text and expects Twilio's empty TwiML answer.
async fn texted(h: &Hearth, sid: &str, from: &str, body: &str) {
    let (status, ctype, answer) = text(h, sid, from, body).await;
    assert_eq!(
        (status, ctype.as_str(), answer.as_str()),
        (200, "text/xml", TWIML)
    );
}

async fn runs_of(h: &Hearth, number: &str) -> Vec<Value> {
    // `+` in a query string reads as a space: encoded.
    let encoded = number.replace('+', "%2B");
    let (s, v) = h.get(&format!("/v1/runs?thread_key=sms:{encoded}")).await;
    assert_eq!(s, 200, "{v}");
    v["runs"].as_array().unwrap().clone()
}

fn no_violations(twilio: &FakeTwilio) {
    let v = twilio.violations();
    assert!(v.is_empty(), "hearth broke Twilio's rules: {v:#?}");
}

#[tokio::test]
async fn signed_texts_are_answered_once_and_bad_signatures_get_403_and_start_nothing() {
    let s = setup("").await;
    let params = FakeTwilio::inbound("SM0001", ALICE, "hello there");
    let p = pairs(&params);
    // Unsigned, signed with another token, signed for another URL, or with
    // a parameter changed after signing: refused, nothing started.
    let wrong_token = sign_with("not-the-auth-token", PUBLIC_URL, &p);
    let wrong_url = FakeTwilio::sign("https://elsewhere.test/channels/sms/twilio", &p);
    let good = FakeTwilio::sign(PUBLIC_URL, &p);
    let mut tampered = params.clone();
    tampered[5].1 = "something else".into();
    for (what, params, sig) in [
        ("unsigned", &params, None),
        ("another token", &params, Some(wrong_token.as_str())),
        ("another url", &params, Some(wrong_url.as_str())),
        ("tampered", &tampered, Some(good.as_str())),
    ] {
        let (status, _, _) = post(&s.hearth, params, sig).await;
        assert_eq!(status, 403, "{what}");
    }
    assert!(
        runs_of(&s.hearth, ALICE).await.is_empty(),
        "a refused post started a run"
    );
    assert_eq!(s.fake.request_count(), 0);

    // Signed as Twilio signs: answered at once with empty TwiML, and again
    // when Twilio posts the same MessageSid twice: one run, one answer.
    let (status, ctype, body) = post(&s.hearth, &params, Some(&good)).await;
    assert_eq!(
        (status, ctype.as_str(), body.as_str()),
        (200, "text/xml", TWIML)
    );
    let (status, _, _) = post(&s.hearth, &params, Some(&good)).await;
    assert_eq!(status, 200);
    let answer = s.twilio.wait_text(ALICE, "echo: hello there", WAIT).await;
    assert_eq!(answer.from.as_deref(), Some(FROM));
    assert_eq!(runs_of(&s.hearth, ALICE).await.len(), 1);
    assert_eq!(s.fake.request_count(), 1);

    // A stranger is offered a pairing code, and gets no model call.
    texted(&s.hearth, "SM0002", BOB, "who are you?").await;
    let offer = s.twilio.wait_text(BOB, "pairing code", WAIT).await;
    assert!(offer.body.contains("hearth pair approve"), "{}", offer.body);
    assert!(runs_of(&s.hearth, BOB).await.is_empty());
    assert_eq!(s.fake.request_count(), 1);
    assert_eq!(s.twilio.sent().len(), 2);
    no_violations(&s.twilio);
}

#[tokio::test]
async fn a_429_is_honoured_and_the_answer_arrives_once() {
    let s = setup("").await;
    s.twilio.rate_limit(2);
    let asked = Instant::now();
    texted(&s.hearth, "SM0100", ALICE, "limited").await;
    let answer = s.twilio.wait_text(ALICE, "echo: limited", WAIT).await;
    assert_eq!(s.twilio.limited(), 1);
    assert!(
        answer.at.duration_since(asked) >= Duration::from_secs(2),
        "sent again before Retry-After"
    );
    assert_eq!(s.twilio.sent().len(), 1, "one answer");
    // The fake counts any send before Retry-After as a violation.
    no_violations(&s.twilio);
}

#[tokio::test]
async fn stop_blocks_replies_until_start_even_across_a_restart_and_help_answers() {
    let s = setup("").await;
    texted(&s.hearth, "SM0200", ALICE, "HELP").await;
    let help = s.twilio.wait_text(ALICE, "STOP", WAIT).await;
    assert!(help.body.contains("START"), "{}", help.body);

    texted(&s.hearth, "SM0201", ALICE, "stop").await;
    texted(&s.hearth, "SM0202", ALICE, "are you there?").await;
    assert!(
        runs_of(&s.hearth, ALICE).await.is_empty(),
        "a run for a number that texted STOP"
    );
    // Recorded in the store: a restart keeps it.
    let Setup {
        dir,
        fake,
        twilio,
        hearth,
    } = s;
    hearth.kill().await;
    let hearth = Hearth::start_with(
        &dir.path().join("home"),
        None,
        &[("TWILIO_AUTH_TOKEN", AUTH_TOKEN)],
    )
    .await;
    texted(&hearth, "SM0203", ALICE, "still there?").await;
    assert!(runs_of(&hearth, ALICE).await.is_empty());
    assert_eq!(fake.request_count(), 0);

    texted(&hearth, "SM0204", ALICE, "START").await;
    texted(&hearth, "SM0205", ALICE, "back again").await;
    twilio.wait_text(ALICE, "echo: back again", WAIT).await;
    assert_eq!(fake.request_count(), 1);
    assert_eq!(
        twilio.sent().len(),
        2,
        "the help text and one answer: {:#?}",
        twilio.sent()
    );
    no_violations(&twilio);
}

#[tokio::test]
async fn a_long_answer_is_split_at_sentences_markdown_stripped_and_the_rest_noted() {
    let s = setup("max_segments = 3\n").await;
    let sentence = "This is **one** sentence of a long answer about `things`. ";
    s.fake
        .push(Reply::text(format!("# Answer\n\n{}", sentence.repeat(150))));
    texted(&s.hearth, "SM0300", ALICE, "tell me everything").await;
    let sent = s.twilio.wait_sent(3, WAIT).await;
    assert_eq!(sent.len(), 3);
    for m in &sent {
        assert!(m.body.chars().count() <= 1600, "{}", m.body.len());
        assert!(!m.body.contains("**") && !m.body.contains('`') && !m.body.contains('#'));
    }
    assert!(
        sent[0].body.starts_with("Answer\n\nThis is one sentence"),
        "{}",
        sent[0].body
    );
    let last = &sent[2].body;
    assert!(
        last.ends_with(
            "The full answer is at https://hearth.example.test/ui, or reply to ask for the rest.]"
        ),
        "{last}"
    );
    let kept = last.rsplit_once('\n').unwrap().0;
    assert!(
        kept.ends_with("about things."),
        "cut inside a sentence: {kept}"
    );
    no_violations(&s.twilio);
}

#[tokio::test]
async fn a_confirmation_is_answered_by_texting_yes_and_its_code() {
    let s = setup("").await;
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "m1",
        "memory_save",
        json!({ "text": "alice likes tea" }).to_string(),
    )]));
    s.fake.push(Reply::text("saved"));
    s.fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "f1",
        "memory_forget",
        json!({ "id": 1 }).to_string(),
    )]));
    s.fake.push(Reply::text("forgotten"));
    texted(&s.hearth, "SM0400", ALICE, "remember I like tea").await;
    s.twilio.wait_text(ALICE, "saved", WAIT).await;
    texted(&s.hearth, "SM0401", ALICE, "forget it").await;
    let prompt = s.twilio.wait_text(ALICE, "Reply YES", WAIT).await;
    assert!(
        prompt.body.starts_with("Approve this action?"),
        "{}",
        prompt.body
    );
    assert!(
        !prompt.body.contains("confirm "),
        "no token in the text: {}",
        prompt.body
    );
    let code = prompt
        .body
        .split("Reply YES ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_owned();
    // A code never sent to this number answers nothing.
    texted(&s.hearth, "SM0402", ALICE, "YES ZZZZZ").await;
    s.twilio
        .wait_text(ALICE, "No question with code ZZZZZ", WAIT)
        .await;
    texted(
        &s.hearth,
        "SM0403",
        ALICE,
        &format!("yes {}", code.to_lowercase()),
    )
    .await;
    s.twilio.wait_text(ALICE, "forgotten", WAIT).await;
    s.twilio.wait_text(ALICE, "Approved.", WAIT).await;
    let runs = runs_of(&s.hearth, ALICE).await;
    assert_eq!(runs.len(), 2, "the answer is not a run: {runs:#?}");
    no_violations(&s.twilio);
}

#[tokio::test]
async fn doctor_checks_the_twilio_credentials_against_api_base() {
    let fake = FakeOpenAi::start().await;
    let twilio = FakeTwilio::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::write(home.join("hearth.toml"), config(&fake, &twilio, "")).unwrap();
    let doctor = |token: &'static str| {
        let home = home.clone();
        async move {
            let (code, out, err) = crate::doctor::hearth(
                &home,
                &["doctor", "--json"],
                &[("TWILIO_AUTH_TOKEN", token)],
            )
            .await;
            let v: Value =
                serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
            let check = v["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == "channel sms")
                .cloned()
                .unwrap_or_else(|| panic!("no sms check: {v:#}"));
            (code, check)
        }
    };
    let (code, check) = doctor(AUTH_TOKEN).await;
    assert_eq!(code, 0, "{check}");
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["message"]
            .as_str()
            .unwrap()
            .contains("credentials accepted"),
        "{check}"
    );
    let (code, check) = doctor("wrong-token-wrong-token").await;
    assert_eq!(code, 1, "{check}");
    assert_eq!(check["status"], "warn", "{check}");
    let message = check["message"].as_str().unwrap();
    assert!(
        message.contains("HTTP 401") && message.contains("check TWILIO_AUTH_TOKEN"),
        "{message}"
    );
    assert!(
        !check.to_string().contains("wrong-token-wrong-token"),
        "the token was shown"
    );
    assert_eq!(twilio.account_reads(), 1);
}
