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

/// The names of the tools offered in the first request the fake provider
/// got for `model` (a sub-agent's model, in the sub-agent tests).
pub fn offered_to(fake: &hearth_testkit::FakeOpenAi, model: &str) -> Vec<String> {
    let request = fake
        .requests()
        .into_iter()
        .find(|r| r["model"] == model)
        .unwrap();
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}
