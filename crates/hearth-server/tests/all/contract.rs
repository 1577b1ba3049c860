//! The server enforces what `/openapi.json` states, no more and no less:
//! each test here is a request a generated client (or schemathesis) sent
//! that the server answered against the document.

use hearth_server::ServeLimits;
use serde_json::json;

use crate::harness::{Server, code};

async fn server() -> Server {
    Server::start(ServeLimits::default(), 64 * 1024).await
}

/// GETs `path` and returns the status and error code.
async fn get(s: &Server, path: &str) -> (u16, String) {
    let (status, _, v) = s.send(s.http.get(s.url(path))).await;
    (status, code(&v).to_owned())
}

/// An enum parameter given empty is not "no filter": `status=` is not a
/// run status, so it is refused rather than answered with every run.
#[tokio::test]
async fn an_empty_enum_or_key_in_a_query_is_400_not_no_filter() {
    let s = server().await;
    for path in [
        "/v1/runs?status=",
        "/v1/runs?thread_key=",
        "/v1/usage?group_by=",
        "/v1/outbox?status=",
        "/v1/threads/t/history?before=",
    ] {
        assert_eq!(
            get(&s, path).await,
            (400, "invalid_request".into()),
            "{path}"
        );
    }
    // What the document allows still answers.
    for path in [
        "/v1/runs?status=succeeded&thread_key=api:default",
        "/v1/usage?group_by=day",
        "/v1/outbox?status=failed",
    ] {
        assert_eq!(get(&s, path).await.0, 200, "{path}");
    }
}

/// `limit` is 1 to 1000 everywhere, as documented; outside that is 400,
/// not silently clamped.
#[tokio::test]
async fn a_limit_outside_1_to_1000_is_400_not_clamped() {
    let s = server().await;
    for base in [
        "/v1/runs",
        "/v1/audit",
        "/v1/outbox",
        "/v1/threads/t/history",
    ] {
        for limit in ["0", "1001"] {
            let path = format!("{base}?limit={limit}");
            assert_eq!(
                get(&s, &path).await,
                (400, "invalid_request".into()),
                "{path}"
            );
        }
        for limit in ["1", "1000"] {
            let path = format!("{base}?limit={limit}");
            assert_eq!(get(&s, &path).await.0, 200, "{path}");
        }
    }
}

/// `Last-Event-ID` is a decimal event id that fits a signed 64-bit
/// integer (the document's `int64`); a larger number or a sign is 400
/// before the run is looked up.
#[tokio::test]
async fn a_last_event_id_beyond_int64_or_signed_is_400() {
    let s = server().await;
    for value in ["9223372036854775808", "18446744073709551615", "+5", "-1"] {
        let (status, _, v) = s
            .send(
                s.http
                    .get(s.url("/v1/runs/run_missing/events"))
                    .header("last-event-id", value),
            )
            .await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{value}");
    }
    let (status, _, v) = s
        .send(
            s.http
                .get(s.url("/v1/runs/run_missing/events"))
                .header("last-event-id", "9223372036854775807"),
        )
        .await;
    assert_eq!((status, code(&v)), (404, "not_found"));
}

/// A key is 1 to 256 characters (JSON Schema's `maxLength` counts
/// characters), so 200 two-byte characters are a key.
#[tokio::test]
async fn a_key_of_256_multibyte_characters_is_a_key() {
    let s = server().await;
    let key = "é".repeat(256);
    let (status, _, v) = s
        .send(
            s.http
                .put(s.url(&format!("/v1/threads/{key}/incognito")))
                .json(&json!({ "enabled": true })),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["thread_key"], key.as_str());
    let (status, _, v) = s
        .send(
            s.http
                .put(s.url(&format!("/v1/threads/{key}é/incognito")))
                .json(&json!({ "enabled": true })),
        )
        .await;
    assert_eq!((status, code(&v)), (400, "invalid_request"));
}

/// JSON Schema's `integer` includes `5.0`; a whole number written with a
/// fraction is that integer, a real fraction is refused.
#[tokio::test]
async fn a_whole_number_written_with_a_fraction_is_an_integer() {
    let s = server().await;
    let (status, _, v) = s
        .send(s.http.post(s.url("/v1/messages")).json(&json!({
            "text": "hi", "wait": true, "wait_timeout_secs": 5.0
        })))
        .await;
    assert_eq!(status, 200, "{v}");
    for bad in [json!(5.5), json!(-1.0), json!(601.0), json!(1e300)] {
        let (status, _, v) = s
            .send(s.http.post(s.url("/v1/messages")).json(&json!({
                "text": "hi", "wait_timeout_secs": bad
            })))
            .await;
        assert_eq!((status, code(&v)), (400, "invalid_request"), "{bad}: {v}");
    }
}

/// `since` and `until` are RFC 3339 date-times (the document's
/// `date-time` format) or `today` or an age of 1 to 11 digits; every
/// RFC 3339 instant is taken, other spellings are not.
#[tokio::test]
async fn usage_times_are_exactly_rfc_3339_today_or_an_age() {
    let s = server().await;
    for ok in [
        "9999-12-31T23:59:59Z",
        "0000-01-01T00:00:00%2B23:59",
        "2026-02-28t10:00:00.123456789z",
        "2024-02-29T00:00:00-05:00",
        "today",
        "99999999999d",
    ] {
        let path = format!("/v1/usage?since={ok}");
        assert_eq!(get(&s, &path).await.0, 200, "{path}");
    }
    for bad in [
        "2026-11-22%2000:00:00Z",
        "2026-11-22T00:00Z",
        "2026-11-22T00:00:00",
        "2026-02-29T00:00:00Z",
        "2026-11-22T00:00:00%2B0000",
        "2026-11-22T00:00:00Z%5BUTC%5D",
        "000000000001d",
        "1w",
    ] {
        let path = format!("/v1/usage?until={bad}");
        assert_eq!(
            get(&s, &path).await,
            (400, "invalid_request".into()),
            "{path}"
        );
    }
}

/// A client that resumes after the terminal event (its `Last-Event-ID` is
/// the last id, or beyond) gets an empty stream that ends, not one that
/// stays open until the run's log is evicted.
#[tokio::test]
async fn resuming_after_the_terminal_event_ends_the_stream() {
    let s = server().await;
    let (status, _, env) = s
        .send(
            s.http
                .post(s.url("/v1/messages"))
                .json(&json!({ "text": "hi", "wait": true })),
        )
        .await;
    assert_eq!((status, env["status"].as_str()), (200, Some("succeeded")));
    let run_id = env["run_id"].as_str().unwrap();
    let url = s.url(&format!("/v1/runs/{run_id}/events"));
    let full = s.http.get(&url).send().await.unwrap().text().await.unwrap();
    let last_id = full
        .lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .next_back()
        .map(|id| id.trim().to_owned())
        .unwrap();
    for after in [last_id.clone(), "1000".to_owned()] {
        let resumed = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            s.http
                .get(&url)
                .header("last-event-id", after.as_str())
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        })
        .await
        .unwrap_or_else(|_| panic!("Last-Event-ID {after}: the stream did not end"));
        assert!(!resumed.contains("event:"), "{after}: {resumed}");
    }
}

/// A job's name is 1 to 200 characters and its text 1 to 16384, counted
/// as the document's `maxLength` counts them (characters, not bytes).
#[tokio::test]
async fn a_job_name_of_200_multibyte_characters_is_a_name() {
    let s = server().await;
    let job = |name: String| {
        json!({
            "name": name, "schedule": "every 1d", "thread_key": "t", "text": "é".repeat(16384)
        })
    };
    let (status, _, v) = s
        .send(s.http.post(s.url("/v1/jobs")).json(&job("é".repeat(200))))
        .await;
    assert_eq!(status, 201, "{v}");
    let (status, _, v) = s
        .send(s.http.post(s.url("/v1/jobs")).json(&job("é".repeat(201))))
        .await;
    assert_eq!((status, code(&v)), (400, "invalid_request"));
}

/// `PUT /v1/threads/{key}/mode` answers as issue 21 decided: 200 with the
/// mode and its expiry, 400 `invalid_mode`, 403 `bypass_in_group`; `GET
/// /v1/threads/{key}` shows the mode in force.
#[tokio::test]
async fn thread_modes_are_set_and_read_with_the_documented_codes() {
    let s = server().await;
    let put = |key: &str, body: serde_json::Value| {
        s.http
            .put(s.url(&format!("/v1/threads/{key}/mode")))
            .json(&body)
    };
    let (status, _, v) = s.send(s.http.get(s.url("/v1/threads/api:m"))).await;
    assert_eq!(
        (status, v["mode"].as_str(), &v["mode_expires_at"]),
        (200, Some("ask"), &json!(null)),
        "{v}"
    );

    let (status, _, v) = s.send(put("api:m", json!({"mode": "accept_edits"}))).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v, json!({"mode": "accept_edits", "expires_at": null}));
    let (_, _, v) = s.send(s.http.get(s.url("/v1/threads/api:m"))).await;
    assert_eq!(v["mode"], "accept_edits", "{v}");

    let (status, _, v) = s
        .send(put("api:m", json!({"mode": "auto", "expires_in_secs": 60})))
        .await;
    assert_eq!((status, v["mode"].as_str()), (200, Some("auto")), "{v}");
    assert!(
        v["expires_at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{v}"
    );
    let (_, _, v) = s.send(s.http.get(s.url("/v1/threads/api:m/runtime"))).await;
    assert!(v["mode_expires_at"].is_string(), "{v}");

    for bad in [
        json!({"mode": "yolo"}),
        json!({"mode": "Ask"}),
        json!({"mode": ""}),
    ] {
        let (status, _, v) = s.send(put("api:m", bad.clone())).await;
        assert_eq!((status, code(&v)), (400, "invalid_mode"), "{bad}: {v}");
    }
    let (status, _, v) = s
        .send(put("api:m", json!({"mode": "auto", "expires_in_secs": 0})))
        .await;
    assert_eq!(status, 400, "{v}");

    let (status, _, v) = s
        .send(put("telegram:chat:-42", json!({"mode": "bypass"})))
        .await;
    assert_eq!((status, code(&v)), (403, "bypass_in_group"), "{v}");
    // In a direct chat the operator (who holds every capability) may.
    let (status, _, v) = s
        .send(put("telegram:chat:42", json!({"mode": "bypass"})))
        .await;
    assert_eq!((status, v["mode"].as_str()), (200, Some("bypass")), "{v}");
    assert!(v["expires_at"].is_string(), "bypass always lapses: {v}");
}
