//! Reactions as router feedback, end to end: a 👍 or 👎 that the asker puts
//! on an answer in Telegram or Discord moves the posterior of the arm that
//! answered, as `POST /v1/runs/{id}/feedback` does; other people's
//! reactions, other emoji, removals and the bot's own reactions do not.

use std::time::Duration;

use hearth_testkit::FakeOpenAi;
use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord};
use hearth_testkit::fake_telegram::{FakeTelegram, User};

use crate::harness::{Hearth, fake_config};
use crate::router::posterior;

const TG_TOKEN: &str = "7000000001:AAtestTOKENtestTOKENtestTOKENtest";
const DC_TOKEN: &str = "MTAwMDAwMDAwMDAwMDAwMDAx.Gfake.discordTOKENdiscordTOKEN";
const WAIT: Duration = Duration::from_secs(30);

/// A learning router over two arms of the fake provider.
const ROUTER: &str = "[router]\nstrategy = \"learn\"\nseed = 3\n\
     [[router.arms]]\nmodel = \"fake/fake-model\"\n\
     [[router.arms]]\nmodel = \"fake/other-model\"\ntasks = [\"writing\", \"chat\"]\n";

/// A run's id, the arm that answered it and its task class.
struct Answered {
    run_id: String,
    model: String,
    task: String,
}

async fn poll<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let found = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(v) = probe().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    found.unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

/// The only run on `thread`, once its answer is delivered (the sender has
/// then recorded the answer's messages).
async fn answered(h: &Hearth, thread: &str) -> Answered {
    let (_, runs) = h.get(&format!("/v1/runs?thread_key={thread}")).await;
    let runs = runs["runs"].as_array().unwrap().clone();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();
    poll("the answer's delivery", async || {
        let (_, sent) = h.get("/v1/outbox?status=sent").await;
        sent["items"]
            .as_array()?
            .iter()
            .any(|i| i["run_id"] == run_id.as_str() && i["kind"] == "message")
            .then_some(())
    })
    .await;
    let run = h.wait_run(&run_id).await;
    let (_, trace) = h.get(&format!("/v1/runs/{run_id}/trace")).await;
    assert_eq!(trace["steps"][0]["kind"], "route", "{trace}");
    Answered {
        model: run["model"].as_str().unwrap().to_owned(),
        task: trace["steps"][0]["detail"]["task"]
            .as_str()
            .unwrap()
            .to_owned(),
        run_id,
    }
}

async fn posterior_of(h: &Hearth, a: &Answered) -> (f64, f64, u64) {
    let (_, router) = h.get("/v1/router").await;
    posterior(&router, &a.model, &a.task)
}

async fn wait_posterior(h: &Hearth, a: &Answered, want: (f64, f64, u64)) {
    let mut last = None;
    let reached = tokio::time::timeout(WAIT, async {
        loop {
            let now = posterior_of(h, a).await;
            if now == want {
                return;
            }
            last = Some(now);
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "{} on {}: wanted {want:?}, still {last:?} (run {})",
        a.model,
        a.task,
        a.run_id
    );
}

/// The bot's message in `chat` whose text contains `text`.
fn bot_message(tg: &FakeTelegram, chat: i64, text: &str) -> Option<i64> {
    tg.with_state(|st| {
        st.visible_in(chat)
            .iter()
            .find(|m| m.from_bot && m.text.contains(text))
            .map(|m| m.message_id)
    })
}

/// Waits until hearth has acknowledged every update pushed so far.
async fn acknowledged(tg: &FakeTelegram) {
    let done = tg.wait_for(|st| st.pending_updates() == 0, WAIT).await;
    assert!(done, "updates left unacknowledged");
}

#[tokio::test]
async fn a_thumb_from_the_asker_on_telegram_rates_the_run_and_nothing_else_does() {
    const ALICE: i64 = 1001;
    const BOB: i64 = 1002;
    const GROUP: i64 = -100_777;
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let tg = FakeTelegram::start(TG_TOKEN).await;
    let cfg = format!(
        "{}{ROUTER}[channels.telegram]\nenabled = true\ntoken_env = \"TG_TOKEN\"\n\
         api_base = \"{}\"\nallowed_users = [{ALICE}, {BOB}]\npoll_timeout_secs = 5\n",
        fake_config(&fake.base_url()),
        tg.url()
    );
    let h = Hearth::start_with(
        &dir.path().join("home"),
        Some(&cfg),
        &[("TG_TOKEN", TG_TOKEN)],
    )
    .await;
    let (alice, bob) = (User::new(ALICE), User::new(BOB));
    let question = tg.group_text(GROUP, &alice, "write a poem about the sea", true);
    let question_id = question["message"]["message_id"].as_i64().unwrap();
    tg.push_update(question);
    let answer = poll("the answer", async || bot_message(&tg, GROUP, "echo:")).await;
    let run = answered(&h, &format!("telegram:chat:{GROUP}")).await;
    let (alpha, beta, runs) = posterior_of(&h, &run).await;

    // Another member's thumb, the asker's other emoji and a thumb on the
    // question are no feedback.
    tg.push_update(tg.reaction(&bob, GROUP, answer, &[], &["👎"]));
    tg.push_update(tg.reaction(&alice, GROUP, answer, &[], &["🔥"]));
    tg.push_update(tg.reaction(&alice, GROUP, question_id, &[], &["👎"]));
    acknowledged(&tg).await;
    assert_eq!(posterior_of(&h, &run).await, (alpha, beta, runs));

    tg.push_update(tg.reaction(&alice, GROUP, answer, &["🔥"], &["👍"]));
    wait_posterior(&h, &run, (alpha + 1.0, beta, runs)).await;

    // Taking the thumb back is no new rating; 👎 replaces the 👍.
    tg.push_update(tg.reaction(&alice, GROUP, answer, &["👍"], &[]));
    acknowledged(&tg).await;
    assert_eq!(posterior_of(&h, &run).await, (alpha + 1.0, beta, runs));
    tg.push_update(tg.reaction(&alice, GROUP, answer, &[], &["👎"]));
    wait_posterior(&h, &run, (alpha, beta + 1.0, runs)).await;

    assert!(
        tg.rejections().is_empty(),
        "Telegram would have refused: {:?}",
        tg.rejections()
    );
}

#[tokio::test]
async fn a_thumb_from_the_asker_on_discord_rates_the_run_in_a_guild_and_a_dm() {
    const ALICE: &str = "100000000000000001";
    const BOB: &str = "100000000000000002";
    const DM: &str = "300000000000000001";
    const GUILD: &str = "400000000000000001";
    const GENERAL: &str = "500000000000000001";
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeOpenAi::start().await;
    let dc = FakeDiscord::start(DC_TOKEN).await;
    let cfg = format!(
        "{}{ROUTER}[channels.discord]\nenabled = true\ntoken_env = \"DC_TOKEN\"\n\
         api_base = \"{}\"\ngateway_url = \"\"\nallowed_users = [{ALICE}]\n",
        fake_config(&fake.base_url()),
        dc.api_base()
    );
    let h = Hearth::start_with(
        &dir.path().join("home"),
        Some(&cfg),
        &[("DC_TOKEN", DC_TOKEN)],
    )
    .await;
    dc.wait_ready(1).await;

    dc.message(
        GENERAL,
        Some(GUILD),
        ALICE,
        false,
        &format!("<@{BOT_ID}> write a poem about the sea"),
    );
    let answer = dc.wait_messages(1).await[0].id.clone();
    let run = answered(&h, &format!("discord:channel:{GENERAL}")).await;
    let before = posterior_of(&h, &run).await;
    let (alpha, beta, runs) = before;

    // Another member's thumb, the bot's own and another emoji are no
    // feedback.
    for (user, emoji) in [(BOB, "👎"), (BOT_ID, "👎"), (ALICE, "🔥")] {
        let sent = dc.reaction(GENERAL, Some(GUILD), &answer, user, emoji);
        assert!(
            sent.is_some(),
            "the guild reaction intent was not asked for"
        );
    }
    // Dispatches are handled in order: once this DM is answered, the
    // reactions before it were handled.
    dc.message(DM, None, ALICE, false, "hello there");
    let dm_answer = dc.wait_messages(2).await[1].id.clone();
    assert_eq!(posterior_of(&h, &run).await, before);

    dc.reaction(GENERAL, Some(GUILD), &answer, ALICE, "👍🏽");
    wait_posterior(&h, &run, (alpha + 1.0, beta, runs)).await;

    let dm_run = answered(&h, &format!("discord:channel:{DM}")).await;
    let (dm_alpha, dm_beta, dm_runs) = posterior_of(&h, &dm_run).await;
    let sent = dc.reaction(DM, None, &dm_answer, ALICE, "👎");
    assert!(sent.is_some(), "the DM reaction intent was not asked for");
    wait_posterior(&h, &dm_run, (dm_alpha, dm_beta + 1.0, dm_runs)).await;

    assert!(
        dc.violations().is_empty(),
        "Discord would have refused: {:?}",
        dc.violations()
    );
}
