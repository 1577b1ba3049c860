//! Set-up shared by the runtime's integration tests: runtimes come from
//! `hearth_runtime::testing`, through the same builder as `hearth serve`.

use std::path::Path;
use std::sync::Arc;

use hearth_runtime::RuntimeBuilder;
use hearth_store::Store;

pub use hearth_runtime::testing::{build, fake_toml};

/// A store on `dir/hearth.db`, where a runtime over `dir` keeps its state.
pub fn store(dir: &Path) -> Arc<dyn Store> {
    hearth_runtime::testing::store(dir)
}

/// The builder of a runtime over `dir` and its `store`, configured by `toml`.
pub fn builder(dir: &Path, toml: &str, store: &Arc<dyn Store>) -> RuntimeBuilder {
    hearth_runtime::testing::builder(dir, toml, store.clone())
}
