//! The fake refuses what Telegram refuses and keeps the chats as Telegram
//! would show them. Requests go over a raw HTTP/1.1 connection, so the
//! test kit needs no HTTP client.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::*;

pub(crate) const TOKEN: &str = "123456:TEST-token_x";

/// One keep-alive HTTP/1.1 connection to the fake.
struct Conn {
    tcp: TcpStream,
}

impl Conn {
    async fn open(fake: &FakeTelegram) -> Self {
        let tcp = TcpStream::connect(fake.addr()).await.unwrap();
        Self { tcp }
    }

    /// Sends one request; the status and JSON body, or the I/O error.
    async fn send(
        &mut self,
        verb: &str,
        path: &str,
        body: Option<&Value>,
    ) -> std::io::Result<(u16, Value)> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let head = format!(
            "{verb} {path} HTTP/1.1\r\nhost: fake\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        );
        self.tcp.write_all(head.as_bytes()).await?;
        self.tcp.write_all(body.as_bytes()).await?;
        let mut buf = Vec::new();
        let (head_end, length) = loop {
            let mut chunk = [0u8; 4096];
            let n = self.tcp.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                break (end + 4, length);
            }
        };
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            let n = self.tcp.read(&mut chunk).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let status = String::from_utf8_lossy(&buf[9..12]).parse().unwrap();
        let json = serde_json::from_slice(&buf[head_end..head_end + length]).unwrap_or(Value::Null);
        Ok((status, json))
    }
}

/// Calls `method` with a JSON body on a fresh connection.
pub(crate) async fn call(fake: &FakeTelegram, method: &str, body: Value) -> (u16, Value) {
    let path = format!("/bot{TOKEN}/{method}");
    Conn::open(fake)
        .await
        .send("POST", &path, Some(&body))
        .await
        .unwrap()
}

/// The description of a refused call.
async fn refused(fake: &FakeTelegram, method: &str, body: Value) -> (u16, String) {
    let (status, answer) = call(fake, method, body).await;
    assert_eq!(
        answer["ok"],
        json!(false),
        "{method} was accepted: {answer}"
    );
    assert_eq!(answer["error_code"], json!(status));
    let description = answer["description"].as_str().unwrap().to_owned();
    // A refusal (not an injected failure) is counted as a rejection: it is
    // the last one, and this reading marks it checked.
    let line = format!("{method}: {status} {description}");
    let rejections = fake.rejections();
    assert!(
        rejections.last() == Some(&line) || !rejections.contains(&line),
        "{rejections:?}"
    );
    (status, description)
}

fn bad(what: &str) -> (u16, String) {
    (400, format!("Bad Request: {what}"))
}

#[test]
fn html_is_read_as_telegram_reads_it() {
    let parsed = parse_html(
        "<b>bold <i>both</i></b> &lt;&amp;&gt;&quot;&#128512;&#x41; \
         <a href=\"https://x.y/?a=1&amp;b=2\">link</a> \
         <pre><code class=\"language-rust\">fn x() {}</code></pre><blockquote expandable>q</blockquote>\
         <span class=\"tg-spoiler\">s</span><tg-spoiler>t</tg-spoiler><u>u</u><del>d</del>",
    )
    .unwrap();
    assert_eq!(parsed.text, "bold both <&>\"😀A link fn x() {}qstud");
    assert_eq!(parsed.utf16_len(), parsed.text.encode_utf16().count());
    let kinds: Vec<&str> = parsed.entities.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [
            "italic",
            "bold",
            "text_link",
            "pre",
            "expandable_blockquote",
            "spoiler",
            "spoiler",
            "underline",
            "strikethrough"
        ]
    );
    let link = &parsed.entities[2];
    assert_eq!(link.url.as_deref(), Some("https://x.y/?a=1&b=2"));
    assert_eq!((link.offset, link.length), (18, 4));
    assert_eq!(parsed.entities[3].language.as_deref(), Some("rust"));
}

#[test]
fn html_refuses_what_telegram_refuses() {
    let cases = [
        ("a < b", "Unsupported start tag \"\" at byte offset 2"),
        (
            "<script>x</script>",
            "Unsupported start tag \"script\" at byte offset 0",
        ),
        (
            "<span>x</span>",
            "Unsupported start tag \"span\" at byte offset 0",
        ),
        (
            "<b>x",
            "Can't find end tag corresponding to start tag \"b\"",
        ),
        (
            "<b>x</i>",
            "Unmatched end tag at byte offset 4, expected \"</b>\", found \"</i>\"",
        ),
        ("x</b>", "Unexpected end tag at byte offset 1"),
        ("<b x", "Unclosed start tag at byte offset 0"),
        ("AT&T", "Unsupported HTML entity at byte offset 2"),
        ("&nbsp;", "Unsupported HTML entity at byte offset 0"),
        ("<a>x</a>", "Tag \"a\" at byte offset 0 has no href"),
        (
            "<code><b>x</b></code>",
            "Tag \"b\" at byte offset 6 is inside \"code\", which can contain no entity",
        ),
        (
            "<a href=\"https://x\"><code>x</code></a>",
            "Tag \"code\" at byte offset 20 is inside a link",
        ),
        (
            "<blockquote><blockquote>x</blockquote></blockquote>",
            "Tag \"blockquote\" at byte offset 12 is nested",
        ),
        (
            "<code class=\"language-rust\">x</code>",
            "Tag \"code\" at byte offset 0 has a language outside \"pre\"",
        ),
    ];
    for (html, error) in cases {
        assert_eq!(parse_html(html).unwrap_err(), error, "{html}");
    }
    // A bare `>` is text, as Telegram reads it.
    assert_eq!(parse_html("a > b").unwrap().text, "a > b");
}

#[tokio::test]
async fn routes_tokens_and_methods_like_telegram() {
    let fake = FakeTelegram::start(TOKEN).await;
    let (status, me) = call(&fake, "getMe", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(me["result"]["username"], json!(BOT_USERNAME));
    assert_eq!(me["result"]["id"], json!(123456));
    assert_eq!(fake.bot_id(), 123456);

    // GET with a query, any case of the method name.
    let mut conn = Conn::open(&fake).await;
    let (status, updates) = conn
        .send(
            "GET",
            &format!("/bot{TOKEN}/getupdates?timeout=0&offset=5"),
            None,
        )
        .await
        .unwrap();
    assert_eq!((status, updates), (200, json!({"ok": true, "result": []})));

    let (status, wrong) = conn.send("POST", "/bot1:other/getMe", None).await.unwrap();
    assert_eq!(
        (status, &wrong["description"]),
        (401, &json!("Unauthorized"))
    );
    assert_eq!(
        refused(&fake, "sendPigeon", json!({})).await,
        (404, "Not Found".into())
    );
    let (status, _) = conn.send("GET", "/elsewhere", None).await.unwrap();
    assert_eq!(status, 404);
    assert_eq!(fake.rejections().len(), 2, "{:?}", fake.rejections());
    assert_eq!(fake.with_state(|s| s.calls("getUpdates")), 1);
}

#[tokio::test]
async fn send_message_checks_chat_text_and_markup() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.add_chat(42);
    let send = |body: Value| {
        let mut body = body;
        body["chat_id"] = json!(42);
        body
    };
    assert_eq!(
        refused(&fake, "sendMessage", json!({"chat_id": 7, "text": "x"})).await,
        bad("chat not found")
    );
    assert_eq!(
        refused(&fake, "sendMessage", json!({"text": "x"})).await,
        bad("chat_id is empty")
    );
    assert_eq!(
        refused(&fake, "sendMessage", send(json!({"text": " \n"}))).await,
        bad("message text is empty")
    );
    let html = |text: &str| send(json!({"text": text, "parse_mode": "HTML"}));
    assert_eq!(
        refused(&fake, "sendMessage", html("<b></b>")).await,
        bad("message text is empty")
    );
    assert_eq!(
        refused(&fake, "sendMessage", html("<b>x")).await,
        bad("can't parse entities: Can't find end tag corresponding to start tag \"b\"")
    );
    assert_eq!(
        refused(
            &fake,
            "sendMessage",
            send(json!({"text": "x", "parse_mode": "Markdown"}))
        )
        .await,
        bad("unsupported parse_mode")
    );
    // The limit counts UTF-16 units of the text after entity parsing.
    let over = "😀".repeat(2049);
    assert_eq!(
        refused(&fake, "sendMessage", send(json!({"text": over}))).await,
        bad("message is too long")
    );
    let (status, _) = call(
        &fake,
        "sendMessage",
        send(json!({"text": "😀".repeat(2048)})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = call(&fake, "sendMessage", html(&"&lt;".repeat(4096))).await;
    assert_eq!(status, 200, "escapes count once");
    assert_eq!(
        refused(&fake, "sendMessage", html(&"&lt;".repeat(4097))).await,
        bad("message is too long")
    );

    let markup = |button: Value| {
        send(json!({"text": "pick", "reply_markup": {"inline_keyboard": [[button]]}}))
    };
    let long = "d".repeat(65);
    for data in [json!(""), json!(long)] {
        let button = json!({"text": "A", "callback_data": data});
        assert_eq!(
            refused(&fake, "sendMessage", markup(button)).await,
            bad("BUTTON_DATA_INVALID")
        );
    }
    assert_eq!(
        refused(&fake, "sendMessage", markup(json!({"text": "A"}))).await,
        bad(
            "can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
        )
    );
    assert_eq!(
        refused(
            &fake,
            "sendMessage",
            send(json!({"text": "x", "reply_parameters": {"message_id": 99}}))
        )
        .await,
        bad("message to be replied not found")
    );
    let rejected = fake.rejections().len();
    assert_eq!(rejected, 12, "{:?}", fake.rejections());

    let data = "d".repeat(64);
    let (status, sent) = call(
        &fake,
        "sendMessage",
        markup(json!({"text": "A", "callback_data": data})),
    )
    .await;
    assert_eq!(status, 200);
    let id = sent["result"]["message_id"].as_i64().unwrap();
    assert_eq!(
        sent["result"]["reply_markup"]["inline_keyboard"][0][0]["callback_data"],
        json!(data)
    );
    let body = send(
        json!({"text": "<b>re</b>", "parse_mode": "HTML", "reply_parameters": {"message_id": id}}),
    );
    let (status, reply) = call(&fake, "sendMessage", body).await;
    assert_eq!(status, 200);
    assert_eq!(
        reply["result"]["entities"],
        json!([{"type": "bold", "offset": 0, "length": 2}])
    );

    let chat = fake.with_state(|s| s.visible_in(42).into_iter().cloned().collect::<Vec<_>>());
    assert_eq!(chat.len(), 4);
    assert_eq!(
        chat[2].buttons[0][0].callback_data.as_deref(),
        Some(data.as_str())
    );
    assert_eq!((chat[3].text.as_str(), chat[3].reply_to), ("re", Some(id)));
    assert_eq!(fake.rejections().len(), rejected);
}

#[tokio::test]
async fn edits_and_deletions_change_what_the_chat_shows() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.add_chat(42);
    let buttons = json!({"inline_keyboard": [[{"text": "Go", "callback_data": "go"}]]});
    let (_, sent) = call(
        &fake,
        "sendMessage",
        json!({"chat_id": 42, "text": "one", "reply_markup": buttons}),
    )
    .await;
    let id = sent["result"]["message_id"].clone();
    let edit = |text: &str| json!({"chat_id": 42, "message_id": id, "text": text, "reply_markup": buttons});

    assert_eq!(
        refused(&fake, "editMessageText", edit("one")).await,
        bad(api::NOT_MODIFIED)
    );
    let (status, edited) = call(&fake, "editMessageText", edit("two")).await;
    assert_eq!(status, 200);
    assert!(edited["result"]["edit_date"].is_i64());
    // An edit without reply_markup removes the buttons, as on Telegram.
    let (status, _) = call(
        &fake,
        "editMessageText",
        json!({"chat_id": 42, "message_id": id, "text": "two"}),
    )
    .await;
    assert_eq!(status, 200);
    let shown = &fake.sent()[0];
    assert_eq!(
        (shown.text.as_str(), shown.edits, shown.buttons.is_empty()),
        ("two", 2, true)
    );

    let missing = json!({"chat_id": 42, "message_id": 999, "text": "x"});
    assert_eq!(
        refused(&fake, "editMessageText", missing).await,
        bad("message to edit not found")
    );
    let no_id = json!({"chat_id": 42, "text": "x"});
    assert_eq!(
        refused(&fake, "editMessageText", no_id).await,
        bad("message identifier is not specified")
    );
    let (status, _) = call(
        &fake,
        "deleteMessage",
        json!({"chat_id": 42, "message_id": id}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(fake.sent()[0].deleted);
    assert_eq!(
        refused(
            &fake,
            "deleteMessage",
            json!({"chat_id": 42, "message_id": id})
        )
        .await,
        bad("message to delete not found")
    );
    assert_eq!(
        refused(&fake, "editMessageText", edit("three")).await,
        bad("message to edit not found")
    );
}

#[tokio::test]
async fn get_updates_long_polls_and_confirms_by_offset() {
    let fake = FakeTelegram::start(TOKEN).await;
    let alice = User::new(11);
    let first = fake.push_update(fake.private_text(&alice, "/start"));
    let second = fake.push_update(fake.private_text(&alice, "hello"));
    assert_eq!(second, first + 1);

    let (_, got) = call(&fake, "getUpdates", json!({"limit": 1})).await;
    let got = got["result"].as_array().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["update_id"], json!(first));
    assert_eq!(
        got[0]["message"]["entities"][0]["type"],
        json!("bot_command")
    );
    assert_eq!(got[0]["message"]["chat"]["type"], json!("private"));

    // An offset confirms everything below it for good.
    let (_, got) = call(&fake, "getUpdates", json!({"offset": second})).await;
    assert_eq!(got["result"][0]["message"]["text"], json!("hello"));
    let (_, got) = call(&fake, "getUpdates", json!({"offset": second + 1})).await;
    assert_eq!(got["result"], json!([]));
    assert_eq!(fake.with_state(TelegramState::pending_updates), 0);

    // A waiting poll returns as soon as an update is queued.
    let poll = tokio::spawn({
        let addr = fake.addr();
        async move {
            let mut tcp = Conn {
                tcp: TcpStream::connect(addr).await.unwrap(),
            };
            let body = json!({"offset": second + 1, "timeout": 30});
            tcp.send("POST", &format!("/bot{TOKEN}/getUpdates"), Some(&body))
                .await
                .unwrap()
        }
    });
    let group = fake.group_text(-1_005, &alice, "hi all", true);
    assert_eq!(
        group["message"]["text"],
        json!(format!("@{BOT_USERNAME} hi all"))
    );
    // The poll may start after the push; either way it returns it at once.
    fake.push_update(group);
    let (status, got) = tokio::time::timeout(Duration::from_secs(10), poll)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        got["result"][0]["message"]["entities"][0]["type"],
        json!("mention")
    );

    // With nothing queued, the poll ends empty at its timeout.
    let (status, got) = call(
        &fake,
        "getUpdates",
        json!({"offset": second + 2, "timeout": 1}),
    )
    .await;
    assert_eq!((status, got["result"].clone()), (200, json!([])));
    assert!(fake.rejections().is_empty(), "{:?}", fake.rejections());
}

#[tokio::test]
async fn a_second_poll_terminates_the_first_and_a_webhook_forbids_polling() {
    let fake = FakeTelegram::start(TOKEN).await;
    let addr = fake.addr();
    let first = tokio::spawn(async move {
        let mut conn = Conn {
            tcp: TcpStream::connect(addr).await.unwrap(),
        };
        let body = json!({"timeout": 30});
        conn.send("POST", &format!("/bot{TOKEN}/getUpdates"), Some(&body))
            .await
            .unwrap()
    });
    // The first poll is waiting once its generation is taken: a second one
    // started after that terminates it.
    assert!(
        fake.wait_for(|s| s.poll_generation == 1, Duration::from_secs(10))
            .await
    );
    let second = tokio::spawn({
        let addr = fake.addr();
        async move {
            let mut conn = Conn {
                tcp: TcpStream::connect(addr).await.unwrap(),
            };
            let body = json!({"timeout": 30});
            conn.send("POST", &format!("/bot{TOKEN}/getUpdates"), Some(&body))
                .await
                .unwrap()
        }
    });
    let (status, answer) = first.await.unwrap();
    assert_eq!(status, 409);
    assert!(
        answer["description"]
            .as_str()
            .unwrap()
            .starts_with("Conflict: terminated by other getUpdates request")
    );

    // Setting a webhook ends the waiting poll with the webhook conflict.
    let (status, _) = call(&fake, "setWebhook", json!({"url": "https://hearth.example/channels/telegram/webhook", "secret_token": "s3cr-et_"})).await;
    assert_eq!(status, 200);
    let (status, answer) = second.await.unwrap();
    assert_eq!(status, 409);
    assert!(
        answer["description"]
            .as_str()
            .unwrap()
            .starts_with("Conflict: can't use getUpdates method while webhook is active")
    );
    assert_eq!(
        refused(&fake, "setWebhook", json!({"url": "http://plain"})).await,
        bad("bad webhook: An HTTPS URL must be provided for webhook")
    );
    let (status, _) = call(&fake, "deleteWebhook", json!({})).await;
    assert_eq!(status, 200);
    let (status, _) = call(&fake, "getUpdates", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(fake.rejections().len(), 3, "{:?}", fake.rejections());
}

#[tokio::test]
async fn allowed_updates_filter_what_is_delivered() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bob = User::new(12);
    fake.push_update(fake.private_text(&bob, "text"));
    fake.push_update(fake.callback_query(&bob, 12, 1, "pick:1"));
    let (_, got) = call(
        &fake,
        "getUpdates",
        json!({"allowed_updates": ["callback_query"]}),
    )
    .await;
    let got = got["result"].as_array().unwrap().clone();
    assert_eq!(got.len(), 1);
    let query = &got[0]["callback_query"];
    assert_eq!(query["data"], json!("pick:1"));
    assert_eq!(query["message"]["message_id"], json!(1));

    let id = query["id"].clone();
    let (status, _) = call(
        &fake,
        "answerCallbackQuery",
        json!({"callback_query_id": id, "text": "ok"}),
    )
    .await;
    assert_eq!(status, 200);
    let again = json!({"callback_query_id": id});
    assert_eq!(
        refused(&fake, "answerCallbackQuery", again).await,
        bad(api::QUERY_INVALID)
    );
    assert_eq!(
        fake.with_state(|s| s.callback_answers()[0].text.clone()),
        Some("ok".into())
    );
}

#[tokio::test]
async fn reactions_reach_only_a_bot_that_asked_for_them() {
    let fake = FakeTelegram::start(TOKEN).await;
    let bob = User::new(12);
    fake.push_update(fake.private_text(&bob, "text"));
    fake.push_update(fake.reaction(&bob, 12, 1, &[], &["👍"]));
    // The default set leaves reactions out.
    let (_, got) = call(&fake, "getUpdates", json!({})).await;
    let got = got["result"].as_array().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(got[0].get("message").is_some());

    let next = got[0]["update_id"].as_i64().unwrap() + 1;
    let id = fake.push_update(fake.reaction(&bob, 12, 1, &["👍"], &["👎"]));
    let ask = json!({"offset": next, "allowed_updates": ["message", "message_reaction"]});
    let (_, got) = call(&fake, "getUpdates", ask).await;
    assert_eq!(
        got["result"][0]["update_id"],
        json!(id),
        "the first reaction was never sent"
    );
    let r = &got["result"][0]["message_reaction"];
    assert_eq!(r["chat"]["id"], json!(12));
    assert_eq!(r["chat"]["type"], json!("private"));
    assert_eq!(r["message_id"], json!(1));
    assert_eq!(r["user"]["id"], json!(12));
    assert_eq!(r["old_reaction"], json!([{"type": "emoji", "emoji": "👍"}]));
    assert_eq!(r["new_reaction"], json!([{"type": "emoji", "emoji": "👎"}]));

    // setWebhook keeps the same setting.
    let hook = json!({"url": "https://example.org/h", "allowed_updates": ["message"]});
    assert_eq!(call(&fake, "setWebhook", hook).await.0, 200);
    let (_, info) = call(&fake, "getWebhookInfo", json!({})).await;
    assert_eq!(info["result"]["allowed_updates"], json!(["message"]));
    assert!(fake.rejections().is_empty(), "{:?}", fake.rejections());
}

#[tokio::test]
async fn injected_failures_answer_like_telegram_and_are_not_rejections() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.add_chat(42);
    fake.add_chat(43);
    let limited = json!({"chat_id": 42, "text": "x"});
    let msg = json!({"chat_id": 43, "text": "x"});
    fake.fail_method(
        "sendMessage",
        1,
        Failure::TooManyRequests { retry_after: 3 },
    );
    fake.fail_next(1, Failure::Status(502));
    let (status, answer) = call(&fake, "sendMessage", limited).await;
    assert_eq!(status, 429);
    assert_eq!(
        answer,
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 3", "parameters": {"retry_after": 3}})
    );
    // The per-method failure went first; the any-method one hits getMe.
    let (status, answer) = call(&fake, "getMe", json!({})).await;
    assert_eq!(
        (status, &answer["description"]),
        (502, &json!("Bad Gateway"))
    );
    let blocked = Failure::Error {
        code: 403,
        description: "Forbidden: bot was blocked by the user".into(),
    };
    fake.fail_method("sendMessage", 1, blocked);
    assert_eq!(refused(&fake, "sendMessage", msg.clone()).await.0, 403);
    let (status, _) = call(&fake, "sendMessage", msg).await;
    assert_eq!(status, 200);
    assert_eq!(
        fake.sent().len(),
        1,
        "failed sends leave nothing in the chat"
    );
    assert!(fake.rejections().is_empty(), "{:?}", fake.rejections());
    let statuses: Vec<u16> = fake.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 502, 403, 200]);
}

/// A bot that honours a 429 sends nothing to that chat until `retry_after`
/// has passed; one that does not is refused again and the request counted.
#[tokio::test]
async fn a_request_before_retry_after_is_refused_and_counted() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.add_chat(42);
    fake.add_chat(43);
    let to = |chat: i64| json!({"chat_id": chat, "text": "x"});
    fake.fail_method(
        "sendMessage",
        1,
        Failure::TooManyRequests { retry_after: 1 },
    );
    assert_eq!(call(&fake, "sendMessage", to(42)).await.0, 429);
    assert!(fake.rejections().is_empty(), "the 429 itself is scripted");
    // Another chat is not held back.
    assert_eq!(call(&fake, "sendMessage", to(43)).await.0, 200);
    let (status, answer) = call(
        &fake,
        "sendChatAction",
        json!({"chat_id": 42, "action": "typing"}),
    )
    .await;
    assert_eq!(status, 429);
    assert_eq!(answer["parameters"]["retry_after"], json!(1));
    let rejections = fake.rejections();
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert!(
        rejections[0].contains("before the retry_after"),
        "{rejections:?}"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(call(&fake, "sendMessage", to(42)).await.0, 200);
    assert_eq!(fake.rejections().len(), 1);
}

#[tokio::test]
async fn unreachable_closes_open_and_new_connections_until_back() {
    let fake = FakeTelegram::start(TOKEN).await;
    let path = format!("/bot{TOKEN}/getMe");
    let mut pooled = Conn::open(&fake).await;
    assert_eq!(pooled.send("GET", &path, None).await.unwrap().0, 200);

    fake.set_unreachable(true);
    assert!(
        pooled.send("GET", &path, None).await.is_err(),
        "a pooled connection is closed"
    );
    let mut fresh = Conn::open(&fake).await;
    assert!(
        fresh.send("GET", &path, None).await.is_err(),
        "a new connection gets no answer"
    );

    fake.set_unreachable(false);
    assert_eq!(
        Conn::open(&fake)
            .await
            .send("GET", &path, None)
            .await
            .unwrap()
            .0,
        200
    );
    assert_eq!(
        fake.requests().len(),
        2,
        "requests while down are not answered"
    );
}

#[tokio::test]
async fn commands_actions_and_waiting() {
    let fake = FakeTelegram::start(TOKEN).await;
    fake.add_chat(42);
    let command =
        |name: &str, description: &str| json!({"command": name, "description": description});
    let too_many: Vec<Value> = (0..101).map(|i| command(&format!("c{i}"), "d")).collect();
    assert_eq!(
        refused(&fake, "setMyCommands", json!({"commands": too_many})).await,
        bad("BOT_COMMANDS_TOO_MUCH")
    );
    for bad_name in ["Start", "", "has-dash", &"x".repeat(33)] {
        let body = json!({"commands": [command(bad_name, "d")]});
        assert_eq!(
            refused(&fake, "setMyCommands", body).await,
            bad("BOT_COMMAND_INVALID")
        );
    }
    let body = json!({"commands": [command("new", "")]});
    assert_eq!(
        refused(&fake, "setMyCommands", body).await,
        bad("BOT_COMMAND_DESCRIPTION_INVALID")
    );
    let body = json!({"commands": [command("new", "Start over"), command("model_2", "Pick")]});
    assert_eq!(call(&fake, "setMyCommands", body).await.0, 200);
    assert_eq!(fake.with_state(|s| s.commands().len()), 2);

    let typing = json!({"chat_id": 42, "action": "typing"});
    assert_eq!(call(&fake, "sendChatAction", typing).await.0, 200);
    let dancing = json!({"chat_id": 42, "action": "dancing"});
    assert_eq!(
        refused(&fake, "sendChatAction", dancing).await,
        bad("wrong parameter action in request")
    );

    // wait_for wakes on the change it waits for, and gives up at its timeout.
    let sender = tokio::spawn({
        let addr = fake.addr();
        async move {
            let body = json!({"chat_id": 42, "text": "later"});
            let mut conn = Conn {
                tcp: TcpStream::connect(addr).await.unwrap(),
            };
            conn.send("POST", &format!("/bot{TOKEN}/sendMessage"), Some(&body))
                .await
                .unwrap()
        }
    });
    assert!(
        fake.wait_for(
            |s| s.sent().iter().any(|m| m.text == "later"),
            Duration::from_secs(10)
        )
        .await
    );
    assert_eq!(sender.await.unwrap().0, 200);
    assert!(
        !fake
            .wait_for(|s| s.sent().len() > 1, Duration::from_millis(50))
            .await
    );
}

#[tokio::test]
async fn a_poll_whose_client_left_is_not_a_conflict() {
    let fake = FakeTelegram::start(TOKEN).await;
    let mut gone = Conn::open(&fake).await;
    let path = format!("/bot{TOKEN}/getUpdates");
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: fake\r\ncontent-type: application/json\r\ncontent-length: 14\r\n\r\n{{\"timeout\":30}}"
    );
    gone.tcp.write_all(head.as_bytes()).await.unwrap();
    assert!(
        fake.wait_for(|s| s.poll_generation == 1, Duration::from_secs(10))
            .await
    );
    drop(gone);
    let (status, _) = call(&fake, "getUpdates", json!({})).await;
    assert_eq!(status, 200);
    let settled = fake
        .wait_for(|s| s.requests().len() >= 2, Duration::from_millis(300))
        .await;
    assert!(!settled, "{:?}", fake.requests());
    assert!(fake.rejections().is_empty(), "{:?}", fake.rejections());
}
