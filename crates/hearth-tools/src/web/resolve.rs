//! The DNS resolver the fetch client connects through.
//!
//! Checking a name's addresses before the request and then letting the HTTP
//! client resolve it again would let a rebinding DNS server answer the check
//! with a public address and the connection with a private one. So the check
//! lives inside the resolver: the connector only ever sees addresses that
//! passed [`super::guard::Allowance::allows`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::guard::{Allowance, Refusal};

/// A name that did not resolve at all (as opposed to one that resolved only
/// to refused addresses, which is a [`Refusal`]).
#[derive(Debug, thiserror::Error)]
#[error("could not resolve {host}: {message}")]
pub struct LookupFailed {
    /// The host name.
    pub host: String,
    /// What the system resolver said.
    pub message: String,
}

/// Resolves with `tokio::net::lookup_host` and drops every address the
/// policy refuses; fails when none is left.
#[derive(Clone)]
pub struct GuardedResolver {
    /// Public addresses plus the test-only allowance.
    allow: Allowance,
    /// Test-only fixed answers, keyed by lower-case host without a trailing
    /// dot. Still filtered by the policy like real answers.
    overrides: Arc<HashMap<String, Vec<SocketAddr>>>,
}

impl GuardedResolver {
    /// A resolver applying `allow`, answering names in `overrides` without
    /// DNS (tests only; empty in production).
    pub fn new(allow: Allowance, overrides: &HashMap<String, Vec<SocketAddr>>) -> Self {
        let overrides = overrides
            .iter()
            .map(|(k, v)| (normalise(k), v.clone()))
            .collect();
        Self {
            allow,
            overrides: Arc::new(overrides),
        }
    }

    /// Resolves `host` and keeps only allowed addresses.
    pub async fn lookup(
        &self,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let key = normalise(host);
        let found: Vec<SocketAddr> = match self.overrides.get(&key) {
            Some(addrs) => addrs.clone(),
            None => tokio::net::lookup_host((host, 0))
                .await
                .map_err(|e| LookupFailed {
                    host: host.to_owned(),
                    message: e.to_string(),
                })?
                .collect(),
        };
        let mut kept = Vec::new();
        let mut dropped = Vec::new();
        for addr in found {
            match self.allow.allows(addr) {
                Ok(()) => kept.push(addr),
                Err(why) => {
                    tracing::debug!(host, %addr, why, "web_fetch: dropped resolved address");
                    dropped.push((addr.ip(), why));
                }
            }
        }
        if kept.is_empty() {
            if dropped.is_empty() {
                return Err(Box::new(LookupFailed {
                    host: host.to_owned(),
                    message: "no addresses".into(),
                }));
            }
            return Err(Box::new(Refusal::NoPublicAddress {
                host: host.to_owned(),
                dropped,
            }));
        }
        Ok(kept)
    }
}

/// Override keys: case and a trailing dot do not matter in DNS.
fn normalise(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addrs = this.lookup(name.as_str()).await?;
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}
