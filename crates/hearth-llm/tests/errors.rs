//! One error classification for all four adapters: the error bodies real
//! servers send (Anthropic, OpenAI, Gemini, LiteLLM, vLLM, Ollama,
//! OpenRouter, llama.cpp) get the same kind from every adapter, and a TCP
//! reset mid-stream is a network error everywhere.

use std::time::Duration;

use futures_util::StreamExt;
use hearth_core::StreamEvent;
use hearth_llm::anthropic::{AnthropicConfig, AnthropicProvider};
use hearth_llm::gemini::{GeminiConfig, GeminiProvider};
use hearth_llm::openai::{OpenAiConfig, OpenAiProvider};
use hearth_llm::{LlmError, OpenAiCompatConfig, OpenAiCompatProvider, Provider};
use hearth_testkit::fake_anthropic::{AnthropicReply, FakeAnthropic};
use hearth_testkit::fake_gemini::{FakeGemini, GeminiReply};
use hearth_testkit::fake_responses::{FakeResponses, ResponsesReply};
use hearth_testkit::{FakeOpenAi, Reply, ResetServer};
use serde_json::{Value, json};

use crate::harness::{assert_no_secret, call_error, request_for};

const KEY: &str = "sk-errors-test-secret";
const TIMEOUT: Duration = Duration::from_secs(10);

/// The four adapters, each built on a base URL with the test key.
#[derive(Clone, Copy, Debug)]
enum Adapter {
    Compat,
    Anthropic,
    Responses,
    Gemini,
}

const ADAPTERS: [Adapter; 4] = [
    Adapter::Compat,
    Adapter::Anthropic,
    Adapter::Responses,
    Adapter::Gemini,
];

impl Adapter {
    /// The adapter's provider for a server at `base` (scheme and host only),
    /// with the key taken from `key_env`.
    fn provider(self, base: &str, key_env: Option<&str>) -> Box<dyn Provider> {
        let client = reqwest::Client::new();
        let key = Some(KEY.to_owned());
        let key_env = key_env.map(str::to_owned);
        match self {
            Self::Compat => {
                let mut cfg = OpenAiCompatConfig::new("compat", format!("{base}/v1"));
                cfg.api_key = key;
                cfg.api_key_env = key_env;
                cfg.request_timeout = TIMEOUT;
                cfg.idle_timeout = TIMEOUT;
                Box::new(OpenAiCompatProvider::new(cfg, client).unwrap())
            }
            Self::Anthropic => {
                let mut cfg = AnthropicConfig::new("claude", base);
                cfg.api_key = key;
                cfg.api_key_env = key_env;
                cfg.request_timeout = TIMEOUT;
                cfg.idle_timeout = TIMEOUT;
                Box::new(AnthropicProvider::new(cfg, client).unwrap())
            }
            Self::Responses => {
                let mut cfg = OpenAiConfig::new("openai", format!("{base}/v1"));
                cfg.api_key = key;
                cfg.api_key_env = key_env;
                cfg.request_timeout = TIMEOUT;
                cfg.idle_timeout = TIMEOUT;
                Box::new(OpenAiProvider::new(cfg, client).unwrap())
            }
            Self::Gemini => {
                let mut cfg = GeminiConfig::new("gem", format!("{base}/v1beta"));
                cfg.api_key = key;
                cfg.api_key_env = key_env;
                cfg.request_timeout = TIMEOUT;
                cfg.idle_timeout = TIMEOUT;
                Box::new(GeminiProvider::new(cfg, client).unwrap())
            }
        }
    }

    /// The path the adapter posts to, after the base.
    fn path(self) -> &'static str {
        match self {
            Self::Compat => "/v1/chat/completions",
            Self::Anthropic => "/v1/messages",
            Self::Responses => "/v1/responses",
            Self::Gemini => "/v1beta/models/m:streamGenerateContent?alt=sse",
        }
    }

    /// An answer's first text delta, `Hel`, in the adapter's wire format.
    fn first_delta(self) -> &'static str {
        match self {
            Self::Compat => {
                "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n"
            }
            Self::Anthropic => {
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n\
                 event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
                 event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hel\"}}\n\n"
            }
            Self::Responses => {
                "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"r\",\"status\":\"in_progress\"}}\n\n\
                 event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"i\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hel\"}\n\n"
            }
            Self::Gemini => {
                "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Hel\"}]},\"index\":0}]}\n\n"
            }
        }
    }
}

/// The four fake servers, one per wire format.
struct Fakes {
    compat: FakeOpenAi,
    anthropic: FakeAnthropic,
    responses: FakeResponses,
    gemini: FakeGemini,
}

impl Fakes {
    async fn start() -> Self {
        Self {
            compat: FakeOpenAi::start().await,
            anthropic: FakeAnthropic::start().await,
            responses: FakeResponses::start().await,
            gemini: FakeGemini::start().await,
        }
    }

    fn base(&self, a: Adapter) -> String {
        let addr = match a {
            Adapter::Compat => self.compat.addr(),
            Adapter::Anthropic => self.anthropic.addr(),
            Adapter::Responses => self.responses.addr(),
            Adapter::Gemini => self.gemini.addr(),
        };
        format!("http://{addr}")
    }

    fn push_http_error(&self, a: Adapter, status: u16, body: Value) {
        match a {
            Adapter::Compat => self.compat.push(Reply::http_error(status, body)),
            Adapter::Anthropic => self
                .anthropic
                .push(AnthropicReply::http_error(status, body)),
            Adapter::Responses => self
                .responses
                .push(ResponsesReply::http_error(status, body)),
            Adapter::Gemini => self.gemini.push(GeminiReply::http_error(status, body)),
        }
    }
}

/// Error responses as the servers named send them, and the kind each must get.
fn corpus() -> Vec<(&'static str, u16, Value, &'static str)> {
    vec![
        (
            "Anthropic overloaded",
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            "overloaded",
        ),
        (
            "Anthropic prompt too long",
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "prompt is too long: 209303 tokens > 200000 maximum"}}),
            "context_length",
        ),
        (
            "Anthropic context limit",
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error",
                "message": "input length and `max_tokens` exceed context limit: 179413 + 32768 > 200000, decrease input length or `max_tokens` and try again"}}),
            "context_length",
        ),
        (
            "Anthropic bad key",
            401,
            json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            "auth",
        ),
        (
            "Anthropic request too large",
            413,
            json!({"type": "error", "error": {"type": "request_too_large",
                "message": "Request exceeds the maximum allowed number of bytes."}}),
            "invalid_request",
        ),
        (
            "OpenAI context length",
            400,
            json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            "context_length",
        ),
        (
            "OpenAI Responses context window",
            400,
            json!({"error": {"message": "Your input exceeds the context window of this model. Please adjust your input and try again.",
                "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}}),
            "context_length",
        ),
        (
            "OpenAI rate limit",
            429,
            json!({"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500, Requested 1.",
                "type": "requests", "param": null, "code": "rate_limit_exceeded"}}),
            "rate_limited",
        ),
        (
            "OpenAI bad key",
            401,
            json!({"error": {"message": "Incorrect API key provided: sk-abc***xyz.",
                "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
            "auth",
        ),
        (
            "OpenAI unknown model",
            404,
            json!({"error": {"message": "The model `gpt-9` does not exist or you do not have access to it.",
                "type": "invalid_request_error", "param": null, "code": "model_not_found"}}),
            "not_found",
        ),
        (
            "OpenAI overloaded",
            503,
            json!({"error": {"message": "The server is overloaded or not ready yet.",
                "type": "server_error", "param": null, "code": null}}),
            "overloaded",
        ),
        (
            "Azure OpenAI content filter",
            400,
            json!({"error": {"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy.",
                "type": null, "param": "prompt", "code": "content_filter", "status": 400}}),
            "content_filter",
        ),
        (
            "Gemini context length",
            400,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}}),
            "context_length",
        ),
        (
            "Gemini overloaded",
            503,
            json!({"error": {"code": 503, "status": "UNAVAILABLE",
                "message": "The model is overloaded. Please try again later."}}),
            "overloaded",
        ),
        (
            "Gemini quota",
            429,
            json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
                "message": "Resource has been exhausted (e.g. check quota)."}}),
            "rate_limited",
        ),
        (
            "Gemini bad key",
            400,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "API key not valid. Please pass a valid API key.",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]}}),
            "auth",
        ),
        (
            "Gemini model without function calling",
            400,
            json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
                "message": "Function calling is not enabled for models/gemma-3-27b-it"}}),
            "tools_unsupported",
        ),
        (
            "LiteLLM context window",
            400,
            json!({"error": {"message": "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - This model's maximum context length is 8192 tokens. However, your messages resulted in 9214 tokens. Please reduce the length of the messages.",
                "type": null, "param": null, "code": "400"}}),
            "context_length",
        ),
        (
            "LiteLLM context window, upstream code",
            400,
            json!({"error": {"message": "litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError",
                "type": "invalid_request_error", "param": null, "code": "context_length_exceeded"}}),
            "context_length",
        ),
        (
            "LiteLLM Anthropic overloaded",
            529,
            json!({"error": {"message": "litellm.InternalServerError: AnthropicException - Overloaded. Handle with `litellm.InternalServerError`.",
                "type": null, "param": null, "code": "529"}}),
            "overloaded",
        ),
        (
            "vLLM context length",
            400,
            json!({"object": "error", "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
                "type": "BadRequestError", "param": null, "code": 400}),
            "context_length",
        ),
        (
            "vLLM without a tool parser",
            400,
            json!({"object": "error", "message": "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                "type": "BadRequestError", "param": null, "code": 400}),
            "tools_unsupported",
        ),
        (
            "vLLM bad parameter",
            400,
            json!({"object": "error", "message": "max_tokens must be at least 1, got -186.",
                "type": "BadRequestError", "param": null, "code": 400}),
            "invalid_request",
        ),
        (
            "Ollama model without tools",
            400,
            json!({"error": {"message": "registry.ollama.ai/library/gemma3:4b does not support tools",
                "type": "api_error", "param": null, "code": null}}),
            "tools_unsupported",
        ),
        (
            "Ollama native model without tools",
            400,
            json!({"error": "registry.ollama.ai/library/qwen:4b does not support tools"}),
            "tools_unsupported",
        ),
        (
            "OpenRouter no endpoint with tools",
            404,
            json!({"error": {"message": "No endpoints found that support tool use. To learn more about provider routing, visit: https://openrouter.ai/docs/provider-routing",
                "code": 404}}),
            "tools_unsupported",
        ),
        (
            "llama.cpp context size",
            400,
            json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error", "n_prompt_tokens": 5000, "n_ctx": 4096}}),
            "context_length",
        ),
        (
            "an ordinary bad request",
            400,
            json!({"error": {"message": "max_tokens is too large: 100000",
                "type": "invalid_request_error", "param": "max_tokens", "code": null}}),
            "invalid_request",
        ),
        (
            "a proxy's bad gateway",
            502,
            json!("upstream connect error"),
            "server",
        ),
    ]
}

#[tokio::test]
async fn every_adapter_classifies_real_error_bodies_alike() {
    let fakes = Fakes::start().await;
    let mut wrong = Vec::new();
    for a in ADAPTERS {
        let p = a.provider(&fakes.base(a), None);
        for (label, status, body, want) in corpus() {
            fakes.push_http_error(a, status, body);
            let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
            assert_no_secret(&err, KEY);
            if err.kind.as_str() != want {
                wrong.push(format!(
                    "{a:?} / {label}: got {}, want {want} ({err})",
                    err.kind.as_str()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Google's rate-limit body, with how long to wait in its details.
fn google_rate_limit() -> Value {
    json!({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).",
        "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}})
}

/// A proxy relaying Gemini (LiteLLM, OpenRouter) passes Google's body on
/// through any wire format: its retry delay counts wherever it arrives.
#[tokio::test]
async fn every_adapter_reads_a_retry_delay_from_the_body() {
    let fakes = Fakes::start().await;
    for a in ADAPTERS {
        let p = a.provider(&fakes.base(a), None);
        fakes.push_http_error(a, 429, google_rate_limit());
        let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
        assert_eq!(err.kind.as_str(), "rate_limited", "{a:?}: {err}");
        assert_eq!(
            err.retry_after,
            Some(Duration::from_secs(37)),
            "{a:?}: {err}"
        );
    }
    let fake = &fakes.compat;
    let p = Adapter::Compat.provider(&fakes.base(Adapter::Compat), None);
    fake.push(Reply::raw_sse(format!("data: {}\n\n", google_rate_limit())));
    let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
    assert_eq!(err.kind.as_str(), "rate_limited", "in a stream: {err}");
    assert_eq!(
        err.retry_after,
        Some(Duration::from_secs(37)),
        "in a stream: {err}"
    );
}

#[tokio::test]
async fn errors_sent_inside_a_compatible_stream_are_classified_too() {
    let fake = FakeOpenAi::start().await;
    let p = Adapter::Compat.provider(&format!("http://{}", fake.addr()), None);
    for (chunk, want) in [
        (
            json!({"error": {"message": "litellm.ContextWindowExceededError: ContextWindowExceededError: This model's maximum context length is 8192 tokens.",
                "type": null, "param": null, "code": "400"}}),
            "context_length",
        ),
        (
            json!({"error": {"message": "Overloaded", "code": 529}}),
            "overloaded",
        ),
        (
            json!({"error": {"message": "Provider returned error", "code": 502}}),
            "server",
        ),
        (
            json!({"error": {"message": "Rate limit exceeded", "code": 429}}),
            "rate_limited",
        ),
    ] {
        fake.push(Reply::raw_sse(format!("data: {chunk}\n\n")));
        let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
        assert_eq!(err.kind.as_str(), want, "{err}");
    }
}

#[tokio::test]
async fn a_tcp_reset_mid_stream_is_a_network_error() {
    for a in ADAPTERS {
        let server = ResetServer::start(ResetServer::event_stream_head(a.first_delta())).await;
        let p = a.provider(&server.base_url(), None);
        let mut stream = p.stream(&request_for("m", "hi")).await.unwrap();
        // The answer has started: its first text arrives before the reset.
        loop {
            match stream.next().await {
                Some(Ok(StreamEvent::TextDelta(t))) => {
                    assert_eq!(t, "Hel", "{a:?}");
                    break;
                }
                Some(Ok(_)) => {}
                other => panic!("{a:?}: expected the first text, got {other:?}"),
            }
        }
        server.reset();
        let err: LlmError = loop {
            match stream.next().await {
                Some(Err(e)) => break e,
                Some(Ok(ev)) => assert!(
                    !matches!(ev, StreamEvent::Finish(_)),
                    "{a:?}: a reset stream must not finish"
                ),
                None => panic!("{a:?}: the stream ended without an error"),
            }
        };
        assert_eq!(err.kind.as_str(), "network", "{a:?}: {err}");
        assert!(stream.next().await.is_none(), "{a:?}: the error is last");
    }
}

#[tokio::test]
async fn a_failed_call_names_the_url_and_the_key_variable_never_the_key() {
    let fakes = Fakes::start().await;
    for a in ADAPTERS {
        let base = fakes.base(a);
        let p = a.provider(&base, Some("HEARTH_TEST_API_KEY"));
        fakes.push_http_error(
            a,
            401,
            json!({"error": {"message": "invalid key", "type": "authentication_error"}}),
        );
        let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
        let shown = err.to_string();
        assert_eq!(err.kind.as_str(), "auth", "{a:?}: {shown}");
        assert!(
            shown.contains(&format!("{base}{}", a.path())),
            "{a:?}: {shown}"
        );
        assert!(shown.contains("HEARTH_TEST_API_KEY"), "{a:?}: {shown}");
        // A refused key says what to do about it.
        assert!(
            shown.contains("check that HEARTH_TEST_API_KEY holds"),
            "{a:?}: {shown}"
        );
        assert_no_secret(&err, KEY);
    }
    // Without a key, a refusal says how to give one.
    let cfg = OpenAiCompatConfig::new("local", format!("{}/v1", fakes.base(Adapter::Compat)));
    let p: Box<dyn Provider> =
        Box::new(OpenAiCompatProvider::new(cfg, reqwest::Client::new()).unwrap());
    // The fake refuses the keyless request itself, as OpenAI does.
    let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
    assert!(err.to_string().contains("api_key_env"), "{err}");
    let v = fakes.compat.violations();
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains("Authorization"), "{v:?}");
    // A connection that cannot be made names the URL too.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    for a in ADAPTERS {
        let p = a.provider(&base, Some("HEARTH_TEST_API_KEY"));
        let err = call_error(p.as_ref(), &request_for("m", "hi")).await;
        assert_eq!(err.kind.as_str(), "network", "{a:?}: {err}");
        assert!(err.to_string().contains(&base), "{a:?}: {err}");
    }
}
