//! The runtime's push endpoints (webhooks) as the server mounts them: for
//! `POST` at their path, handed the runtime, outside bearer auth and the
//! Origin rule, inside the Host rule and the body limit.

use std::sync::Arc;

use hearth_runtime::testing::{EchoWebhook, webhook_surface};
use hearth_server::ServeLimits;
use hearth_store::NewToken;

use crate::harness::{self, Server, code};

const PATH: &str = "/channels/test/webhook";

/// A loopback server whose runtime's surface serves one webhook, with an
/// API token created, so `/v1` wants it.
async fn server() -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = hearth_runtime::testing::store(dir.path());
    store
        .create_token(NewToken {
            id: "tok_1".into(),
            name: "t".into(),
            hash_hex: hearth_server::hash_token("secret"),
            created_at: 0,
            user_key: None,
        })
        .await
        .unwrap();
    let hook = Arc::new(EchoWebhook { path: PATH });
    let runtime = harness::runtime(dir.path(), "", &store, |b| {
        b.surface(webhook_surface(vec![hook]))
    })
    .await;
    let app = hearth_server::router(harness::state(runtime), 64);
    Server::serve(app, ServeLimits::default(), store, dir).await
}

#[tokio::test]
async fn a_webhook_takes_a_platforms_post_without_a_token_or_same_origin() {
    let s = server().await;
    let (status, _, v) = s.send(s.http.get(s.url("/v1/models"))).await;
    assert_eq!((status, code(&v)), (401, "unauthorized"), "{v}");
    let r = s
        .http
        .post(s.url(PATH))
        .header("origin", "https://platform.example")
        .body("update 1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    assert_eq!(r.headers()["x-runtime-accepting"], "yes");
    assert_eq!(r.text().await.unwrap(), "update 1");
}

#[tokio::test]
async fn a_webhook_keeps_the_host_rule_the_body_limit_and_its_method() {
    let s = server().await;
    let (status, _, v) = s
        .send(
            s.http
                .post(s.url(PATH))
                .header("host", "evil.example")
                .body("update"),
        )
        .await;
    assert_eq!((status, code(&v)), (403, "forbidden_host"), "{v}");
    let (status, _, v) = s.send(s.http.post(s.url(PATH)).body(vec![b'x'; 65])).await;
    assert_eq!((status, code(&v)), (413, "payload_too_large"), "{v}");
    let (status, _, v) = s.send(s.http.get(s.url(PATH))).await;
    assert_eq!((status, code(&v)), (405, "method_not_allowed"), "{v}");
}
