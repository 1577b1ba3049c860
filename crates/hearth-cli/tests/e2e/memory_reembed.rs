//! `hearth memory reembed`: after `[memory] embeddings` names another
//! model, every fact is embedded again by it through the fake's
//! `/v1/embeddings`, and carries that model's vector; with embeddings off
//! the command refuses and says what to set.

use hearth_testkit::{FakeOpenAi, Reply, ToolCallSpec};
use serde_json::{Value, json};

use crate::harness::{Hearth, command, fake_config};

const USER: &str = "api:user:mover";
const FACTS: [&str; 2] = ["parked in spot B7 on level 3", "likes green tea"];

fn old_vector(_: &str) -> Vec<f32> {
    vec![1.0, 0.0, 0.0]
}

/// The new model's vectors: another dimension, and one per text.
fn new_vector(text: &str) -> Vec<f32> {
    let n = text.len() as f32;
    vec![0.0, n, 0.5, -1.0, 2.0]
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|f| f.to_le_bytes()).collect()
}

/// `(text, embedding_model, embedding)` of every stored memory.
fn stored(home: &std::path::Path) -> Vec<(String, Option<String>, Option<Vec<u8>>)> {
    let db = rusqlite::Connection::open(home.join("hearth.db")).unwrap();
    let mut stmt = db
        .prepare("SELECT text, embedding_model, embedding FROM memories ORDER BY id")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap()
}

fn config(base_url: &str, model: Option<&str>) -> String {
    match model {
        Some(m) => format!("{}[memory]\nembeddings = \"{m}\"\n", fake_config(base_url)),
        None => fake_config(base_url),
    }
}

async fn reembed(home: &std::path::Path) -> (i32, String, String) {
    let out = command(home)
        .args(["memory", "reembed"])
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn after_a_change_of_model_every_fact_carries_the_new_models_vector() {
    let fake = FakeOpenAi::start().await;
    fake.embed_with(old_vector);
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(
        dir.path(),
        Some(&config(&fake.base_url(), Some("fake/embed-model"))),
    )
    .await;
    for (i, fact) in FACTS.iter().enumerate() {
        fake.push(Reply::tool_calls(vec![ToolCallSpec::new(
            format!("call_{i}"),
            "memory_save",
            json!({ "text": fact }).to_string(),
        )]));
        fake.push(Reply::text("Noted."));
        let (s, v) = h
            .post(
                json!({ "text": format!("remember: {fact}"), "thread_key": "api:facts",
                          "user_key": USER, "wait": true }),
            )
            .await;
        assert_eq!((s, &v["status"]), (200, &json!("succeeded")), "{v}");
    }
    h.terminate().await;
    for (text, model, vector) in stored(dir.path()) {
        assert_eq!(model.as_deref(), Some("fake/embed-model"), "{text}");
        assert_eq!(vector, Some(bytes(&old_vector(&text))), "{text}");
    }

    std::fs::write(
        dir.path().join("hearth.toml"),
        config(&fake.base_url(), Some("fake/embed-model-2")),
    )
    .unwrap();
    fake.embed_with(new_vector);
    let (code, out, err) = reembed(dir.path()).await;
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(
        out.trim(),
        "re-embedded 2 memories with fake/embed-model-2",
        "{err}"
    );
    let rows = stored(dir.path());
    assert_eq!(rows.len(), FACTS.len());
    for (text, model, vector) in rows {
        assert_eq!(model.as_deref(), Some("fake/embed-model-2"), "{text}");
        assert_eq!(vector, Some(bytes(&new_vector(&text))), "{text}");
    }
    let sent: Vec<Value> = fake
        .embedding_requests()
        .into_iter()
        .filter(|r| r["model"] == "embed-model-2")
        .collect();
    let texts: Vec<&str> = sent
        .iter()
        .flat_map(|r| {
            r["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap())
        })
        .collect();
    assert_eq!(texts, FACTS, "each fact sent once to the new model");

    // Again: nothing left to embed, nothing sent.
    let (code, out, err) = reembed(dir.path()).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "re-embedded 0 memories with fake/embed-model-2");
    assert_eq!(
        fake.embedding_requests()
            .iter()
            .filter(|r| r["model"] == "embed-model-2")
            .count(),
        sent.len()
    );
    assert!(fake.violations().is_empty(), "{:?}", fake.violations());
}

#[tokio::test]
async fn with_embeddings_off_reembed_refuses_and_says_what_to_set() {
    let fake = FakeOpenAi::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path()).unwrap();
    std::fs::write(
        dir.path().join("hearth.toml"),
        config(&fake.base_url(), None),
    )
    .unwrap();
    let (code, _, err) = reembed(dir.path()).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("[memory] embeddings"), "{err}");
    assert!(fake.embedding_requests().is_empty());
}
