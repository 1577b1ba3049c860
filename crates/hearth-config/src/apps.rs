//! `[apps]`: other bots' app manifests (see `shared/app-manifest.v1.schema.json`).

use serde::{Deserialize, Serialize};

/// `[apps]`
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppsConfig {
    /// FOR TESTS ONLY (default false). Lets a manifest be imported from a
    /// loopback address (`http://127.0.0.1:<port>/...`, plain HTTP
    /// accepted there only), so a test can serve one locally. Never set it
    /// in production: with it off, manifests come only from public HTTPS
    /// addresses, through the same guard as `web_fetch`.
    pub allow_loopback_urls: bool,
}
