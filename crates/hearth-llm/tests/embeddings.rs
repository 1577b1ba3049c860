//! Embeddings over OpenAI's `/v1/embeddings`, against the testkit's fake.

use std::time::Duration;

use hearth_llm::{ErrorKind, OpenAiCompatConfig, OpenAiCompatProvider, OpenAiCompatWire, Provider};
use hearth_testkit::FakeOpenAi;

fn provider(fake: &FakeOpenAi, key: Option<&str>) -> OpenAiCompatProvider {
    let cfg = OpenAiCompatConfig {
        name: "fake".into(),
        base_url: fake.base_url(),
        api_key: key.map(str::to_owned),
        api_key_env: None,
        headers: Vec::new(),
        request_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
        wire: OpenAiCompatWire,
    };
    OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap()
}

#[tokio::test]
async fn embeds_each_input_in_order_and_counts_tokens() {
    let fake = FakeOpenAi::start().await;
    fake.embed_with(|t| vec![t.len() as f32, 1.0]);
    let p = provider(&fake, Some("sk-test"));
    assert!(p.embeds());
    let inputs = vec!["a".to_owned(), "abc".to_owned()];
    let out = p.embed("embed-model", &inputs).await.unwrap();
    assert_eq!(out.vectors, vec![vec![1.0, 1.0], vec![3.0, 1.0]]);
    assert_eq!(out.usage.input_tokens, Some(2));
    let reqs = fake.embedding_requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["model"], "embed-model");
    assert_eq!(reqs[0]["input"], serde_json::json!(["a", "abc"]));
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn splits_long_lists_into_batches() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake, Some("sk-test"));
    let inputs: Vec<String> = (0..100).map(|i| format!("fact {i}")).collect();
    let out = p.embed("m", &inputs).await.unwrap();
    assert_eq!(out.vectors.len(), 100);
    assert_eq!(fake.embedding_requests().len(), 2);
    assert!(fake.violations().is_empty());
}

#[tokio::test]
async fn a_refused_key_is_an_auth_error() {
    let fake = FakeOpenAi::start().await;
    let p = provider(&fake, None);
    let err = p.embed("m", &["x".to_owned()]).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Auth, "{err}");
    assert_eq!(fake.violations().len(), 1);
}

#[tokio::test]
async fn echo_has_no_embeddings() {
    let p = hearth_llm::EchoProvider::new();
    assert!(!p.embeds());
    let err = p.embed("m", &["x".to_owned()]).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidRequest);
}
