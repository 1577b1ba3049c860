//! Property tests of every parser of outside input the server owns, driven
//! through the real router: query strings, path parameters (ids, thread
//! keys, tokens) and `Last-Event-ID`. Whatever the input, the answer is a
//! documented status with a JSON body, never a 5xx or a dropped connection.

use std::sync::OnceLock;

use hearth_server::ServeLimits;
use proptest::prelude::*;

use crate::harness::Server;

/// One server and runtime shared by all cases (starting one per case would
/// dominate the run time).
fn shared() -> &'static (tokio::runtime::Runtime, Server) {
    static SHARED: OnceLock<(tokio::runtime::Runtime, Server)> = OnceLock::new();
    SHARED.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(Server::start(ServeLimits::default(), 64 * 1024));
        (rt, server)
    })
}

/// Sends `req` and returns the status; fails unless the body is JSON (or
/// an event stream for a 200 from `/events`).
fn status_of(build: impl FnOnce(&Server) -> reqwest::RequestBuilder) -> (u16, String) {
    let (rt, server) = shared();
    rt.block_on(async {
        let r = build(server).send().await.unwrap();
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let body = if ct.starts_with("text/event-stream") {
            String::new()
        } else {
            let text = r.text().await.unwrap();
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("status {status}: not JSON ({e}): {text:?}"));
            if status >= 400 {
                assert!(v["error"]["code"].is_string(), "{v}");
            }
            v["error"]["code"].as_str().unwrap_or("").to_owned()
        };
        (status, body)
    })
}

/// Percent-encodes arbitrary bytes (so invalid UTF-8 reaches the server).
fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("%{b:02X}")).collect()
}

/// Query strings made of the parameters the endpoints know, with any values.
fn query() -> impl Strategy<Value = String> {
    let key = prop::sample::select(vec![
        "since",
        "until",
        "group_by",
        "limit",
        "status",
        "thread_key",
        "scope",
        "user_key",
        "capability",
        "channel",
        "x",
    ]);
    let value = prop_oneof![
        any::<Vec<u8>>().prop_map(|b| encode(&b)),
        "[0-9a-z:._-]{0,12}",
        Just("7%C3%A9".to_owned()),
        Just("-1".to_owned()),
        Just("99999999999999999999".to_owned()),
    ];
    prop::collection::vec((key, value), 0..4).prop_map(|pairs| {
        pairs
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&")
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_query_string_is_answered_or_refused(
        path in prop::sample::select(vec![
            "/v1/usage", "/v1/runs", "/v1/audit", "/v1/permissions",
            "/v1/permissions/check", "/v1/tools",
        ]),
        q in query(),
    ) {
        let (status, _) = status_of(|s| s.http.get(s.url(&format!("{path}?{q}"))));
        prop_assert!(status == 200 || status == 400, "{path}?{q}: {status}");
    }

    #[test]
    fn any_run_id_or_thread_key_is_answered_or_refused(
        id in prop_oneof![any::<Vec<u8>>().prop_filter("non-empty", |b| !b.is_empty()).prop_map(|b| encode(&b)), "[a-zA-Z0-9_-]{1,40}"],
        route in prop::sample::select(vec![
            "/v1/runs/{}", "/v1/runs/{}/trace", "/v1/threads/{}/runtime", "/v1/runs/{}/events",
        ]),
    ) {
        let path = route.replace("{}", &id);
        let (status, _) = status_of(|s| s.http.get(s.url(&path)));
        prop_assert!([200, 400, 404].contains(&status), "{path}: {status}");
    }

    #[test]
    fn any_confirmation_token_is_answered_or_refused(
        token in any::<Vec<u8>>().prop_filter("non-empty", |b| !b.is_empty()).prop_map(|b| encode(&b)),
    ) {
        let (status, _) = status_of(|s| {
            s.http
                .post(s.url(&format!("/v1/confirmations/{token}")))
                .header("content-type", "application/json")
                .body(r#"{"user_key":"api:user:a","approve":false}"#)
        });
        prop_assert!(status == 400 || status == 404, "{token}: {status}");
    }

    /// A Last-Event-ID of decimal digits up to `i64::MAX` (the document's
    /// `int64`, minimum 0) goes on to the run lookup (404 here); any other
    /// value is 400 `invalid_request`.
    #[test]
    fn any_last_event_id_is_a_number_or_refused(
        value in prop_oneof!["[0-9]{1,19}", "[0-9]{19,20}", "[+-][0-9]{1,3}", "[ -~]{0,24}"],
    ) {
        let (status, code) = status_of(|s| {
            s.http
                .get(s.url("/v1/runs/run_missing/events"))
                .header("last-event-id", value.as_str())
        });
        let digits = value.trim();
        let numeric = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && digits.parse::<i64>().is_ok();
        if numeric {
            prop_assert_eq!((status, code.as_str()), (404, "not_found"), "{:?}", value);
        } else {
            prop_assert_eq!((status, code.as_str()), (400, "invalid_request"), "{:?}", value);
        }
    }
}
