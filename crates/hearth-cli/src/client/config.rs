//! `hearth config show|reload`: the running server's configuration
//! (`GET /v1/config`) and reading it again (`POST /v1/config/reload`).

use hearth_server::routes::config::{ConfigReloaded, ConfigShown};

use super::Api;
use crate::Exit;
use crate::cli::ConfigCommand;
use crate::output::print_json;

/// Runs one `hearth config` command.
pub(super) async fn config(api: &Api, command: ConfigCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        ConfigCommand::Show => {
            let shown: ConfigShown = api.get("/v1/config").await?;
            if json_out {
                print_json(&shown);
                return Ok(());
            }
            println!("# loaded at {}", shown.loaded_at);
            // TOML would read best, but JSON keeps `null` for unset keys;
            // pretty JSON is what a reader can paste into `jq` too.
            print_json(&shown.sections);
        }
        ConfigCommand::Reload => {
            let done: ConfigReloaded = api
                .post("/v1/config/reload", &serde_json::json!({}))
                .await?;
            if json_out {
                print_json(&done);
                return Ok(());
            }
            if done.changed.is_empty() {
                println!(
                    "configuration reloaded at {}: nothing live changed",
                    done.loaded_at
                );
            } else {
                println!(
                    "configuration reloaded at {}; in force for the next runs: {}",
                    done.loaded_at,
                    done.changed.join(", ")
                );
            }
            if !done.needs_restart.is_empty() {
                println!(
                    "changed but needs a restart (not applied): {}",
                    done.needs_restart.join(", ")
                );
            }
        }
    }
    Ok(())
}
