//! The OpenAPI document, generated from the routes the server registers
//! (`routes::ops`, `routes::v1` and the OpenAI surface's two routes) and
//! their handlers' annotations.

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::response::{Response, ResponseBuilder};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, RefOr};

use crate::dto;

/// The parts of the document no route carries: title, shared schemas and
/// the bearer scheme.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "hearth",
        description = "Self-hosted AI agent gateway: HTTP API v1"
    ),
    components(schemas(
        hearth_core::RunEnvelope,
        hearth_core::RunStatus,
        hearth_core::RunError,
        hearth_core::RunOutput,
        hearth_core::Confirmation,
        hearth_core::DeliveryMode,
        dto::ErrorBody,
        dto::ErrorDetail,
        dto::UsageGroupBy,
        // Referenced from query and path parameters, which do not collect schemas.
        crate::schemas::Capability,
        crate::schemas::UsageTime,
        crate::schemas::CommunityScope,
        crate::schemas::AppLabel,
        crate::schemas::GuildId,
        crate::routes::channels::OutboxStatusName,
    ))
)]
pub struct ApiDoc;

/// The name of the security scheme every `/v1` operation requires.
const BEARER: &str = "bearer";

/// The document: `ApiDoc` plus every registered route, each `/v1`
/// operation marked as needing the bearer token and answering 401.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    doc.merge(crate::routes::ops_documented().into_openapi());
    doc.merge(crate::routes::v1_documented().into_openapi());
    // Served by `openai::routes` (OpenAI's 405 and error envelope), listed
    // here for the document only.
    doc.merge(
        utoipa_axum::router::OpenApiRouter::<crate::AppState>::new()
            .routes(utoipa_axum::routes!(crate::openai::models))
            .routes(utoipa_axum::routes!(crate::openai::chat_completions))
            .into_openapi(),
    );
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "An API token from `hearth token create`; the scheme name is case-insensitive",
                ))
                .build(),
        ),
    );
    for (path, item) in doc.paths.paths.iter_mut() {
        let v1 = path.starts_with("/v1/");
        let openai = path.starts_with("/openai/v1/");
        let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(1).collect();
        for (op, changes, method) in [
            (&mut item.get, false, axum::http::Method::GET),
            (&mut item.put, true, axum::http::Method::PUT),
            (&mut item.post, true, axum::http::Method::POST),
            (&mut item.delete, true, axum::http::Method::DELETE),
            (&mut item.patch, true, axum::http::Method::PATCH),
        ]
        .into_iter()
        .filter_map(|(op, changes, m)| op.as_mut().map(|op| (op, changes, m)))
        {
            if v1 {
                require_bearer(op);
                describe_member(op, crate::auth::member_rule(&method, &segments), false);
            } else if openai {
                require_openai_bearer(op);
                describe_member(op, crate::auth::MemberRule::Refused, true);
            }
            describe_door(op, openai, changes);
            describe_bad_input(op, openai);
            describe_responses(op);
        }
    }
    doc
}

fn error_response(description: &str) -> Response {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            Content::new(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                "ErrorBody",
            )))),
        )
        .build()
}

fn require_bearer(op: &mut Operation) {
    op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
    op.responses.responses.insert(
        "401".to_owned(),
        RefOr::T(error_response(
            "Missing, unknown or revoked bearer token (`unauthorized`)",
        )),
    );
}

/// The bearer token on `/openai/v1`, whose 401 is in OpenAI's error
/// envelope (`{"error":{"message","type","param","code"}}`).
fn require_openai_bearer(op: &mut Operation) {
    op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
    op.responses.responses.insert(
        "401".to_owned(),
        RefOr::T(
            ResponseBuilder::new()
                .description(
                    "Missing or bad bearer token (OpenAI's envelope, code `invalid_api_key`)",
                )
                .build(),
        ),
    );
}

/// What a token bound to a user (a member) gets: 403 `forbidden` on an
/// operator's route, 404 for another user's run or thread (as an unknown
/// one), from the rule the server applies ([`crate::auth::member_rule`]);
/// on `/openai` every route is refused (in OpenAI's envelope).
fn describe_member(op: &mut Operation, rule: crate::auth::MemberRule, openai: bool) {
    use crate::auth::MemberRule;
    let (status, text) = match rule {
        MemberRule::Open => return,
        MemberRule::Refused => (
            "403",
            "a token bound to a user (`hearth token create --user`) may not use this route \
             (`forbidden`): it needs an operator token",
        ),
        MemberRule::OwnRun => (
            "404",
            "for a token bound to a user, another user's run (`not_found`, as an unknown one)",
        ),
        MemberRule::OwnThread => (
            "404",
            "for a token bound to a user, another user's thread (`not_found`, as an unknown one)",
        ),
    };
    let responses = &mut op.responses.responses;
    match responses.get_mut(status) {
        Some(RefOr::T(existing)) => {
            let base = if existing.description.is_empty() {
                "No such thing (`not_found`)"
            } else {
                existing.description.as_str()
            };
            existing.description = format!("{base}; or {text}");
        }
        _ => {
            let text = format!("{}{}", text[..1].to_uppercase(), &text[1..]);
            let response = if openai {
                // In OpenAI's envelope there.
                ResponseBuilder::new().description(text).build()
            } else {
                error_response(&text)
            };
            responses.insert(status.to_owned(), RefOr::T(response));
        }
    }
}

/// The door's answers (`crate::door`): 403 for a Host this server does not
/// answer to, and on a state-changing operation for a browser Origin of
/// another site; 415 for a JSON body that is not `application/json`. In
/// OpenAI's envelope under `/openai`.
fn describe_door(op: &mut Operation, openai: bool, changes: bool) {
    let mut refusal = "refused at the door: `forbidden_host` (the Host does not name this server: \
                       add the name to `[server] allowed_hosts`)"
        .to_owned();
    if changes {
        refusal.push_str(
            ", or `forbidden_origin` (sent by a browser page of another origin; \
             `Origin: null` is refused)",
        );
    }
    if openai {
        refusal.push_str(" (OpenAI's envelope)");
    }
    let response = |description: &str| -> RefOr<Response> {
        if openai {
            RefOr::T(ResponseBuilder::new().description(description).build())
        } else {
            RefOr::T(error_response(description))
        }
    };
    let responses = &mut op.responses.responses;
    match responses.get_mut("403") {
        Some(RefOr::T(existing)) => {
            existing.description = format!("{}; or {refusal}", existing.description);
        }
        _ => {
            let refusal = format!("R{}", &refusal[1..]);
            responses.insert("403".to_owned(), response(&refusal));
        }
    }
    if op.request_body.is_some() && !responses.contains_key("415") {
        responses.insert(
            "415".to_owned(),
            response("The body is not `application/json` (`unsupported_media_type`)"),
        );
    }
}

/// The answers every operation that takes input can give: 400 for a path,
/// query or header parameter or a body the server refuses (a path parameter
/// that is not UTF-8 or not a number, a query that does not parse, a value
/// outside its schema), and 413 for a body over `[server] max_body_bytes`.
fn describe_bad_input(op: &mut Operation, openai: bool) {
    let takes_parameters = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let takes_body = op.request_body.is_some();
    let response = |description: &str| -> RefOr<Response> {
        if openai {
            RefOr::T(ResponseBuilder::new().description(description).build())
        } else {
            RefOr::T(error_response(description))
        }
    };
    let responses = &mut op.responses.responses;
    if (takes_parameters || takes_body) && !responses.contains_key("400") {
        responses.insert(
            "400".to_owned(),
            response("Bad input: a parameter or body outside its schema (`invalid_request`)"),
        );
    }
    if takes_body && !responses.contains_key("413") {
        responses.insert(
            "413".to_owned(),
            response("Body over `[server] max_body_bytes` (`payload_too_large`)"),
        );
    }
}

/// Gives every response without one the standard description of its status.
fn describe_responses(op: &mut Operation) {
    for (status, response) in op.responses.responses.iter_mut() {
        if let RefOr::T(r) = response
            && r.description.is_empty()
        {
            r.description = match status.as_str() {
                "200" => "OK",
                "201" => "Created",
                "202" => "Accepted",
                "400" => "Bad input (`invalid_request` or a more specific code)",
                "403" => "Not allowed (`forbidden`)",
                "404" => "No such thing (`not_found`)",
                "413" => "Body over `[server] max_body_bytes` (`payload_too_large`)",
                "503" => {
                    "Shutting down (`unavailable`) or saturated (`overloaded`, with Retry-After)"
                }
                other => other,
            }
            .to_owned();
        }
    }
}

/// The document generated from the routes, pretty-printed.
pub fn generate() -> String {
    let mut json = document()
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    json.push('\n');
    json
}

/// The document served at `/openapi.json`: the committed `openapi.json`, which
/// a test keeps equal to `generate()`. Serving the file keeps API changes
/// visible in review and the document generator out of the release binary.
pub fn document_json() -> &'static str {
    include_str!("../openapi.json")
}

#[cfg(test)]
mod tests {
    /// Fails when the code's API and the committed document differ; refresh
    /// with `UPDATE_OPENAPI=1 cargo test -p hearth-server openapi`.
    #[test]
    fn the_committed_openapi_document_matches_the_code() {
        let generated = super::generate();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "crates/hearth-server/openapi.json is out of date with the code; \
             run `UPDATE_OPENAPI=1 cargo test -p hearth-server openapi` and review the diff"
        );
        let v: serde_json::Value = serde_json::from_str(&committed).unwrap();
        assert!(v["openapi"].as_str().unwrap().starts_with("3.1"));
    }

    /// Every /v1 operation needs the bearer token and documents 401; every
    /// response has a description; no parameter is both in the path
    /// template's braces and elsewhere.
    #[test]
    fn every_operation_is_secured_and_described() {
        let doc: serde_json::Value = serde_json::from_str(&super::generate()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        assert!(paths.len() >= 20, "{}", paths.len());
        for (path, item) in paths {
            for (method, op) in item.as_object().unwrap() {
                let responses = op["responses"].as_object().unwrap();
                for (status, r) in responses {
                    assert!(
                        r["description"].as_str().is_some_and(|d| !d.is_empty()),
                        "{method} {path} {status}"
                    );
                }
                if path.starts_with("/v1/") || path.starts_with("/openai/v1/") {
                    assert_eq!(op["security"][0]["bearer"], serde_json::json!([]), "{path}");
                    assert!(responses.contains_key("401"), "{method} {path}");
                }
                for p in op["parameters"].as_array().into_iter().flatten() {
                    let name = p["name"].as_str().unwrap();
                    let in_template = path.contains(&format!("{{{name}}}"));
                    assert_eq!(p["in"] == "path", in_template, "{method} {path} {name}");
                }
            }
        }
    }

    /// What a token bound to a user gets is documented on every route, from
    /// the rule the server applies: 403 where it is refused, 404 for
    /// another user's run or thread.
    #[test]
    fn a_member_tokens_refusals_are_documented() {
        use crate::auth::{MemberRule, member_rule};
        let doc: serde_json::Value = serde_json::from_str(&super::generate()).unwrap();
        let mut refused = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            if !path.starts_with("/v1/") {
                continue;
            }
            let parts: Vec<&str> = path.split('/').skip(1).collect();
            for (method, op) in item.as_object().unwrap() {
                let m = axum::http::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let text = |status: &str| {
                    op["responses"][status]["description"]
                        .as_str()
                        .unwrap_or("")
                        .to_owned()
                };
                match member_rule(&m, &parts) {
                    MemberRule::Refused => {
                        refused += 1;
                        assert!(
                            text("403").contains("bound to a user"),
                            "{method} {path}: {}",
                            text("403")
                        );
                    }
                    MemberRule::OwnRun | MemberRule::OwnThread => {
                        assert!(
                            text("404").contains("another user's"),
                            "{method} {path}: {}",
                            text("404")
                        );
                    }
                    MemberRule::Open => {}
                }
            }
        }
        assert!(refused > 20, "{refused}");
    }

    /// Every operation that takes a parameter or a body documents 400, and
    /// one with a body 413 and 415: the server answers them to any such
    /// operation (a path parameter that is not UTF-8, a query that does
    /// not parse, a body too large or not JSON).
    #[test]
    fn every_operation_that_takes_input_documents_its_refusals() {
        let doc: serde_json::Value = serde_json::from_str(&super::generate()).unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let responses = op["responses"].as_object().unwrap();
                let params = op["parameters"].as_array().is_some_and(|p| !p.is_empty());
                let body = op.get("requestBody").is_some();
                if params || body {
                    assert!(responses.contains_key("400"), "{method} {path}");
                }
                if body {
                    for status in ["413", "415"] {
                        assert!(responses.contains_key(status), "{method} {path} {status}");
                    }
                }
            }
        }
    }

    /// Every `$ref` names a schema the document holds (query parameters'
    /// schemas are registered by hand).
    #[test]
    fn operation_ids_are_unique() {
        // Generated from handler names: two `reload`s in different route
        // modules make a document that OpenAPI validators refuse.
        let doc: serde_json::Value = serde_json::from_str(&super::generate()).unwrap();
        let mut seen = std::collections::HashMap::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let Some(id) = op.get("operationId").and_then(|v| v.as_str()) else {
                    continue;
                };
                if let Some(first) = seen.insert(id.to_owned(), format!("{method} {path}")) {
                    panic!("operationId {id:?} of {method} {path} is also {first}'s");
                }
            }
        }
    }

    #[test]
    fn every_reference_resolves() {
        let json = super::generate();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let prefix = "\"#/components/schemas/";
        for (at, _) in json.match_indices(prefix) {
            let rest = &json[at + prefix.len()..];
            let name = &rest[..rest.find('"').unwrap()];
            assert!(
                doc["components"]["schemas"].get(name).is_some(),
                "{name} is referenced but not in components.schemas"
            );
        }
    }

    /// The patterns written out in attributes (which take only literals)
    /// are the ones `schemas` defines and tests.
    #[test]
    fn literal_patterns_are_the_tested_ones() {
        use crate::schemas::{IDEMPOTENCY_HEADER_PATTERN, NOT_BLANK_PATTERN, ROLES_PATTERN};
        let doc: serde_json::Value = serde_json::from_str(&super::generate()).unwrap();
        let schemas = &doc["components"]["schemas"];
        for (schema, field) in [
            ("MessageRequest", "text"),
            ("JobRequest", "name"),
            ("JobRequest", "text"),
        ] {
            assert_eq!(
                schemas[schema]["properties"][field]["pattern"], NOT_BLANK_PATTERN,
                "{schema}.{field}"
            );
        }
        let param = |path: &str, method: &str, name: &str| {
            doc["paths"][path][method]["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()["schema"]["pattern"]
                .clone()
        };
        assert_eq!(
            param("/v1/permissions/check", "get", "roles"),
            ROLES_PATTERN
        );
        assert_eq!(
            param("/v1/messages", "post", "Idempotency-Key"),
            IDEMPOTENCY_HEADER_PATTERN
        );
    }
}
