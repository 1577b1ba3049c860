//! The server's log at INFO, the default, after a model call that cannot
//! reach its provider and an MCP server that cannot be reached: errors read
//! as sentences (each cause after a colon), never as Rust's debug dumps
//! (`Error { kind: .. }`) or type paths (`reqwest::Error`,
//! `rmcp::transport::..`).

use std::time::Duration;

use crate::harness::{Hearth, poll};

/// A port nothing listens on: connections to it are refused.
async fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

#[tokio::test]
async fn errors_in_the_info_log_are_sentences_not_debug_dumps() {
    let port = closed_port().await;
    let config = format!(
        "[llm]\ndefault_model = \"down/m\"\n\
         [llm.providers.down]\ntype = \"openai_compat\"\nheaders = {{ Authorization = \"Bearer test-key\" }}\n\
         base_url = \"http://127.0.0.1:{port}/v1\"\nmodels = [\"m\"]\n\
         [mcp.servers.gone]\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let dir = tempfile::tempdir().unwrap();
    let h = Hearth::start(dir.path(), Some(&config)).await;
    let run = h.ask("api:logs", "hello").await;
    let done = h.wait_run(run["run_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "failed", "{done}");
    let log_path = dir.path().join("serve.log");
    // Both failures are in the log before it is read.
    let log = poll(
        "the MCP and provider failures in the log",
        Duration::from_secs(30),
        || {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            async move {
                if log.contains("MCP server failed") && log.contains("run_id") {
                    Ok(log)
                } else {
                    Err(log)
                }
            }
        },
    )
    .await;
    h.terminate().await;

    let mut dumps = Vec::new();
    for line in log
        .lines()
        .filter(|l| !l.contains(" DEBUG ") && !l.contains(" TRACE "))
    {
        let message = line.split_once("  ").map_or(line, |(_, rest)| rest);
        // A log line's own fields are `key=value`; what must not show is a
        // struct dump or a type path inside them.
        if message.contains("Error {") || message.contains(" { ") || has_type_path(message) {
            dumps.push(line.to_owned());
        }
    }
    assert!(
        dumps.is_empty(),
        "debug dumps in the INFO log:\n{}",
        dumps.join("\n")
    );
    // The causes are still there, as words.
    assert!(
        log.contains("Connection refused") || log.contains("connection refused"),
        "{log}"
    );
}

/// `a::b`-style Rust paths (`reqwest::Error`, `hyper_util::client::..`),
/// not the `::` of an IPv6 address (`[::1]`).
fn has_type_path(text: &str) -> bool {
    text.match_indices("::").any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + 2..].chars().next();
        before.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && after.is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    })
}
