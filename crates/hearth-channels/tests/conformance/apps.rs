//! Other bots' app manifests through Discord's fake: a mention starting
//! with an enabled action's prefix is sent once as hearth's bot without a
//! model call; a restricted action is only planned; a disabled app or a
//! manifest whose bot is not in the server sends nothing; the model's
//! `app__<app>__<action>` tool sends (or plans) the same way.

#![cfg(feature = "discord")]

use std::time::Duration;

use hearth_channels::ChannelsFactory;
use hearth_runtime::apps::ManifestSource;
use hearth_runtime::testing::{TestRuntime, fake_toml};
use hearth_testkit::fake_discord::{BOT_ID, FakeDiscord};
use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

const TOKEN: &str = "apps-discord-token";
const GUILD: &str = "700000000000000001";
const GENERAL: &str = "710000000000000001";
const ALICE: &str = "100000000000000001";
/// The other bot: a member of the guild.
const DJ_BOT: &str = "920000000000000001";
const OP: &str = "api:operator:test";

struct Apps {
    discord: FakeDiscord,
    model: FakeOpenAi,
    t: TestRuntime,
}

fn manifest(bot: &str) -> Value {
    json!({
        "schema": 1,
        "app": {"name": "dj", "discord_bot_user_id": bot},
        "version": "1.0.0",
        "actions": [
            {"name": "play", "description": "Plays a song in the voice channel",
             "trigger": {"prefix": "!play"},
             "args": [{"name": "song", "required": true}], "dispatch": "send_message"},
            {"name": "ban", "description": "Bans a member", "trigger": {"prefix": "!ban"},
             "args": [{"name": "user", "required": true}], "dispatch": "send_message",
             "permissions": ["BAN_MEMBERS"]},
            {"name": "np", "description": "Says what plays now", "trigger": {"prefix": "!np"},
             "dispatch": "send_message", "reply": "read"}
        ]
    })
}

impl Apps {
    /// hearth on Discord with the dj app (for `bot`) approved and enabled
    /// in the guild, whose member `DJ_BOT` is.
    async fn start(bot: &str) -> Self {
        let model = FakeOpenAi::start().await;
        let discord = FakeDiscord::start(TOKEN).await;
        discord.add_member(GUILD, DJ_BOT);
        let toml = format!(
            "{}\n[apps]\nallow_loopback_urls = true\n[permissions]\ndefault_mode = \"auto\"\n\
             [channels.discord]\nenabled = true\n\
             token_env = \"DC_TOKEN\"\napi_base = \"{}\"\ngateway_url = \"{}\"\n",
            fake_toml(&model.base_url(), "", ""),
            discord.api_base(),
            discord.gateway_url()
        );
        let env = [("DC_TOKEN".to_owned(), TOKEN.to_owned())].into();
        let t =
            TestRuntime::start_with(&toml, |b| b.env(env).surface(Box::new(ChannelsFactory))).await;
        discord.wait_ready(1).await;
        let rt = &t.runtime;
        rt.import_app_manifest(ManifestSource::Document(manifest(bot)), OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        rt.approve_app_version("dj", "1.0.0", OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        rt.enable_app(GUILD, "dj", "1.0.0", OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        Self { discord, model, t }
    }

    fn say(&self, text: &str) -> String {
        let content = format!("<@{BOT_ID}> {text}");
        self.discord
            .message(GENERAL, Some(GUILD), ALICE, false, &content)
    }

    /// Messages hearth posted whose text is exactly `text`.
    fn posted(&self, text: &str) -> usize {
        self.discord
            .messages()
            .iter()
            .filter(|m| m.channel_id == GENERAL && m.content == text)
            .count()
    }

    async fn audit(&self, action: &str) -> Vec<hearth_core::records::AuditEvent> {
        self.t
            .store
            .list_audit(100)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .filter(|e| e.action == action)
            .collect()
    }

    async fn finish(self) {
        let v = self.discord.violations();
        assert!(v.is_empty(), "Discord refused requests: {v:#?}");
        self.t.runtime.shutdown(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_prefix_mention_is_sent_once_without_a_model_call() {
    let a = Apps::start(DJ_BOT).await;
    let id = a.say("!play never gonna");
    a.discord.wait_message("!play never gonna").await;
    // Redelivered: handled once. A later message shows the replay was seen.
    a.discord.redeliver_message(&id);
    a.say("hello");
    a.discord.wait_message("echo: hello").await;
    assert_eq!(a.posted("!play never gonna"), 1);
    assert_eq!(
        a.model.requests().len(),
        1,
        "only `hello` reached the model"
    );
    let sent = a.audit("app.dispatch").await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].actor, format!("discord:user:{ALICE}"));
    assert_eq!(
        sent[0].scope.as_deref(),
        Some(&*format!("discord:guild:{GUILD}"))
    );
    assert!(sent[0].target.contains("app:dj") && sent[0].target.contains("action:play"));
    assert!(sent[0].target.contains(GENERAL));
    assert!(!sent[0].target.contains("never gonna"), "never the text");
    a.finish().await;
}

#[tokio::test]
async fn a_restricted_action_is_only_planned() {
    let a = Apps::start(DJ_BOT).await;
    a.say("!ban 555");
    let notice = a
        .discord
        .wait_message_where("the dry run's notice", |m| m.content.starts_with("Dry run"))
        .await;
    assert!(notice.content.contains("`!ban 555`"), "{}", notice.content);
    assert!(notice.content.contains("BAN_MEMBERS"), "{}", notice.content);
    assert_eq!(a.posted("!ban 555"), 0, "the command is never sent");
    assert!(a.model.requests().is_empty());
    assert_eq!(a.audit("app.dry_run").await.len(), 1);
    assert!(a.audit("app.dispatch").await.is_empty());
    a.finish().await;
}

#[tokio::test]
async fn a_disabled_app_sends_nothing() {
    let a = Apps::start(DJ_BOT).await;
    assert!(
        a.t.runtime
            .disable_app(GUILD, "dj", OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    a.say("!play again");
    a.discord.wait_message("echo: !play again").await;
    assert_eq!(a.posted("!play again"), 0);
    assert!(a.audit("app.dispatch").await.is_empty());
    a.finish().await;
}

#[tokio::test]
async fn a_manifest_for_a_bot_not_in_the_server_is_ignored() {
    let a = Apps::start("930000000000000009").await;
    a.say("!play elsewhere");
    a.discord.wait_message("echo: !play elsewhere").await;
    assert_eq!(a.posted("!play elsewhere"), 0);
    assert!(a.discord.member_lookups() >= 1, "Discord was asked");
    assert!(a.audit("app.dispatch").await.is_empty());
    a.finish().await;
}

#[tokio::test]
async fn the_models_app_tools_send_public_commands_and_plan_restricted_ones() {
    let a = Apps::start(DJ_BOT).await;
    a.model.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_play",
        "app__dj__play",
        r#"{"song":"take on me"}"#,
    )]));
    a.model.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_ban",
        "app__dj__ban",
        r#"{"user":"555"}"#,
    )]));
    a.model.push(Reply::text(
        "Playing it; banning needs a moderator: `!ban 555`.",
    ));
    a.say("play take on me and ban 555");
    a.discord
        .wait_message_where("the answer", |m| m.content.starts_with("Playing it"))
        .await;
    assert_eq!(a.posted("!play take on me"), 1);
    assert_eq!(a.posted("!ban 555"), 0);
    let requests = a.model.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        offered.contains(&"app__dj__play") && offered.contains(&"app__dj__ban"),
        "{offered:?}"
    );
    let last = requests.last().map(ToString::to_string).unwrap_or_default();
    assert!(
        last.contains("planned_command") && last.contains("!ban 555"),
        "{last}"
    );
    // The command went out before the answer, in the run's order.
    let order: Vec<String> = a
        .discord
        .messages()
        .into_iter()
        .map(|m| m.content)
        .collect();
    let play = order.iter().position(|c| c == "!play take on me");
    let answer = order.iter().position(|c| c.starts_with("Playing it"));
    assert!(play < answer, "{order:?}");
    assert_eq!(a.audit("app.dispatch").await.len(), 1);
    assert_eq!(a.audit("app.dry_run").await.len(), 1);
    a.finish().await;
}

/// Serves `body` once per request as JSON on loopback; its URL.
async fn serve(body: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let mut read = Vec::new();
            while !read.windows(4).any(|w| w == b"\r\n\r\n") {
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read.extend_from_slice(&buf[..n]),
                }
            }
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(answer.as_bytes()).await;
        }
    });
    format!("http://{addr}/dj.json")
}

fn plugins(sub: &str, options: Value) -> Value {
    json!({ "name": "plugins", "options": [{ "name": sub, "type": 1, "options": options }] })
}

fn opt(name: &str, value: &str) -> Value {
    json!({ "name": name, "type": 3, "value": value })
}

#[tokio::test]
async fn server_admins_import_enable_list_and_disable_apps_with_plugins() {
    let a = Apps::start(DJ_BOT).await;
    assert!(
        a.t.runtime
            .disable_app(GUILD, "dj", OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    let mut v2 = manifest(DJ_BOT);
    v2["version"] = json!("2.0.0");
    let url = serve(v2.to_string()).await;
    let d = &a.discord;
    let mut answered = 0;
    let mut answer = |kind: &str| {
        answered += 1;
        let n = answered;
        let kind = kind.to_owned();
        async move {
            let callbacks = d.wait_callbacks(n).await;
            let (_, body) = callbacks[n - 1].clone();
            assert_eq!(body["type"].to_string(), kind, "{body}");
            body["data"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };

    // A member without Administrator is refused.
    d.interaction(
        2,
        GENERAL,
        Some(GUILD),
        ALICE,
        plugins("list", json!([])),
        None,
    );
    assert!(answer("4").await.contains("Administrator"));

    d.set_member_permissions("8");
    d.interaction(
        2,
        GENERAL,
        Some(GUILD),
        ALICE,
        plugins("import", json!([opt("url", &url)])),
        None,
    );
    answer("5").await;
    let edits = async {
        loop {
            if let Some((_, body)) = d.original_edits().last() {
                return body["content"].as_str().unwrap_or_default().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let imported = tokio::time::timeout(Duration::from_secs(20), edits)
        .await
        .unwrap_or_else(|_| panic!("the import was never answered"));
    assert!(
        imported.contains("Imported dj version 2.0.0 (pending)"),
        "{imported}"
    );

    let enable = plugins("enable", json!([opt("app", "dj"), opt("version", "2.0.0")]));
    d.interaction(2, GENERAL, Some(GUILD), ALICE, enable.clone(), None);
    assert!(answer("4").await.contains("approve it first"));
    a.t.runtime
        .approve_app_version("dj", "2.0.0", OP)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    d.interaction(2, GENERAL, Some(GUILD), ALICE, enable, None);
    assert!(
        answer("4")
            .await
            .contains("dj version 2.0.0 is enabled in this server")
    );
    d.interaction(
        2,
        GENERAL,
        Some(GUILD),
        ALICE,
        plugins("list", json!([])),
        None,
    );
    let list = answer("4").await;
    assert!(list.contains("dj 2.0.0 — approved, enabled here"), "{list}");
    assert!(list.contains("dj 1.0.0 — approved") && !list.contains("1.0.0 — approved, enabled"));

    a.say("!play v2");
    d.wait_message("!play v2").await;

    d.interaction(
        2,
        GENERAL,
        Some(GUILD),
        ALICE,
        plugins("disable", json!([opt("app", "dj")])),
        None,
    );
    assert!(answer("4").await.contains("dj is disabled in this server"));
    let enabled =
        a.t.runtime
            .list_apps()
            .await
            .unwrap_or_else(|e| panic!("{e}"))
            .enablements;
    assert!(enabled.is_empty(), "{enabled:?}");
    let who = a.audit("app.enable").await;
    assert!(
        who.iter()
            .any(|e| e.actor == format!("discord:user:{ALICE}")),
        "{who:?}"
    );
    a.finish().await;
}

#[tokio::test]
async fn the_bots_reply_is_read_back_when_the_manifest_says_so() {
    let a = Apps::start(DJ_BOT).await;
    a.model.push(Reply::tool_calls(vec![ToolCallSpec::new(
        "call_np",
        "app__dj__np",
        "{}",
    )]));
    a.model.push(Reply::text("It is take on me."));
    a.say("what is playing?");
    a.discord.wait_message("!np").await;
    // Another bot's message that is not the dj's is not its reply.
    a.discord.message(
        GENERAL,
        Some(GUILD),
        "940000000000000004",
        true,
        "I am another bot",
    );
    a.discord.message(
        GENERAL,
        Some(GUILD),
        DJ_BOT,
        true,
        "Now playing: take on me",
    );
    a.discord.wait_message("It is take on me.").await;
    let requests = a.model.requests();
    assert_eq!(requests.len(), 2);
    let fed = requests[1].to_string();
    assert!(fed.contains("Now playing: take on me"), "{fed}");
    assert!(!fed.contains("I am another bot"), "{fed}");
    a.finish().await;
}

#[tokio::test]
async fn an_app_enabled_by_another_replica_is_offered_to_the_next_mention() {
    let a = Apps::start(DJ_BOT).await;
    assert!(
        a.t.runtime
            .disable_app(GUILD, "dj", OP)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    );
    // Another process sharing the store turns it on again.
    a.t.store
        .enable_app(GUILD, "dj", "1.0.0", "api:operator:other", 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    a.model.push(Reply::text("noted"));
    a.say("anything to play?");
    a.discord.wait_message("noted").await;
    let requests = a.model.requests();
    let offered: Vec<&str> = requests[0]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"app__dj__play"), "{offered:?}");
    a.finish().await;
}
