//! One MCP tool call through the registry to a stdio server that answers at
//! once (the testkit's `fake-mcp`): what hearth adds around the server's own
//! answer (argument check, the call's task and timeout, JSON-RPC over the
//! child's pipes, rendering, untrusted-content wrapping).
//!
//! `cargo bench -p hearth-mcp --bench call`

#![expect(
    clippy::unwrap_used,
    reason = "a benchmark unwraps what it set up; a failure there is a broken benchmark"
)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hearth_config::{McpConfig, McpServerConfig};
use hearth_mcp::{McpManager, ServerState};
use hearth_tools::{ToolContext, ToolRegistry};

fn call(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = McpConfig {
        servers: BTreeMap::from([(
            "fk".to_owned(),
            McpServerConfig {
                command: Some(
                    hearth_testkit::fake_mcp::fake_mcp_bin()
                        .display()
                        .to_string(),
                ),
                preset: hearth_config::PresetName::Member,
                ..McpServerConfig::default()
            },
        )]),
        ..McpConfig::default()
    };
    let env: BTreeMap<String, String> = std::env::vars().collect();
    let manager = rt.block_on(async {
        let m = McpManager::new(&config, &env, &reqwest::Client::new());
        m.start();
        let up = m
            .wait_for("fk", Duration::from_secs(30), |s| {
                s.state == ServerState::Ready
            })
            .await;
        assert!(up, "{:?}", m.statuses());
        m
    });
    let mut registry = ToolRegistry::new();
    registry.add_source(Arc::new(manager.clone()));
    let ctx = ToolContext::default();
    c.bench_function("mcp_tool_call_stdio_echo", |b| {
        b.iter(|| {
            rt.block_on(registry.execute(
                &ctx,
                "fk__echo",
                r#"{"text":"hello"}"#,
                Duration::from_secs(10),
            ))
        })
    });
    rt.block_on(manager.shutdown());
}

criterion_group!(benches, call);
criterion_main!(benches);
