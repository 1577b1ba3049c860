//! `hearth health`: is the server up, and ready?

use std::collections::BTreeMap;

use reqwest::Method;
use serde::{Deserialize, Serialize};

use super::Api;
use crate::Exit;
use crate::output::print_json;

/// `GET /healthz`. The server's `Health` holds `&'static str` fields, which
/// cannot be deserialised, so the CLI reads it into this owned twin.
#[derive(Debug, Serialize, Deserialize)]
struct Health {
    status: String,
    version: String,
}

/// `GET /readyz` (the owned twin of the server's `Ready`).
#[derive(Debug, Serialize, Deserialize)]
struct Ready {
    status: String,
    checks: BTreeMap<String, String>,
}

/// Prints the version and readiness; not ready is an error exit naming the
/// checks that failed.
pub(super) async fn health(api: &Api, json_out: bool) -> Result<(), Exit> {
    let health: Health = api.get("/healthz").await?;
    // /readyz answers 503 with the same body when not ready.
    let resp = api.send(api.request(Method::GET, "/readyz")).await?;
    let code = resp.status();
    let text = resp
        .text()
        .await
        .map_err(|e| anyhow::anyhow!("the answer from hearth broke off: {}", e.without_url()))?;
    let ready: Ready = serde_json::from_str(&text).map_err(|_| api.api_error(code, &text))?;
    if json_out {
        #[derive(Serialize)]
        struct Both<'a> {
            health: &'a Health,
            ready: &'a Ready,
        }
        print_json(&Both {
            health: &health,
            ready: &ready,
        });
    } else {
        println!("hearth {} {}", health.version, ready.status);
    }
    if code.is_success() {
        return Ok(());
    }
    let failing: Vec<String> = ready
        .checks
        .iter()
        .filter(|(_, v)| v.as_str() != "ok")
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    Err(anyhow::anyhow!("hearth is not ready: {}", failing.join("; ")).into())
}
