//! Set-up shared by the runtime's integration tests.

use std::path::Path;
use std::sync::Arc;

use hearth_runtime::Catalog;
use hearth_store::{Durability, SqliteStore, Store};

/// A store on `dir/h.db`.
pub fn store(dir: &Path) -> Arc<dyn Store> {
    Arc::new(SqliteStore::open(&dir.join("h.db"), Durability::Normal).unwrap())
}

/// A catalog from a hearth.toml text.
pub fn catalog(toml: &str) -> Catalog {
    let config = hearth_config::load_str(toml, "test", Vec::new()).unwrap();
    Catalog::from_config(
        &config,
        &Default::default(),
        &Default::default(),
        reqwest::Client::new(),
    )
    .unwrap()
}

/// A hearth.toml whose default model `fake/m` is the fake at `base_url`:
/// `llm_extra` goes into `[llm]` (keys or further tables), `provider_extra`
/// into the fake provider's table.
pub fn fake_toml(base_url: &str, provider_extra: &str, llm_extra: &str) -> String {
    format!(
        "[llm]\ndefault_model = \"fake/m\"\n{llm_extra}\n[llm.providers.fake]\n\
         type = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\nbase_url = \"{base_url}\"\nmodels = [\"m\"]\n{provider_extra}\n"
    )
}
