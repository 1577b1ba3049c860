//! The Discord gateway session across processes. One process restarted
//! RESUMEs the session it stored at its stop, so a message sent while it
//! was down is replayed by Discord (the fake) and answered; a resume
//! Discord refuses falls back to IDENTIFY and the log says so. Across
//! replicas on one PostgreSQL database: when the replica holding the
//! gateway is SIGKILLed, the one taking it over resumes the dead holder's
//! session and answers what came meanwhile, once.

use std::time::{Duration, Instant};

use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_discord::{FakeDiscord, SentMessage};

use crate::discord::{ALICE, DM, TOKEN, config, no_violations, setup};
use crate::harness::{Hearth, poll};
use crate::postgres_channels::{database, holder_and_standby, holders};

/// `[store] lease_secs`: a dead holder's gateway is taken over within it and 5 s.
const LEASE_SECS: u64 = 2;
const WAIT: Duration = Duration::from_secs(30);

fn answers<'a>(msgs: &'a [SentMessage], text: &str) -> Vec<&'a str> {
    msgs.iter()
        .map(|m| m.content.as_str())
        .filter(|c| *c == text)
        .collect()
}

#[tokio::test]
async fn the_replica_taking_the_gateway_over_resumes_it_and_answers_what_came_meanwhile_once() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let dc = FakeDiscord::start(TOKEN).await;
    let store = format!("[store]\nbackend = \"postgres\"\nlease_secs = {LEASE_SECS}\n");
    let config = config(&fake, &dc, &store);
    let env = [("HEARTH_DATABASE_URL", url.as_str()), ("DC_TOKEN", TOKEN)];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Hearth::start_with(dir_a.path(), Some(&config), &env).await;
    let b = Hearth::start_with(dir_b.path(), Some(&config), &env).await;
    let (held, standby, _, standby_id) = holder_and_standby(a, b, "discord").await;
    dc.wait_ready(1).await;
    dc.message(DM, None, ALICE, false, "before");
    dc.wait_message("echo: before").await;

    held.kill().await;
    let killed_at = Instant::now();
    dc.wait_disconnected().await;
    // Nobody is connected: Discord keeps it for a RESUME of the session.
    dc.message(DM, None, ALICE, false, "while away");
    poll("the standby takes the gateway over", WAIT, || async {
        match holders(&standby, "discord").await.as_slice() {
            [one] if *one == standby_id => Ok(()),
            other => Err(other.to_vec()),
        }
    })
    .await;
    let took = killed_at.elapsed();
    assert!(
        took <= Duration::from_secs(LEASE_SECS + 5),
        "taken over after {took:?}"
    );
    let (session, _) = dc.wait_resumed(1).await;
    assert_eq!(session, "session-1", "the dead holder's session resumed");
    dc.wait_message("echo: while away").await;
    dc.message(DM, None, ALICE, false, "after");
    dc.wait_message("echo: after").await;

    let msgs = dc.messages();
    assert_eq!(answers(&msgs, "echo: before").len(), 1, "{msgs:?}");
    assert_eq!(answers(&msgs, "echo: while away").len(), 1, "{msgs:?}");
    assert_eq!(dc.identifies(), 1, "resumed, never identified again");
    assert_eq!(fake.requests().len(), 3, "one model call per message");
    let log = std::fs::read_to_string(standby.home.join("serve.log")).unwrap();
    assert!(log.contains("resuming the stored gateway session"), "{log}");
    no_violations(&dc);
}

#[tokio::test]
async fn a_restarted_process_resumes_its_session_and_a_refused_resume_identifies_afresh() {
    let s = setup().await;
    let (fake, dc) = (&s.fake, &s.dc);
    dc.message(DM, None, ALICE, false, "before");
    dc.wait_message("echo: before").await;
    let home = s.hearth.home.clone();
    assert!(s.hearth.terminate().await.success());
    dc.wait_disconnected().await;
    dc.message(DM, None, ALICE, false, "while restarting");
    let env = [("DC_TOKEN", TOKEN)];
    let hearth = Hearth::start_with(&home, None, &env).await;
    let (session, _) = dc.wait_resumed(1).await;
    assert_eq!(session, "session-1");
    dc.wait_message("echo: while restarting").await;
    assert_eq!(dc.identifies(), 1, "resumed, not identified again");

    // Down past what Discord keeps: the RESUME is refused, and a new
    // session is made.
    assert!(hearth.terminate().await.success());
    dc.invalidate_session();
    let hearth = Hearth::start_with(&home, None, &env).await;
    dc.wait_ready(2).await;
    assert_eq!(
        dc.refused_resumes().len(),
        1,
        "the stored session was tried"
    );
    dc.message(DM, None, ALICE, false, "after");
    dc.wait_message("echo: after").await;
    let msgs = dc.messages();
    for text in ["echo: before", "echo: while restarting", "echo: after"] {
        assert_eq!(answers(&msgs, text).len(), 1, "{text}: {msgs:?}");
    }
    assert_eq!(fake.requests().len(), 3);
    let log = std::fs::read_to_string(home.join("serve.log")).unwrap();
    let refused = log
        .lines()
        .find(|l| l.contains("Discord refused to resume the gateway session"))
        .unwrap_or_else(|| panic!("the refused resume is not in the log:\n{log}"));
    assert!(refused.contains(" INFO "), "{refused}");
    drop(hearth);
    no_violations(dc);
}
