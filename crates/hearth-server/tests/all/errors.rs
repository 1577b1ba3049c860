//! Every refusal answers in the error envelope; tokens are checked per request.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hearth_server::ServeLimits;
use hearth_store::NewToken;

use crate::harness::{Server, code};

async fn server() -> Server {
    Server::start(ServeLimits::default(), 1024).await
}

#[tokio::test]
async fn a_multibyte_age_is_400_not_a_dropped_connection() {
    let s = server().await;
    for q in ["7%C3%A9", "%C3%A9", "1%E6%97%A5"] {
        let (status, _, v) = s
            .send(s.http.get(s.url(&format!("/v1/usage?since={q}"))))
            .await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{q}: {v}");
    }
}

#[tokio::test]
async fn a_handler_panic_answers_500_internal_in_the_envelope() {
    async fn boom() -> &'static str {
        panic!("deliberate test panic")
    }
    let app = Router::new()
        .route("/boom", get(boom))
        .layer(axum::middleware::from_fn(
            hearth_server::middleware::catch_panic,
        ));
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn hearth_store::Store> = std::sync::Arc::new(
        hearth_store::SqliteStore::open(&dir.path().join("h.db"), Default::default()).unwrap(),
    );
    let s = Server::serve(app, ServeLimits::default(), store, dir).await;
    let (status, _, v) = s.send(s.http.get(s.url("/boom"))).await;
    assert_eq!((status, code(&v)), (500, "internal"), "{v}");
    assert!(
        !v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("deliberate")
    );
    // The server keeps serving after the panic.
    let (status, _, _) = s.send(s.http.get(s.url("/boom"))).await;
    assert_eq!(status, 500);
}

#[tokio::test]
async fn method_not_allowed_has_a_body_and_allow() {
    let s = server().await;
    let (status, headers, v) = s.send(s.http.delete(s.url("/v1/runs"))).await;
    assert_eq!((status, code(&v)), (405, "method_not_allowed"), "{v}");
    assert_eq!(headers["allow"], "GET,HEAD");
    let (status, headers, v) = s.send(s.http.put(s.url("/healthz"))).await;
    assert_eq!((status, code(&v)), (405, "method_not_allowed"), "{v}");
    assert_eq!(headers["allow"], "GET,HEAD");
}

#[tokio::test]
async fn payload_too_large_names_the_configured_limit() {
    let s = server().await;
    let body = format!("{{\"text\":\"{}\"}}", "x".repeat(2048));
    let (status, _, v) = s
        .send(
            s.http
                .post(s.url("/v1/messages"))
                .header("content-type", "application/json")
                .body(body),
        )
        .await;
    assert_eq!((status, code(&v)), (413, "payload_too_large"), "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("limit of 1024 bytes"), "{msg}");
}

#[tokio::test]
async fn invalid_utf8_in_a_path_parameter_is_400_in_the_envelope() {
    let s = server().await;
    for path in [
        "/v1/runs/%FF",
        "/v1/runs/%FF/events",
        "/v1/runs/%FF/trace",
        "/v1/threads/%C3%28/runtime",
        "/v1/confirmations/%FE",
    ] {
        let req = if path.starts_with("/v1/confirmations") {
            s.http
                .post(s.url(path))
                .header("content-type", "application/json")
                .body(r#"{"user_key":"u","approve":true}"#)
        } else {
            s.http.get(s.url(path))
        };
        let (status, _, v) = s.send(req).await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{path}: {v}");
    }
}

#[tokio::test]
async fn a_revoked_token_is_refused_on_the_next_request() {
    let s = server().await;
    let token = hearth_server::generate_token().unwrap();
    s.store
        .create_token(NewToken {
            id: "tok_1".into(),
            name: "t".into(),
            hash_hex: hearth_server::hash_token(&token),
            created_at: 0,
            user_key: None,
        })
        .await
        .unwrap();
    let models = |auth: String| {
        s.http
            .get(s.url("/v1/models"))
            .header("authorization", auth)
    };
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let r = models(format!("{scheme} {token}")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 200, "{scheme}");
    }
    // With a token configured, no header is refused even on loopback.
    let (status, _, v) = s.send(s.http.get(s.url("/v1/models"))).await;
    assert_eq!((status, code(&v)), (401, "unauthorized"));
    assert!(s.store.revoke_token("tok_1").await.unwrap());
    let (status, _, v) = s.send(models(format!("Bearer {token}"))).await;
    assert_eq!((status, code(&v)), (401, "unauthorized"), "{v}");
    // And once no token is left, loopback requests pass again at once.
    let r = s.http.get(s.url("/v1/models")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let _ = Duration::ZERO;
}
