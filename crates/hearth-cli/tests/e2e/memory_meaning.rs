//! Memory that finds by meaning, end to end: the model saves a fact, the
//! real server embeds it through the fake's `/v1/embeddings`, and
//! `GET /v1/memory/search` finds it from a query that shares no word with
//! it in `hybrid` and `vector` mode, and not in `text` mode.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, fake_config};

const USER: &str = "api:user:car-owner";
const FACT: &str = "parked in spot B7 on level 3";
const QUERY: &str = "where did I leave the car";

/// Vectors by topic, as a real model would place them: parking and cars
/// close together, anything else far from them.
fn topic(text: &str) -> Vec<f32> {
    let t = text.to_lowercase();
    if t.contains("car") || t.contains("parked") {
        vec![0.9, 0.1, 0.0, 0.0]
    } else {
        vec![0.0, 0.0, 1.0, 0.2]
    }
}

async fn search(h: &Hearth, query: &str, mode: Option<&str>) -> (u16, Value) {
    let mut path = format!(
        "/v1/memory/search?q={}&user_key={}",
        urlencode(query),
        urlencode(USER)
    );
    if let Some(m) = mode {
        path.push_str(&format!("&mode={m}"));
    }
    h.get(&path).await
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn texts(v: &Value) -> Vec<(String, String)> {
    v["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {v}"))
        .iter()
        .map(|i| {
            (
                i["text"].as_str().unwrap_or_default().to_owned(),
                i["matched"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

async fn save_by_model(h: &Hearth, fake: &FakeOpenAi, text: &str, call: &str) {
    fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
        call,
        "memory_save",
        json!({ "text": text }).to_string(),
    )]));
    fake.push(Reply::text("Noted."));
    let (s, v) = h
        .post(
            json!({ "text": format!("remember: {text}"), "thread_key": "api:car",
                      "user_key": USER, "wait": true }),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "succeeded", "{v}");
}

#[tokio::test]
async fn a_query_sharing_no_word_finds_the_fact_by_meaning_only() {
    let fake = FakeOpenAi::start().await;
    fake.embed_with(topic);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        "{}[memory]\nembeddings = \"fake/embed-model\"\n",
        fake_config(&fake.base_url())
    );
    let h = Hearth::start(dir.path(), Some(&config)).await;
    save_by_model(&h, &fake, FACT, "call_save_1").await;
    save_by_model(&h, &fake, "likes green tea", "call_save_2").await;

    // Saving embedded each fact with the configured model.
    let embedded: Vec<Value> = fake.embedding_requests();
    assert!(
        embedded
            .iter()
            .any(|r| r["model"] == "embed-model" && r["input"] == json!([FACT])),
        "{embedded:?}"
    );

    let (s, v) = search(&h, QUERY, Some("text")).await;
    assert_eq!(s, 200, "{v}");
    assert!(
        !texts(&v).iter().any(|(t, _)| t == FACT),
        "text mode shares no word with the fact: {v}"
    );
    for mode in [Some("vector"), Some("hybrid"), None] {
        let (s, v) = search(&h, QUERY, mode).await;
        assert_eq!(s, 200, "{mode:?}: {v}");
        let found = texts(&v);
        assert_eq!(
            found.first(),
            Some(&(FACT.to_owned(), "vector".to_owned())),
            "{mode:?}: {v}"
        );
        assert!(v["items"][0]["score"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["items"][0]["id"].as_i64().is_some(), "{v}");
    }
    // Words and meaning agree: found by both.
    let (_, v) = search(&h, "parked car", Some("hybrid")).await;
    assert_eq!(
        texts(&v).first(),
        Some(&(FACT.to_owned(), "both".to_owned())),
        "{v}"
    );
    let (s, v) = search(&h, QUERY, Some("sideways")).await;
    assert_eq!(
        (s, &v["error"]["code"]),
        (400, &json!("invalid_mode")),
        "{v}"
    );

    // Embedding calls are model calls in usage, beside the chat ones.
    let (s, usage) = h.get("/v1/usage?group_by=model").await;
    assert_eq!(s, 200, "{usage}");
    assert!(usage.to_string().contains("fake/embed-model"), "{usage}");
    let violations = fake.violations();
    assert!(violations.is_empty(), "{violations:?}");
}

#[tokio::test]
async fn without_embeddings_search_is_by_words_and_meaning_is_invalid_mode() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&fake_config(&fake.base_url()))).await;
    save_by_model(&h, &fake, FACT, "call_save").await;
    let (s, v) = search(&h, "spot B7", None).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(texts(&v), vec![(FACT.to_owned(), "text".to_owned())]);
    for mode in ["vector", "hybrid"] {
        let (s, v) = search(&h, QUERY, Some(mode)).await;
        assert_eq!(
            (s, &v["error"]["code"]),
            (400, &json!("invalid_mode")),
            "{v}"
        );
    }
    assert!(fake.embedding_requests().is_empty());
    assert!(fake.violations().is_empty());
}
