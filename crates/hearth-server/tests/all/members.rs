//! Tokens bound to a user: on `/v1` they act as that user on their own runs
//! only; operator routes are 403, another user's run is 404; the OpenAI
//! surface and `/mcp` refuse them; the dashboard shows their runs only.

use hearth_store::records::NewToken;
use reqwest::redirect::Policy;
use serde_json::{Value, json};

use crate::harness::{Server, code};

const ANN: &str = "api:user:ann";
const BOB: &str = "api:user:bob";

async fn member_token(s: &Server) -> String {
    let token = hearth_server::generate_token().unwrap();
    s.store
        .create_token(NewToken {
            id: "tok_ann".into(),
            name: "ann's laptop".into(),
            hash_hex: hearth_server::hash_token(&token),
            created_at: 0,
            user_key: Some(ANN.into()),
        })
        .await
        .unwrap();
    token
}

async fn operator_token(s: &Server) -> String {
    let token = hearth_server::generate_token().unwrap();
    s.store
        .create_token(NewToken {
            id: "tok_op".into(),
            name: "operator".into(),
            hash_hex: hearth_server::hash_token(&token),
            created_at: 0,
            user_key: None,
        })
        .await
        .unwrap();
    token
}

async fn post(s: &Server, token: &str, body: Value) -> (u16, Value) {
    let (status, _, v) = s
        .send(
            s.http
                .post(s.url("/v1/messages"))
                .bearer_auth(token)
                .json(&body),
        )
        .await;
    (status, v)
}

#[tokio::test]
async fn a_member_token_acts_as_its_user_on_its_own_runs_only() {
    let s = Server::start(hearth_server::ServeLimits::default(), 1 << 20).await;
    let op = operator_token(&s).await;
    let ann = member_token(&s).await;
    let (status, bobs) = post(
        &s,
        &op,
        json!({ "text": "hi", "user_key": BOB, "thread_key": "api:bob" }),
    )
    .await;
    assert_eq!(status, 202, "{bobs}");
    let bobs = bobs["run_id"].as_str().unwrap().to_owned();

    let (status, own) = post(&s, &ann, json!({ "text": "hi", "thread_key": "api:ann" })).await;
    assert_eq!(status, 202, "{own}");
    assert_eq!(own["user_key"], ANN, "sent as the token's user");
    let own = own["run_id"].as_str().unwrap().to_owned();
    let (status, v) = post(
        &s,
        &ann,
        json!({ "text": "hi", "user_key": BOB, "thread_key": "api:ann" }),
    )
    .await;
    assert_eq!((status, code(&v)), (403, "forbidden"), "{v}");
    let (status, v) = post(&s, &ann, json!({ "text": "hi", "thread_key": "api:bob" })).await;
    assert_eq!(
        (status, code(&v)),
        (404, "not_found"),
        "another user's thread: {v}"
    );

    let get = |path: String| s.send(s.http.get(s.url(&path)).bearer_auth(&ann));
    let (status, _, v) = get("/v1/runs".into()).await;
    assert_eq!(status, 200);
    let listed: Vec<_> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [own.as_str()]);
    let (status, _, _) = get(format!("/v1/runs/{own}")).await;
    assert_eq!(status, 200);
    for path in [format!("/v1/runs/{bobs}"), format!("/v1/runs/{bobs}/trace")] {
        let (status, _, v) = get(path.clone()).await;
        assert_eq!((status, code(&v)), (404, "not_found"), "{path}: {v}");
    }
    for path in [
        "/v1/budget",
        "/v1/config",
        "/v1/threads",
        "/v1/permissions",
        "/v1/usage",
    ] {
        let (status, _, v) = get(path.into()).await;
        assert_eq!((status, code(&v)), (403, "forbidden"), "{path}: {v}");
    }
    let (status, _, _) = get("/v1/models".into()).await;
    assert_eq!(status, 200);
    for path in [
        "/v1/threads/api:ann/history",
        "/v1/threads/api%3Aann/runtime",
    ] {
        let (status, _, v) = get(path.into()).await;
        assert_eq!(status, 200, "its own thread {path}: {v}");
    }
    for path in [
        "/v1/threads/api:bob/history",
        "/v1/threads/api%3Abob/runtime",
    ] {
        let (status, _, v) = get(path.into()).await;
        assert_eq!((status, code(&v)), (404, "not_found"), "{path}: {v}");
    }
    let r = s
        .http
        .get(s.url("/openai/v1/models"))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = s
        .http
        .post(s.url("/mcp"))
        .bearer_auth(&ann)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // The operator still sees both.
    let (_, _, v) = s.send(s.http.get(s.url("/v1/runs")).bearer_auth(&op)).await;
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_member_session_sees_its_runs_and_another_users_run_is_a_403_page() {
    let s = Server::start(hearth_server::ServeLimits::default(), 1 << 20).await;
    let op = operator_token(&s).await;
    let ann = member_token(&s).await;
    let (_, bobs) = post(
        &s,
        &op,
        json!({ "text": "hi", "user_key": BOB, "thread_key": "api:bob" }),
    )
    .await;
    let bobs = bobs["run_id"].as_str().unwrap().to_owned();
    let (_, own) = post(&s, &ann, json!({ "text": "hi", "thread_key": "api:ann" })).await;
    let own = own["run_id"].as_str().unwrap().to_owned();

    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    let cookie = crate::ui::login_cookie(&s, &http, &ann).await;
    let get = |path: String| http.get(s.url(&path)).header("cookie", &cookie).send();
    let r = get("/ui".into()).await.unwrap();
    assert_eq!(r.status().as_u16(), 303, "a member's home is their runs");
    let page = get("/ui/runs".into()).await.unwrap().text().await.unwrap();
    assert!(page.contains(&own) && !page.contains(&bobs), "{page}");
    assert!(!page.contains("data-live"), "no event stream for a member");
    let r = get(format!("/ui/runs/{bobs}")).await.unwrap();
    assert_eq!(r.status().as_u16(), 403);
    assert!(r.text().await.unwrap().contains("another user"));
    assert_eq!(
        get(format!("/ui/runs/{own}"))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let threads = get("/ui/threads".into())
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        threads.contains("api:ann") && !threads.contains("api:bob"),
        "{threads}"
    );
    let own = get("/ui/threads/api%3Aann".into()).await.unwrap();
    assert_eq!(own.status().as_u16(), 200);
    let own = own.text().await.unwrap();
    assert!(
        own.contains("Send") && !own.contains("Save settings"),
        "{own}"
    );
    assert_eq!(
        get("/ui/threads/api%3Abob".into())
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    for path in ["/ui/settings", "/ui/budget", "/ui/events", "/ui/usage.csv"] {
        assert_eq!(
            get(path.into()).await.unwrap().status().as_u16(),
            403,
            "{path}"
        );
    }
}

#[tokio::test]
async fn an_operator_makes_a_member_token_over_http_and_a_member_cannot() {
    let s = Server::start(hearth_server::ServeLimits::default(), 1 << 20).await;
    let op = operator_token(&s).await;
    let make = |token: &str, body: Value| {
        s.send(
            s.http
                .post(s.url("/v1/tokens"))
                .bearer_auth(token)
                .json(&body),
        )
    };
    let (status, _, made) = make(&op, json!({ "name": "ann's phone", "user_key": ANN })).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (made["name"].as_str(), made["user_key"].as_str()),
        (Some("ann's phone"), Some(ANN))
    );
    let secret = made["token"].as_str().unwrap().to_owned();
    assert!(made["id"].as_str().unwrap().starts_with("tok_"));
    let (status, v) = post(
        &s,
        &secret,
        json!({ "text": "hi", "thread_key": "api:ann" }),
    )
    .await;
    assert_eq!((status, v["user_key"].as_str()), (202, Some(ANN)), "{v}");
    let (status, _, v) = make(&secret, json!({ "name": "more" })).await;
    assert_eq!((status, code(&v)), (403, "forbidden"), "{v}");
    for bad in [
        json!({ "name": " " }),
        json!({ "name": "x", "user_key": "" }),
        json!({ "name": "x", "extra": 1 }),
    ] {
        let (status, _, v) = make(&op, bad.clone()).await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{bad}: {v}");
    }
    let (status, _, made) = make(&op, json!({ "name": "ops" })).await;
    assert_eq!((status, made["user_key"].clone()), (201, Value::Null));
}
