//! The one door: the Host, Origin and Content-Type policy on every route.
//!
//! The cases are generated from the server's own `/openapi.json`, so a route
//! added later is covered by construction: every operation refuses a foreign
//! Host, every state-changing one a foreign (or `null`) Origin, every one
//! with a JSON body a body that is not `application/json`; and the same
//! requests with a good Host, Origin and Content-Type are not refused for
//! those reasons.

use reqwest::Method;
use serde_json::{Map, Value, json};

use crate::harness::Server;

/// What fills every path parameter.
const PLACEHOLDER: &str = "x1";

/// One operation of the document, ready to send.
struct Op {
    method: Method,
    /// The path with its parameters filled.
    path: String,
    /// A body of the right shape, when the operation takes a JSON body.
    body: Option<Value>,
}

impl Op {
    fn name(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    fn state_changing(&self) -> bool {
        !matches!(self.method, Method::GET | Method::HEAD | Method::OPTIONS)
    }
}

/// Every operation of the document.
fn operations(doc: &Value) -> Vec<Op> {
    let mut ops = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        let path = fill(template);
        for (method, op) in item.as_object().expect("path item") {
            let Ok(method) = method.to_ascii_uppercase().parse::<Method>() else {
                continue;
            };
            let body = op
                .pointer("/requestBody/content/application~1json/schema")
                .map(|schema| example(doc, schema, 0));
            ops.push(Op {
                method,
                path: path.clone(),
                body,
            });
        }
    }
    ops
}

/// The path template with each `{param}` replaced by the placeholder.
fn fill(template: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c + 1);
        out.push_str(PLACEHOLDER);
        rest = &rest[close..];
    }
    out.push_str(rest);
    out
}

/// A value of `schema`'s shape: the required properties of an object, the
/// first of an enum, a plain value of each type.
fn example(doc: &Value, schema: &Value, depth: usize) -> Value {
    if depth > 8 {
        return Value::Null;
    }
    if let Some(r) = schema["$ref"].as_str() {
        let target = r
            .strip_prefix('#')
            .and_then(|p| doc.pointer(p))
            .unwrap_or(&Value::Null);
        return example(doc, target, depth + 1);
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(first) = schema[key]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["type"] != "null").or_else(|| s.first()))
        {
            return example(doc, first, depth + 1);
        }
    }
    let kind = match &schema["type"] {
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("null")
            .to_owned(),
        Value::String(k) => k.clone(),
        _ if schema["properties"].is_object() => "object".to_owned(),
        _ => "null".to_owned(),
    };
    match kind.as_str() {
        "object" => {
            let mut out = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let Some(name) = name.as_str() else { continue };
                let prop = &schema["properties"][name];
                out.insert(name.to_owned(), example(doc, prop, depth + 1));
            }
            Value::Object(out)
        }
        "string" => json!("x"),
        "integer" | "number" => json!(1),
        "boolean" => json!(true),
        "array" => json!([]),
        _ => Value::Null,
    }
}

/// Status and error code of one request (the code is empty for a body that
/// is not an error envelope: `/metrics` is text).
async fn status_code(req: reqwest::RequestBuilder) -> (u16, String) {
    let r = req.send().await.expect("request");
    let status = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let code = serde_json::from_str::<Value>(&text)
        .ok()
        .and_then(|v| v["error"]["code"].as_str().map(str::to_owned))
        .unwrap_or_default();
    (status, code)
}

/// Adds a line to `wrong` unless `got` is `want`.
fn check(wrong: &mut Vec<String>, what: &str, op: &Op, got: (u16, String), want: (u16, &str)) {
    if (got.0, got.1.as_str()) != want {
        wrong.push(format!(
            "{what}: {} answered {} {:?}, expected {} {:?}",
            op.name(),
            got.0,
            got.1,
            want.0,
            want.1
        ));
    }
}

/// The request of `op` with a well-formed JSON body (when it takes one).
fn request(s: &Server, op: &Op) -> reqwest::RequestBuilder {
    let rb = s.http.request(op.method.clone(), s.url(&op.path));
    match &op.body {
        Some(body) => rb
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => rb,
    }
}

async fn document(s: &Server) -> Value {
    let r = s.http.get(s.url("/openapi.json")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn every_route_of_the_document_keeps_strangers_out() {
    let s = Server::start(Default::default(), 1 << 20).await;
    let doc = document(&s).await;
    let ops = operations(&doc);
    assert!(ops.len() >= 40, "only {} operations", ops.len());
    let own_origin = format!("http://{}", s.addr);
    let mut wrong = Vec::new();
    for op in &ops {
        // A rebinding page sends its own name as Host.
        let got = status_code(request(&s, op).header("host", "evil.example")).await;
        check(&mut wrong, "foreign Host", op, got, (403, "forbidden_host"));
        let got = status_code(request(&s, op).header("host", "evil.example:7777")).await;
        check(
            &mut wrong,
            "foreign Host with a port",
            op,
            got,
            (403, "forbidden_host"),
        );
        if op.state_changing() {
            for origin in ["http://evil.example", "null"] {
                let got = status_code(request(&s, op).header("origin", origin)).await;
                check(
                    &mut wrong,
                    &format!("Origin {origin}"),
                    op,
                    got,
                    (403, "forbidden_origin"),
                );
            }
            // A null origin claiming to be same-origin still needs a CSRF
            // token, and no route takes one yet.
            let got = status_code(
                request(&s, op)
                    .header("origin", "null")
                    .header("sec-fetch-site", "same-origin"),
            )
            .await;
            check(
                &mut wrong,
                "Origin null, same-origin",
                op,
                got,
                (403, "forbidden_origin"),
            );
            // Another port of this host is another origin.
            let got = status_code(request(&s, op).header("origin", "http://127.0.0.1:1")).await;
            check(
                &mut wrong,
                "Origin of another port",
                op,
                got,
                (403, "forbidden_origin"),
            );
        }
        if let Some(body) = &op.body {
            // What a form or `fetch(..., {mode: "no-cors"})` can send
            // without a CORS preflight, with a body hearth would accept.
            for ct in [
                "text/plain",
                "text/plain;charset=UTF-8",
                "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x",
            ] {
                let got = status_code(
                    s.http
                        .request(op.method.clone(), s.url(&op.path))
                        .header("content-type", ct)
                        .body(body.to_string()),
                )
                .await;
                check(
                    &mut wrong,
                    &format!("Content-Type {ct}"),
                    op,
                    got,
                    (415, "unsupported_media_type"),
                );
            }
            let got = status_code(
                s.http
                    .request(op.method.clone(), s.url(&op.path))
                    .body(body.to_string()),
            )
            .await;
            check(
                &mut wrong,
                "no Content-Type",
                op,
                got,
                (415, "unsupported_media_type"),
            );
        }
        // The same request done right is not refused for any of these reasons.
        let mut good = request(&s, op).header("host", s.addr.to_string());
        if op.state_changing() {
            good = good.header("origin", &own_origin);
        }
        let (status, code) = status_code(good).await;
        if status == 415
            || [
                "forbidden_host",
                "forbidden_origin",
                "unsupported_media_type",
            ]
            .contains(&code.as_str())
        {
            wrong.push(format!(
                "good request: {} refused with {status} {code:?}",
                op.name()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[tokio::test]
async fn json_with_parameters_passes_and_other_charsets_do_not() {
    let s = Server::start(Default::default(), 1 << 20).await;
    let grant =
        json!({"subject": "user:api:user:bob", "capability": "memory.read", "scope": "global"});
    for ct in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON;charset=\"UTF-8\"",
    ] {
        let (status, code) = status_code(
            s.http
                .post(s.url("/v1/permissions/grants"))
                .header("content-type", ct)
                .body(grant.to_string()),
        )
        .await;
        assert!(status == 201 || status == 200, "{ct}: {status} {code}");
    }
    for ct in [
        "application/json; charset=latin1",
        "application/jsonx",
        "application/vnd.api+json",
        "text/json",
    ] {
        let got = status_code(
            s.http
                .post(s.url("/v1/permissions/grants"))
                .header("content-type", ct)
                .body(grant.to_string()),
        )
        .await;
        assert_eq!(got, (415, "unsupported_media_type".to_owned()), "{ct}");
    }
}

#[tokio::test]
async fn a_cross_site_grant_grants_nothing() {
    let s = Server::start(Default::default(), 1 << 20).await;
    let grant = json!({"subject": "user:web:user:mallory", "capability": "preset:admin", "scope": "global"});
    // What a page on another site can send with a plain form or fetch.
    for (origin, ct) in [
        (Some("https://evil.example"), "text/plain"),
        (Some("null"), "text/plain"),
        (None, "text/plain"),
        (Some("https://evil.example"), "application/json"),
    ] {
        let mut rb = s
            .http
            .post(s.url("/v1/permissions/grants"))
            .header("content-type", ct)
            .body(grant.to_string());
        if let Some(o) = origin {
            rb = rb.header("origin", o);
        }
        let (status, _) = status_code(rb).await;
        assert!(status == 403 || status == 415, "{origin:?} {ct}: {status}");
    }
    let r = s.http.get(s.url("/v1/permissions")).send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["grants"], json!([]), "{v}");
}

/// A dashboard's CSRF check, as the door will meet it: a token in a header.
struct HeaderToken;

impl hearth_server::CsrfValidator for HeaderToken {
    fn validate(
        &self,
        req: axum::extract::Request,
    ) -> futures_util::future::BoxFuture<'static, Option<axum::extract::Request>> {
        Box::pin(async move {
            let good = req
                .headers()
                .get("x-csrf-token")
                .is_some_and(|v| v == "good");
            good.then_some(req)
        })
    }
}

/// The door over a small router: an API route and a push route.
async fn door_over(door: hearth_server::Door) -> Server {
    use axum::routing::post;
    let app = axum::Router::new()
        .route("/v1/thing", post(|| async { "done" }))
        .route("/channels/fake/webhook", post(|| async { "taken" }))
        .layer(axum::middleware::from_fn_with_state(
            door,
            hearth_server::door::guard,
        ));
    let dir = tempfile::tempdir().unwrap();
    let store: std::sync::Arc<dyn hearth_store::Store> = std::sync::Arc::new(
        hearth_store::SqliteStore::open(&dir.path().join("h.db"), Default::default()).unwrap(),
    );
    Server::serve(app, Default::default(), store, dir).await
}

#[tokio::test]
async fn a_null_origin_passes_only_same_origin_with_a_valid_csrf_token() {
    let s =
        door_over(hearth_server::Door::default().with_csrf(std::sync::Arc::new(HeaderToken))).await;
    let post = |site: Option<&str>, token: Option<&str>| {
        let mut rb = s.http.post(s.url("/v1/thing")).header("origin", "null");
        if let Some(site) = site {
            rb = rb.header("sec-fetch-site", site);
        }
        if let Some(token) = token {
            rb = rb.header("x-csrf-token", token);
        }
        status_code(rb)
    };
    assert_eq!(post(Some("same-origin"), Some("good")).await.0, 200);
    for (site, token) in [
        (Some("same-origin"), Some("bad")),
        (Some("same-origin"), None),
        (Some("cross-site"), Some("good")),
        (Some("same-site"), Some("good")),
        (None, Some("good")),
    ] {
        assert_eq!(
            post(site, token).await,
            (403, "forbidden_origin".to_owned()),
            "{site:?} {token:?}"
        );
    }
    // Without a validator (today's server), null never passes.
    let s = door_over(hearth_server::Door::default()).await;
    let got = status_code(
        s.http
            .post(s.url("/v1/thing"))
            .header("origin", "null")
            .header("sec-fetch-site", "same-origin")
            .header("x-csrf-token", "good"),
    )
    .await;
    assert_eq!(got, (403, "forbidden_origin".to_owned()));
}

#[tokio::test]
async fn push_routes_are_exempt_from_the_origin_rule_only() {
    let s = door_over(hearth_server::Door::default()).await;
    let webhook = || {
        s.http
            .post(s.url("/channels/fake/webhook"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("payload=x")
    };
    let r = webhook()
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(
        status_code(webhook().header("host", "evil.example")).await,
        (403, "forbidden_host".to_owned())
    );
}
