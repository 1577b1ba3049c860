//! Channels across replicas on one PostgreSQL database: one replica at a
//! time polls Telegram (the fake), the other stands by and takes the poller
//! over when the holder is SIGKILLed, resuming from the stored offset; no
//! update is handled twice and every reply goes out once, in order.

use std::time::{Duration, Instant};

use hearth_testkit::fake_telegram::{FakeTelegram, User};
use hearth_testkit::{FakeOpenAi, Reply};
use serde_json::Value;

use crate::harness::{Hearth, fake_config, poll};
use crate::telegram::{ALICE, WAIT, no_rejections, texts, wait_text};

const TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
/// `[store] lease_secs`: a dead holder's poller is taken over within it and 5 s.
const LEASE_SECS: u64 = 2;

/// A fresh database for a binary built with PostgreSQL; `None` (said on
/// stderr) when the binary or the test server lacks it.
pub(crate) async fn database() -> Option<String> {
    if !cfg!(feature = "postgres") {
        eprintln!("skipped: hearth was built without the postgres feature");
        return None;
    }
    hearth_store::postgres::testing::fresh_database_url().await
}

fn config(fake: &FakeOpenAi, tg: &FakeTelegram) -> String {
    format!(
        "{}\n[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\napi_base = \"{}\"\n\
         allowed_users = [{ALICE}]\npoll_timeout_secs = 1\n\
         [store]\nbackend = \"postgres\"\nlease_secs = {LEASE_SECS}\n",
        fake_config(&fake.base_url()),
        tg.url()
    )
}

/// The replica ids holding `duty`, by `GET /v1/cluster` on `h`.
pub(crate) async fn holders(h: &Hearth, duty: &str) -> Vec<String> {
    let (_, cluster) = h.get("/v1/cluster").await;
    cluster["replicas"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|r| {
            r["holds"]
                .as_array()
                .is_some_and(|hs| hs.iter().any(|d| d == duty))
        })
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect()
}

async fn replica_id(h: &Hearth) -> String {
    let (_, ready) = h.get("/readyz").await;
    ready["replica"].as_str().unwrap().to_owned()
}

/// Once exactly one of `a` and `b` holds `duty`: the holder, the other
/// replica, the holder's id and the other's.
pub(crate) async fn holder_and_standby(
    a: Hearth,
    b: Hearth,
    duty: &str,
) -> (Hearth, Hearth, String, String) {
    let (id_a, id_b) = (replica_id(&a).await, replica_id(&b).await);
    let holder = poll(&format!("one {duty} holder"), WAIT, || async {
        match holders(&a, duty).await.as_slice() {
            [one] => Ok(one.clone()),
            other => Err(other.to_vec()),
        }
    })
    .await;
    if holder == id_a {
        (a, b, id_a, id_b)
    } else {
        assert_eq!(holder, id_b);
        (b, a, id_b, id_a)
    }
}

/// getUpdates calls the fake ended because another one came in: two pollers.
fn terminated_polls(tg: &FakeTelegram) -> usize {
    tg.requests()
        .iter()
        .filter(|r| {
            r.method == "getUpdates"
                && r.error
                    .as_deref()
                    .is_some_and(|e| e.contains("terminated by other getUpdates"))
        })
        .count()
}

fn telegram_state(channels: &Value) -> String {
    channels["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "telegram")
        .map(|c| c["state"].as_str().unwrap_or_default().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn one_replica_polls_telegram_and_another_takes_over_when_it_dies() {
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let config = config(&fake, &tg);
    let env = [("HEARTH_DATABASE_URL", url.as_str()), ("TG_TOKEN", TOKEN)];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Hearth::start_with(dir_a.path(), Some(&config), &env).await;
    let b = Hearth::start_with(dir_b.path(), Some(&config), &env).await;
    // Exactly one replica holds the poller; the other stands by, ready.
    let (held, standby, holder, standby_id) = holder_and_standby(a, b, "telegram").await;
    // The standby learns it stands by at its own first try for the lease,
    // which may come a little after the holder's.
    let want = format!("standby: held by {holder}");
    poll("the standby ready and standing by", WAIT, || async {
        let (s, ready) = standby.get("/readyz").await;
        if s == 200 && ready["checks"]["channel:telegram"] == want.as_str() {
            Ok(())
        } else {
            Err((s, ready))
        }
    })
    .await;
    let (_, channels) = standby.get("/v1/channels").await;
    assert_eq!(telegram_state(&channels), "standby", "{channels}");

    let alice = User::new(ALICE);
    for text in ["m1", "m2"] {
        tg.push_update(tg.private_text(&alice, text));
        wait_text(&tg, ALICE, &format!("echo: {text}")).await;
    }
    // Several poll timeouts went by: a second poller would have ended
    // some of the holder's calls.
    assert!(
        tg.wait_for(|st| st.calls("getUpdates") >= 4, WAIT).await,
        "the holder keeps polling"
    );
    let before_kill = terminated_polls(&tg);
    assert_eq!(before_kill, 0, "two replicas polled at once");

    // The holder dies with an update handled (its run under way) and
    // perhaps its offset unstored.
    fake.push(Reply::text("never delivered").with_delay(Duration::from_secs(120)));
    tg.push_update(tg.private_text(&alice, "m3"));
    fake.wait_for_requests(3).await;
    held.kill().await;
    let killed_at = Instant::now();
    poll("the standby takes the poller over", WAIT, || async {
        match holders(&standby, "telegram").await.as_slice() {
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
    let (_, channels) = standby.get("/v1/channels").await;
    assert_ne!(telegram_state(&channels), "standby", "{channels}");

    tg.push_update(tg.private_text(&alice, "m4"));
    wait_text(&tg, ALICE, "echo: m4").await;
    wait_text(&tg, ALICE, "echo: m3").await;

    // Every update handled once: one answer each, in the order asked (m3's
    // run, resumed by the survivor, ends before m4's starts), and no run
    // made twice for an update read again from the stored offset.
    let answers: Vec<String> = tg.with_state(|st| {
        texts(st, ALICE)
            .into_iter()
            .filter(|t| t.starts_with("echo: "))
            .collect()
    });
    assert_eq!(answers, ["echo: m1", "echo: m2", "echo: m3", "echo: m4"]);
    assert_eq!(
        fake.requests().len(),
        5,
        "one model call per update, and m3's hung one"
    );
    // The dead holder's last call, if the fake still counted it, is the one
    // the survivor's first poll ended.
    assert!(
        terminated_polls(&tg) <= 1,
        "two replicas polled at once: {} calls ended by another",
        terminated_polls(&tg)
    );
    assert_eq!(tg.with_state(|st| st.pending_updates()), 0);
    no_rejections(&tg);
}

#[tokio::test]
async fn a_holder_whose_lease_is_taken_stops_polling_at_once() {
    use hearth_store::Store;
    let Some(url) = database().await else {
        return;
    };
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TOKEN).await;
    let config = config(&fake, &tg);
    let env = [("HEARTH_DATABASE_URL", url.as_str()), ("TG_TOKEN", TOKEN)];
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Hearth::start_with(dir_a.path(), Some(&config), &env).await;
    let b = Hearth::start_with(dir_b.path(), Some(&config), &env).await;
    let holder = poll("one telegram holder", WAIT, || async {
        match holders(&a, "telegram").await.as_slice() {
            [one] => Ok(one.clone()),
            other => Err(other.to_vec()),
        }
    })
    .await;

    // Something else takes the lease (as a replica would whose clock ran
    // ahead): the holder's next renewal is refused and it stops polling.
    let store = hearth_store::PostgresStore::connect(&url, "HEARTH_DATABASE_URL", 1)
        .await
        .unwrap();
    let cluster = store.cluster().unwrap();
    let far = hearth_core::now_ms() + 3_600_000;
    poll("the lease taken", WAIT, || async {
        for id in [replica_id(&a).await, replica_id(&b).await] {
            cluster.release_lease("telegram", &id).await.unwrap();
        }
        let now = hearth_core::now_ms();
        match cluster
            .acquire_lease("telegram", "intruder", far, now)
            .await
        {
            Ok(true) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Within a third of a lease (its renewal) and the poll under way.
    let settled = Duration::from_millis(LEASE_SECS * 1000 / 3) + Duration::from_secs(2);
    tokio::time::sleep(settled).await;
    let calls = tg.with_state(|st| st.calls("getUpdates"));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        tg.with_state(|st| st.calls("getUpdates")),
        calls,
        "a replica polled without the lease (it was {holder}'s)"
    );
    for h in [&a, &b] {
        let (s, ready) = h.get("/readyz").await;
        assert_eq!(s, 200, "{ready}");
        // Who holds it is asked again only now and then: the old holder
        // may still be named.
        let check = ready["checks"]["channel:telegram"].as_str().unwrap();
        assert!(check.starts_with("standby"), "{ready}");
    }

    // Given back, a replica takes it and answers again.
    cluster.release_lease("telegram", "intruder").await.unwrap();
    tg.push_update(tg.private_text(&User::new(ALICE), "back"));
    wait_text(&tg, ALICE, "echo: back").await;
    assert_eq!(holders(&a, "telegram").await.len(), 1);
    no_rejections(&tg);
}
