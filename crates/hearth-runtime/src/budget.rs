//! Budgets in the runtime: the pools built from `[budget]`, their use
//! rebuilt from the store at start, their state for `GET /v1/budget`, and
//! their threshold crossings published as `budget.threshold` notices.
//! Enforcement itself is the engine's, before each model call.
//!
//! On a store replicas share (PostgreSQL) the pools keep reservations and
//! use in the store's budget ledger, as this replica (its holds count while
//! it heartbeats), so every replica enforces what all of them spend; on
//! SQLite they stay in memory.

use std::sync::Arc;

use hearth_agent::budget::{
    Budget, FreeModels, PastCall, PoolKind, PoolSpec, PoolStatus, Scope, Window,
};
use hearth_config::Config;
use hearth_core::now_ms;
use hearth_llm::prices::{PriceTable, Tokens};
use serde_json::json;
use tracing::{info, warn};

use crate::error::Result;
use crate::notices::Notice;
use crate::runtime::Runtime;

/// The echo provider costs nothing, whatever is configured.
const ECHO: &str = "echo";

/// The pools of `config` (`[[budget.pools]]` and the daily shortcuts),
/// priced with `prices`; `None` when there are none, so calls skip the
/// budget altogether.
pub fn from_config(config: &Config, prices: &PriceTable) -> Option<Arc<Budget>> {
    let pools: Vec<PoolSpec> = config
        .budget
        .all_pools()
        .into_iter()
        .map(|p| PoolSpec {
            name: p.name,
            kind: match p.kind {
                hearth_config::PoolKind::CostUsd => PoolKind::CostUsd,
                hearth_config::PoolKind::Tokens => PoolKind::Tokens,
                hearth_config::PoolKind::Requests => PoolKind::Requests,
            },
            limit: p.limit,
            window: match p.window {
                hearth_config::PoolWindow::Hour => Window::Hour,
                hearth_config::PoolWindow::Day => Window::Day,
                hearth_config::PoolWindow::Month => Window::Month,
                hearth_config::PoolWindow::Rolling24h => Window::Rolling24h,
            },
            scope: match p.scope {
                hearth_config::PoolScope::Global => Scope::Global,
                hearth_config::PoolScope::User => Scope::User,
                hearth_config::PoolScope::Thread => Scope::Thread,
            },
            models: p.models,
        })
        .collect();
    if pools.is_empty() {
        return None;
    }
    let mut free = FreeModels::default();
    free.providers.insert(ECHO.to_owned());
    for (name, p) in &config.llm.providers {
        if p.free {
            free.providers.insert(name.clone());
        }
    }
    for (model, p) in &config.llm.prices {
        if p.free {
            free.models.insert(model.clone());
        }
    }
    Some(Arc::new(Budget::new(
        pools,
        prices.clone(),
        free,
        config.agent.max_output_tokens,
    )))
}

impl Runtime {
    /// Each pool's limit, use, holds and reset (empty without pools); on a
    /// shared store, what every replica holds and used.
    pub async fn budget_status(&self) -> Vec<PoolStatus> {
        let budget = self.inner.live().engine.budget().cloned();
        match budget {
            Some(b) => b.current().await,
            None => Vec::new(),
        }
    }

    /// Makes `budget` keep its reservations and use in the store's ledger
    /// when the store is shared with other replicas (nothing on SQLite).
    pub(crate) fn share_budget(&self, budget: &Budget) {
        if let Some(ledger) = self.inner.store.budget_ledger() {
            budget.share(
                ledger,
                self.inner.options.owner.clone(),
                self.inner.options.lease,
            );
        }
    }

    /// Rebuilds the pools' use from the calls stored within their windows,
    /// and starts publishing their threshold crossings as notices.
    pub(crate) async fn start_budget(&self) -> Result<()> {
        let Some(budget) = self.inner.live().engine.budget().cloned() else {
            return Ok(());
        };
        self.start_budget_of(budget).await
    }

    /// As `start_budget`, for `budget` (a reload's new pools).
    pub(crate) async fn start_budget_of(&self, budget: Arc<Budget>) -> Result<()> {
        self.share_budget(&budget);
        let now = now_ms();
        if let Some(since) = budget.restore_since(now) {
            let calls = self.inner.store.calls_since(since).await?;
            let n = calls.len();
            let calls: Vec<PastCall> = calls
                .into_iter()
                .map(|c| PastCall {
                    at: c.at,
                    model: c.model,
                    thread_key: c.thread_key,
                    user_key: c.user_key,
                    tokens: Tokens {
                        input: c.input_tokens,
                        output: c.output_tokens,
                        cached: c.cached_tokens,
                        cache_write: c.cache_write_tokens,
                        reasoning: c.reasoning_tokens,
                    },
                })
                .collect();
            // The ledger counts what it did not see (calls stored before it
            // counted them); memory mirrors it for the router meanwhile.
            budget.seed_shared(&calls).await?;
            budget.restore(calls);
            info!(
                pools = budget.pools().len(),
                calls = n,
                "budget pools restored from stored usage"
            );
        }
        if budget.is_shared() {
            tidy_holds(&budget, self.inner.options.lease);
        }
        let mut rx = budget.subscribe();
        let notices = self.inner.notices.clone();
        tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(t) => notices.publish(Notice {
                        event: "budget.threshold".into(),
                        at: t.at,
                        data: json!({
                            "pool": t.pool,
                            "kind": t.kind.as_str(),
                            "subject": t.subject,
                            "percent": t.percent,
                            "used": t.used,
                            "limit": t.limit,
                            "resets_at": hearth_core::rfc3339(t.resets_at),
                        }),
                    }),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        warn!(
                            missed = n,
                            "budget threshold notices were dropped: too many at once"
                        );
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(())
    }
}

/// Every few leases, removes the holds that no longer count from the ledger
/// (a dead replica's; this replica's whose settlement failed), for as long
/// as `budget` is in use. Counting already ignores them: this only keeps
/// the table small.
fn tidy_holds(budget: &Arc<Budget>, lease: std::time::Duration) {
    let weak = Arc::downgrade(budget);
    let every = (lease * 4).max(std::time::Duration::from_secs(30));
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(budget) = weak.upgrade() else {
                return;
            };
            match budget.tidy_shared().await {
                Ok(0) => {}
                Ok(n) => info!(holds = n, "released budget holds that no longer count"),
                Err(e) => warn!(error = %e, "could not tidy the budget ledger"),
            }
        }
    });
}
