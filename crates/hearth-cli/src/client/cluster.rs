//! `hearth cluster`: the store and the replicas sharing it.

use serde::{Deserialize, Serialize};

use super::Api;
use crate::Exit;
use crate::output::print_json;

/// `GET /v1/cluster` (the owned twin of the server's answer).
#[derive(Debug, Serialize, Deserialize)]
struct Cluster {
    backend: String,
    this: String,
    replicas: Vec<Replica>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Replica {
    id: String,
    addr: String,
    started_at: String,
    last_seen: String,
    runs_executing: u64,
    holds: Vec<String>,
}

/// Prints the backend and one line per replica (this one marked `*`).
pub(super) async fn cluster(api: &Api, json_out: bool) -> Result<(), Exit> {
    let cluster: Cluster = api.get("/v1/cluster").await?;
    if json_out {
        print_json(&cluster);
        return Ok(());
    }
    println!(
        "store: {} ({} replica{})",
        cluster.backend,
        cluster.replicas.len(),
        if cluster.replicas.len() == 1 { "" } else { "s" }
    );
    let width = cluster
        .replicas
        .iter()
        .map(|r| r.id.len())
        .max()
        .unwrap_or(2)
        .max(2);
    println!(
        "  {:<width$}  {:<21}  {:<20}  {:<20}  {:>4}  HOLDS",
        "ID", "ADDR", "STARTED", "LAST SEEN", "RUNS"
    );
    for r in &cluster.replicas {
        let mark = if r.id == cluster.this { '*' } else { ' ' };
        println!(
            "{mark} {:<width$}  {:<21}  {:<20}  {:<20}  {:>4}  {}",
            r.id,
            if r.addr.is_empty() { "-" } else { &r.addr },
            short_time(&r.started_at),
            short_time(&r.last_seen),
            r.runs_executing,
            if r.holds.is_empty() {
                "-".to_owned()
            } else {
                r.holds.join(",")
            }
        );
    }
    Ok(())
}

/// An RFC 3339 time to the second.
fn short_time(t: &str) -> &str {
    t.get(..19).unwrap_or(t)
}
