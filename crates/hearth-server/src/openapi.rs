//! The OpenAPI document, generated from the handlers' annotations.

use utoipa::OpenApi;

use crate::dto;
use crate::routes::{confirmations, messages, ops, permissions, threads, tools, usage};

/// The API's OpenAPI description.
#[derive(OpenApi)]
#[openapi(
    info(title = "hearth", description = "Self-hosted AI agent gateway: HTTP API v1"),
    paths(
        ops::healthz, ops::readyz, ops::metrics, ops::openapi,
        messages::post_message, messages::list_runs, messages::get_run, messages::run_events,
        messages::cancel_run, messages::run_trace,
        threads::models, threads::runtime, threads::set_model, threads::set_thinking,
        threads::new_session, threads::set_incognito, usage::usage, tools::tools,
        permissions::list, permissions::add_grant, permissions::remove_grant,
        permissions::check, permissions::audit, confirmations::resolve,
    ),
    components(schemas(
        hearth_core::RunEnvelope, hearth_core::RunStatus, hearth_core::RunError,
        hearth_core::RunOutput, hearth_core::Confirmation, hearth_core::DeliveryMode,
        dto::MessageRequest, dto::Health, dto::Ready, dto::RunList, dto::Trace, dto::TraceStep,
        dto::Models, dto::ModelInfo, dto::Capabilities, dto::ThreadRuntime, dto::SetModel,
        dto::SetThinking, dto::SetIncognito, dto::ErrorBody, dto::ErrorDetail, dto::UsageRow,
        dto::UsageRows, dto::ToolInfo, dto::ToolList, dto::GrantRequest, dto::GrantView, dto::RemovedGrant, dto::Permissions,
        dto::CheckResult, dto::AuditEventView, dto::AuditEvents, dto::ConfirmRequest,
    )),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document generated from the handlers' annotations, pretty-printed.
pub fn generate() -> String {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_owned();
    let mut json = doc
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
}
