//! The runtime assembled exactly as `hearth serve` assembles it (the same
//! builder, the channels included), so every refusal of its start comes out
//! here first in its own words; then its MCP servers are given a moment to
//! start and list their tools, its skills are read as they verified, and it
//! is shut down without having served.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hearth_config::Config;
use hearth_runtime::{BuildError, Runtime};
use hearth_store::Store;

use super::{Report, Status};

/// How long MCP servers get to start and list their tools.
const MCP_WITHIN: Duration = Duration::from_secs(20);
/// How often their states are looked at meanwhile.
const MCP_POLL: Duration = Duration::from_millis(100);

/// Builds the runtime and checks what runs in it. Gives the configuration
/// as `GET /v1/config` would show it from this runtime (what a server
/// started or reloaded now would serve), when it assembled.
pub async fn check(
    report: &mut Report,
    home: &Path,
    config: &Config,
    store: Arc<dyn Store>,
    addr: SocketAddr,
) -> Option<serde_json::Value> {
    let built = Runtime::builder(home, config.clone())
        .store(store)
        .listening_on(addr)
        .surface(Box::new(hearth_channels::ChannelsFactory))
        // Doctor reads the skills once; it has no SIGHUP to follow.
        .reload_on_sighup(false)
        .build()
        .await;
    let runtime = match built {
        Ok(rt) => rt,
        Err(e) => {
            let status = Status::Fail;
            let message = match &e {
                BuildError::Config(m) => m.clone(),
                other => format!("{other}: {}", source_chain(other)),
            };
            report.bad("start", status, message, None);
            return None;
        }
    };
    let default = runtime.models().default;
    report.ok(
        "start",
        format!(
            "the runtime assembles as `hearth serve` would (default model {}/{})",
            default.provider, default.model
        ),
    );
    mcp(report, &runtime).await;
    skills(report, &runtime);
    let view = runtime.config_view().config;
    runtime.shutdown(Duration::ZERO).await;
    Some(view)
}

fn source_chain(e: &dyn std::error::Error) -> String {
    let mut out = Vec::new();
    let mut cur = e.source();
    while let Some(s) = cur {
        out.push(s.to_string());
        cur = s.source();
    }
    out.join(": ")
}

/// Each MCP server (and executable skill) started and listed its tools.
async fn mcp(report: &mut Report, runtime: &Runtime) {
    let t0 = Instant::now();
    let mut servers = runtime.mcp_servers();
    while servers.iter().any(|s| s.state == "starting") && t0.elapsed() < MCP_WITHIN {
        tokio::time::sleep(MCP_POLL).await;
        servers = runtime.mcp_servers();
    }
    for s in servers {
        let name = format!("mcp {}", s.name);
        match s.state {
            "ready" => report.ok(
                name,
                format!("started ({}); lists {} tool(s)", s.transport, s.tools),
            ),
            "disabled" => report.ok(name, "disabled"),
            "starting" => report.bad(
                name,
                Status::Warn,
                format!("did not start within {} s", MCP_WITHIN.as_secs()),
                Some("check its command or url; `hearth serve` keeps trying".into()),
            ),
            _ => report.bad(
                name,
                Status::Warn,
                format!(
                    "did not start: {}",
                    s.last_error.as_deref().unwrap_or("no reason given")
                ),
                Some(
                    "fix its command, url or env in [mcp.servers]; `hearth serve` keeps retrying"
                        .into(),
                ),
            ),
        }
    }
}

/// Every skill found is eligible: executable skills verified against the
/// trusted keys, needs met.
fn skills(report: &mut Report, runtime: &Runtime) {
    let skills = runtime.skills();
    let mut fine = 0;
    for s in &skills {
        if s.eligible {
            fine += 1;
            continue;
        }
        let unsigned = s.signed == Some(false);
        report.bad(
            format!("skill {}", s.name),
            Status::Warn,
            format!(
                "not offered to the model: {}",
                s.reason.as_deref().unwrap_or("no reason given")
            ),
            Some(if unsigned {
                "sign it with a key listed in [skills] trusted_keys, or add the key that signed it"
                    .into()
            } else {
                format!("see {}", s.path)
            }),
        );
    }
    if fine > 0 {
        report.ok(
            "skills",
            format!("{fine} skill(s) eligible (executable ones verified against the trusted keys)"),
        );
    }
}
