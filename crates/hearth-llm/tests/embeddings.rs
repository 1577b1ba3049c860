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

mod gemini {
    use std::time::Duration;

    use hearth_llm::gemini::{GeminiConfig, GeminiProvider, GeminiWire};
    use hearth_llm::{ErrorKind, Provider};
    use hearth_testkit::fake_gemini::FakeGemini;

    fn provider(fake: &FakeGemini, key: Option<&str>) -> GeminiProvider {
        let cfg = GeminiConfig {
            name: "gem".into(),
            base_url: fake.base_url(),
            api_key: key.map(str::to_owned),
            api_key_env: None,
            headers: Vec::new(),
            request_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            wire: GeminiWire,
        };
        GeminiProvider::new(cfg, reqwest::Client::new()).unwrap()
    }

    #[tokio::test]
    async fn batch_embed_contents_gives_one_vector_per_input_in_order() {
        let fake = FakeGemini::start().await;
        fake.embed_with(|t| vec![t.len() as f32, 0.5]);
        let p = provider(&fake, Some("AIza-test"));
        assert!(p.embeds());
        let inputs = vec!["ab".to_owned(), "abcd".to_owned()];
        let out = p.embed("gemini-embedding-001", &inputs).await.unwrap();
        assert_eq!(out.vectors, vec![vec![2.0, 0.5], vec![4.0, 0.5]]);
        assert_eq!(out.usage.input_tokens, None, "Gemini reports no tokens");
        let reqs = fake.embedding_requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(
            reqs[0]["requests"][1]["model"],
            "models/gemini-embedding-001"
        );
        assert_eq!(
            reqs[0]["requests"][1]["content"]["parts"][0]["text"],
            "abcd"
        );
        assert!(fake.violations().is_empty(), "{:?}", fake.violations());
        assert!(fake.requests().is_empty(), "no generate request");
    }

    #[tokio::test]
    async fn a_missing_key_is_refused_and_a_bad_model_name_never_sent() {
        let fake = FakeGemini::start().await;
        let err = provider(&fake, None)
            .embed("gemini-embedding-001", &["x".to_owned()])
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::Auth, "{err}");
        assert_eq!(fake.violations().len(), 1);
        let err = provider(&fake, Some("k"))
            .embed("../x", &["x".to_owned()])
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidRequest, "{err}");
        assert_eq!(fake.embedding_requests().len(), 1);
    }
}
