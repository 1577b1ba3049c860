//! Budgets in the runtime: the pools built from `[budget]`, their use
//! rebuilt from the store at start, their state for `GET /v1/budget`, and
//! their threshold crossings published as `budget.threshold` notices.
//! Enforcement itself is the engine's, before each model call.

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
    /// Each pool's limit, use, holds and reset (empty without pools).
    pub fn budget_status(&self) -> Vec<PoolStatus> {
        self.inner
            .live()
            .engine
            .budget()
            .map(|b| b.status())
            .unwrap_or_default()
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
        let now = now_ms();
        if let Some(since) = budget.restore_since(now) {
            let calls = self.inner.store.calls_since(since).await?;
            let n = calls.len();
            budget.restore(calls.into_iter().map(|c| PastCall {
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
            }));
            info!(
                pools = budget.pools().len(),
                calls = n,
                "budget pools restored from stored usage"
            );
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
