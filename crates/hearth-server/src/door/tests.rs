use axum::http::HeaderValue;

use super::*;

#[test]
fn paths_belong_to_their_surface() {
    for (path, surface) in [
        ("/v1/messages", Surface::Api),
        ("/healthz", Surface::Api),
        ("/openai/v1/models", Surface::OpenAi),
        ("/openai", Surface::OpenAi),
        ("/openaiv1", Surface::Api),
        ("/mcp", Surface::Mcp),
        ("/mcp/", Surface::Mcp),
        ("/mcpx", Surface::Api),
        ("/channels/telegram/webhook", Surface::Push),
        ("/channelsx", Surface::Api),
        ("/v1/channels", Surface::Api),
        ("/", Surface::Api),
    ] {
        assert_eq!(Surface::of(path), surface, "{path}");
    }
}

fn with_type(v: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_str(v).unwrap());
    h
}

#[test]
fn only_json_in_utf8_is_json() {
    for v in [
        "application/json",
        "APPLICATION/JSON",
        "application/json; charset=utf-8",
        "application/json;charset=UTF8",
        "application/json; charset=\"utf-8\"; foo=bar",
        " application/json ",
    ] {
        assert!(json_content_type(&with_type(v)).is_ok(), "{v}");
    }
    for v in [
        "text/plain",
        "text/plain; charset=utf-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/json; charset=iso-8859-1",
        "application/jsonp",
        "application/problem+json",
        "",
    ] {
        let why = json_content_type(&with_type(v)).unwrap_err();
        assert!(why.contains("application/json"), "{v}: {why}");
    }
    assert!(json_content_type(&HeaderMap::new()).is_err());
}
