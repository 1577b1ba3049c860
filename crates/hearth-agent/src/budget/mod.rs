//! Budgets: limit pools that model calls draw from, enforced before each call.
//!
//! A call first reserves its estimate (input tokens estimated from the
//! request's text, plus the run's `max_output_tokens` at the model's output
//! price) in every pool its model draws from, and is refused when
//! `used + reserved + estimate > limit` in any of them; when it ends, the
//! reservation is settled to what the provider reported. A call the provider
//! reported nothing for (it failed, its stream carried no usage, or it was
//! cut off because the run was cancelled and the reservation dropped
//! unsettled) was still sent and is billed: it is charged its prompt
//! estimate plus the answer that streamed, and counts as a request, so
//! cancelling cannot buy free calls. Because the check and the hold happen
//! under one lock, concurrent calls can pass a pool's limit only by what
//! their real use exceeds their estimate.
//!
//! Use lives in memory and is rebuilt from the store's usage at start
//! (`Budget::restore`), so it survives restarts. When replicas share the
//! store ([`Budget::share`], PostgreSQL), reservations and use are rows of
//! the store's budget ledger instead, so every replica checks against what
//! all of them hold and used (see `shared`); memory then only mirrors the
//! ledger for the router. A model with no known price
//! counts, in `cost_usd` pools, as the most expensive known model, unless it
//! is free; free models never draw from `cost_usd` pools.
//!
//! Crossing 80 % and 100 % of a pool is announced once per window as a
//! [`Threshold`] on [`Budget::subscribe`]. This module does not decide which
//! model a run uses: the router asks [`Budget::affordable`] and
//! [`Budget::scarcity`].

mod account;
mod shared;
mod window;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use hearth_core::{ChatRequest, Content, Timestamp, Usage, now_ms, rfc3339};
use hearth_llm::prices::{Price, PriceTable, Tokens};
use hearth_tools::profiles::glob_match;
use tokio::sync::broadcast;

use self::account::Account;
pub use self::window::Window;

/// What a pool counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// Estimated spend in US dollars.
    CostUsd,
    /// Prompt plus completion tokens.
    Tokens,
    /// Model calls.
    Requests,
}

impl PoolKind {
    /// The name used in config and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CostUsd => "cost_usd",
            Self::Tokens => "tokens",
            Self::Requests => "requests",
        }
    }

    fn show(self, amount: f64) -> String {
        match self {
            Self::CostUsd => format!("${amount:.4}"),
            Self::Tokens => format!("{amount:.0} tokens"),
            Self::Requests => format!("{amount:.0} requests"),
        }
    }
}

/// Who shares a pool's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everyone together.
    Global,
    /// Each user apart.
    User,
    /// Each thread apart.
    Thread,
}

impl Scope {
    /// The name used in config and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::User => "user",
            Self::Thread => "thread",
        }
    }
}

/// One configured pool.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolSpec {
    /// Unique name.
    pub name: String,
    /// What it counts.
    pub kind: PoolKind,
    /// The most per window (and per subject when scoped).
    pub limit: f64,
    /// When use starts again from zero.
    pub window: Window,
    /// Who shares the limit.
    pub scope: Scope,
    /// Globs over `<provider>/<model>`.
    pub models: Vec<String>,
}

/// Which models cost nothing.
#[derive(Debug, Clone, Default)]
pub struct FreeModels {
    /// Providers all of whose models are free.
    pub providers: HashSet<String>,
    /// Models marked free by price entry: `<provider>/<model>` or `<model>`.
    pub models: HashSet<String>,
}

impl FreeModels {
    /// True when `model_ref` (`<provider>/<model>`) is free.
    pub fn contains(&self, model_ref: &str) -> bool {
        let (provider, model) = model_ref.split_once('/').unwrap_or((model_ref, ""));
        self.providers.contains(provider)
            || self.models.contains(model_ref)
            || self.models.contains(model)
    }
}

/// Who pays for a call: the pools scoped by user or thread use these.
#[derive(Debug, Clone, Copy)]
pub struct Payer<'a> {
    /// The run's user.
    pub user_key: &'a str,
    /// The run's thread.
    pub thread_key: &'a str,
}

/// What one call is expected to use at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Prompt tokens, estimated from the request's text.
    pub input_tokens: u64,
    /// Completion tokens: the most the call may produce.
    pub output_tokens: u64,
}

/// A call refused because a pool cannot afford it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "budget pool {pool:?}{who} cannot afford a call to {model}: {used_shown} used of {limit_shown} \
     ({reserved_shown} held by calls in flight, this call may need {estimate_shown}); it resets at \
     {resets}",
    who = self.subject.as_ref().map(|s| format!(" (for {s})")).unwrap_or_default(),
    used_shown = self.kind.show(self.used),
    limit_shown = self.kind.show(self.limit),
    reserved_shown = self.kind.show(self.reserved),
    estimate_shown = self.kind.show(self.estimate),
    resets = rfc3339(self.resets_at),
)]
pub struct Refusal {
    pub pool: String,
    /// What it counts.
    pub kind: PoolKind,
    /// The user or thread for a scoped pool.
    pub subject: Option<String>,
    /// The model the call was for.
    pub model: String,
    /// Settled use in the window.
    pub used: f64,
    /// Held by calls in flight.
    pub reserved: f64,
    /// What this call needed.
    pub estimate: f64,
    /// The pool's limit.
    pub limit: f64,
    /// When the use shown is gone.
    pub resets_at: Timestamp,
}

/// A pool's use passed 80 % or 100 % of its limit (published once per window
/// as the `budget.threshold` event).
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    pub pool: String,
    /// What it counts.
    pub kind: PoolKind,
    /// The user or thread for a scoped pool.
    pub subject: Option<String>,
    /// 80 or 100.
    pub percent: u8,
    /// Settled use.
    pub used: f64,
    pub limit: f64,
    /// When the use shown is gone.
    pub resets_at: Timestamp,
    /// When it was crossed.
    pub at: Timestamp,
}

/// A pool's state for one subject, as `GET /v1/budget` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolStatus {
    /// The pool.
    pub name: String,
    /// What it counts.
    pub kind: PoolKind,
    /// Who shares it.
    pub scope: Scope,
    /// The user or thread; `None` for a global pool, or for a scoped pool
    /// nobody used in this window.
    pub subject: Option<String>,
    pub limit: f64,
    /// Settled use in the window.
    pub used: f64,
    /// Held by calls in flight.
    pub reserved: f64,
    /// When the use shown is gone.
    pub resets_at: Timestamp,
}

/// A model call counted in the store, for rebuilding use at start.
#[derive(Debug, Clone, PartialEq)]
pub struct PastCall {
    /// When it started.
    pub at: Timestamp,
    /// `<provider>/<model>`.
    pub model: String,
    /// Its thread (`None` for incognito runs).
    pub thread_key: Option<String>,
    /// Its user (`None` for incognito runs).
    pub user_key: Option<String>,
    /// Reported tokens (zero when the provider reported none).
    pub tokens: Tokens,
}

/// (pool index, subject; empty for global pools).
type Key = (usize, String);

/// The limit pools of this process.
pub struct Budget {
    pools: Vec<PoolSpec>,
    prices: PriceTable,
    /// Assumed for a model with no price.
    dearest: Price,
    free: FreeModels,
    max_output_tokens: u32,
    accounts: Mutex<HashMap<Key, Account>>,
    events: broadcast::Sender<Threshold>,
    /// The ledger replicas share, once attached (PostgreSQL only).
    shared: OnceLock<shared::Shared>,
}

impl std::fmt::Debug for Budget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budget")
            .field("pools", &self.pools)
            .field("max_output_tokens", &self.max_output_tokens)
            .finish_non_exhaustive()
    }
}

impl Budget {
    /// Pools priced with `prices`; `max_output_tokens` is what each call
    /// reserves for its answer.
    pub fn new(
        pools: Vec<PoolSpec>,
        prices: PriceTable,
        free: FreeModels,
        max_output_tokens: u32,
    ) -> Self {
        let dearest = prices.most_expensive();
        Self {
            pools,
            prices,
            dearest,
            free,
            max_output_tokens,
            accounts: Mutex::new(HashMap::new()),
            events: broadcast::channel(64).0,
            shared: OnceLock::new(),
        }
    }

    pub fn pools(&self) -> &[PoolSpec] {
        &self.pools
    }

    /// Most tokens one answer may have (sent to providers as max tokens).
    pub fn max_output_tokens(&self) -> u32 {
        self.max_output_tokens
    }

    /// Threshold crossings, as they happen.
    pub fn subscribe(&self) -> broadcast::Receiver<Threshold> {
        self.events.subscribe()
    }

    /// The estimate of a call with `request`: its text in tokens (about four
    /// bytes each, the usual rule for English and code) plus the most the
    /// answer may have. `tools_bytes` is the size of `request.tools`
    /// ([`crate::json_len::ListSize::text_bytes`]), which the caller
    /// remembers: measuring the schemas on every call cost more than the
    /// rest of the estimate.
    pub fn estimate(&self, request: &ChatRequest, tools_bytes: usize) -> Estimate {
        let mut bytes = request.system.len();
        for m in &request.messages {
            // A few tokens of framing per message.
            bytes += 16;
            for c in &m.content {
                bytes += match c {
                    Content::Text { text } | Content::Thinking { text, .. } => text.len(),
                    Content::ToolCall {
                        name, arguments, ..
                    } => name.len() + arguments.len(),
                    Content::ToolResult { output, .. } => output.len(),
                };
            }
        }
        if !request.tools.is_empty() {
            bytes += tools_bytes;
        }
        Estimate {
            input_tokens: (bytes as u64).div_ceil(4),
            output_tokens: u64::from(self.max_output_tokens),
        }
    }

    /// Checks that every pool `model` draws from can afford `estimate` now,
    /// without holding anything (for the router).
    pub fn affordable(
        &self,
        model: &str,
        payer: Payer<'_>,
        estimate: Estimate,
    ) -> Result<(), Refusal> {
        let now = now_ms();
        let mut accounts = self.lock();
        self.check(&mut accounts, model, payer, estimate, now)
            .map(|_| ())
    }

    /// How close `model`'s pools are to their limits for `payer`: the highest
    /// `(used + reserved) / limit` among them, 0 (no pool, or unused) to 1
    /// (used up). The router makes scarce models dearer.
    pub fn scarcity(&self, model: &str, payer: Payer<'_>) -> f64 {
        let now = now_ms();
        let mut accounts = self.lock();
        let mut top: f64 = 0.0;
        for (i, pool) in self.pools.iter().enumerate() {
            if !self.draws(pool, model) {
                continue;
            }
            let Some(subject) = subject_of(pool.scope, payer) else {
                continue;
            };
            if let Some(a) = accounts.get_mut(&(i, subject.to_owned())) {
                a.roll(pool.window, now);
                top = top.max((a.used + a.reserved) / pool.limit);
            }
        }
        top.clamp(0.0, 1.0)
    }

    /// Holds `estimate` in every pool `model` draws from, or refuses (holding
    /// nothing) when one of them cannot afford it: in the shared ledger when
    /// one is attached, else in this process's memory (no await then).
    pub async fn reserve(
        self: &Arc<Self>,
        model: &str,
        payer: Payer<'_>,
        estimate: Estimate,
    ) -> Result<Reservation, Refusal> {
        match self.shared.get() {
            Some(shared) => self.reserve_shared(shared, model, payer, estimate).await,
            None => self.reserve_here(model, payer, estimate),
        }
    }

    /// [`Budget::reserve`] in this process's memory.
    pub(crate) fn reserve_here(
        self: &Arc<Self>,
        model: &str,
        payer: Payer<'_>,
        estimate: Estimate,
    ) -> Result<Reservation, Refusal> {
        let now = now_ms();
        let mut accounts = self.lock();
        let holds = self.check(&mut accounts, model, payer, estimate, now)?;
        for (key, amount) in &holds {
            accounts.entry(key.clone()).or_default().reserved += amount;
        }
        drop(accounts);
        Ok(Reservation {
            budget: self.clone(),
            model: model.to_owned(),
            holds,
            prompt_tokens: estimate.input_tokens,
            streamed_bytes: AtomicU64::new(0),
            settled: false,
            ledger_id: None,
        })
    }

    /// The holds `estimate` needs, or the first pool that cannot afford it.
    fn check(
        &self,
        accounts: &mut HashMap<Key, Account>,
        model: &str,
        payer: Payer<'_>,
        estimate: Estimate,
        now: Timestamp,
    ) -> Result<Vec<(Key, f64)>, Refusal> {
        let mut holds = Vec::new();
        for (i, pool) in self.pools.iter().enumerate() {
            if !self.draws(pool, model) {
                continue;
            }
            let Some(subject) = subject_of(pool.scope, payer) else {
                continue;
            };
            let key = (i, subject.to_owned());
            let need = self.estimated(pool.kind, model, estimate);
            let (used, reserved, resets_at) = match accounts.get_mut(&key) {
                Some(a) => {
                    a.roll(pool.window, now);
                    (a.used, a.reserved, a.resets_at(pool.window, now))
                }
                None => (0.0, 0.0, pool.window.end(now)),
            };
            if used + reserved + need > pool.limit {
                return Err(Refusal {
                    pool: pool.name.clone(),
                    kind: pool.kind,
                    subject: (pool.scope != Scope::Global).then(|| subject.to_owned()),
                    model: model.to_owned(),
                    used,
                    reserved,
                    estimate: need,
                    limit: pool.limit,
                    resets_at,
                });
            }
            holds.push((key, need));
        }
        Ok(holds)
    }

    /// Counts calls found in the store (at start): each in the pools its
    /// model draws from, if their windows still hold it. Thresholds already
    /// passed are not announced again.
    pub fn restore(&self, calls: impl IntoIterator<Item = PastCall>) {
        let now = now_ms();
        let mut accounts = self.lock();
        for call in calls {
            for (i, pool) in self.pools.iter().enumerate() {
                if !self.draws(pool, &call.model) {
                    continue;
                }
                let subject = match pool.scope {
                    Scope::Global => Some(String::new()),
                    Scope::User => call.user_key.clone(),
                    Scope::Thread => call.thread_key.clone(),
                };
                let Some(subject) = subject else {
                    continue;
                };
                let amount = self.actual(pool.kind, &call.model, call.tokens);
                accounts
                    .entry((i, subject))
                    .or_default()
                    .charge(pool.window, call.at, amount, now);
            }
        }
        for ((i, _), a) in accounts.iter_mut() {
            if let Some(pool) = self.pools.get(*i) {
                a.mark_announced(pool.window, pool.limit, now);
            }
        }
        accounts.retain(|_, a| !a.is_idle());
        self.set_gauges(&accounts);
    }

    /// The earliest instant any pool's window holds now: calls before it
    /// need not be restored. `None` without pools.
    pub fn restore_since(&self, now: Timestamp) -> Option<Timestamp> {
        self.pools.iter().map(|p| p.window.start(now)).min()
    }

    /// Every pool's state: one row per subject that used it or holds part of
    /// it in this window; a pool nobody used shows one row with no subject.
    pub fn status(&self) -> Vec<PoolStatus> {
        let now = now_ms();
        let mut accounts = self.lock();
        for ((i, _), a) in accounts.iter_mut() {
            if let Some(pool) = self.pools.get(*i) {
                a.roll(pool.window, now);
            }
        }
        accounts.retain(|_, a| !a.is_idle());
        self.set_gauges(&accounts);
        let mut out = Vec::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let rows: Vec<PoolStatus> = accounts
                .iter()
                .filter(|((j, _), _)| *j == i)
                .map(|((_, subject), a)| PoolStatus {
                    name: pool.name.clone(),
                    kind: pool.kind,
                    scope: pool.scope,
                    subject: (pool.scope != Scope::Global).then(|| subject.clone()),
                    limit: pool.limit,
                    used: a.used,
                    reserved: a.reserved,
                    resets_at: a.resets_at(pool.window, now),
                })
                .collect();
            out.extend(pool_rows(pool, rows, now));
        }
        out
    }

    /// Releases `holds` and counts what the call used, in memory.
    fn settle(&self, holds: &[(Key, f64)], model: &str, usage: Tokens) {
        let now = now_ms();
        let mut accounts = self.lock();
        let mut crossed = Vec::new();
        for (key, held) in holds {
            let Some(pool) = self.pools.get(key.0) else {
                continue;
            };
            let amount = self.actual(pool.kind, model, usage);
            let a = accounts.entry(key.clone()).or_default();
            a.reserved = (a.reserved - held).max(0.0);
            a.charge(pool.window, now, amount, now);
            for percent in a.crossed(pool.window, pool.limit, now) {
                crossed.push(Threshold {
                    pool: pool.name.clone(),
                    kind: pool.kind,
                    subject: (pool.scope != Scope::Global).then(|| key.1.clone()),
                    percent,
                    used: a.used,
                    limit: pool.limit,
                    resets_at: a.resets_at(pool.window, now),
                    at: now,
                });
            }
        }
        self.set_gauges(&accounts);
        drop(accounts);
        for t in crossed {
            tracing::warn!(pool = %t.pool, percent = t.percent, used = t.used, limit = t.limit, "budget pool threshold crossed");
            // Nobody listening is fine: the event is for alerts when configured.
            let _ = self.events.send(t);
        }
    }

    /// True when calls to `model` draw from `pool`.
    fn draws(&self, pool: &PoolSpec, model: &str) -> bool {
        if pool.kind == PoolKind::CostUsd && self.free.contains(model) {
            return false;
        }
        pool.models.iter().any(|g| glob_match(g, model))
    }

    fn price(&self, model: &str) -> Price {
        self.prices.price(model).unwrap_or(self.dearest)
    }

    fn estimated(&self, kind: PoolKind, model: &str, e: Estimate) -> f64 {
        match kind {
            PoolKind::Requests => 1.0,
            PoolKind::Tokens => (e.input_tokens + e.output_tokens) as f64,
            PoolKind::CostUsd => {
                let p = self.price(model);
                (e.input_tokens as f64 * p.input + e.output_tokens as f64 * p.output) / 1e6
            }
        }
    }

    fn actual(&self, kind: PoolKind, model: &str, t: Tokens) -> f64 {
        match kind {
            PoolKind::Requests => 1.0,
            PoolKind::Tokens => (t.input + t.output) as f64,
            // Unpriced: every prompt token at the top input price, cached or not.
            PoolKind::CostUsd => self.prices.cost(model, t).unwrap_or_else(|| {
                let p = self.dearest;
                (t.input as f64 * p.input + t.output as f64 * p.output) / 1e6
            }),
        }
    }

    /// `hearth_budget_used` / `hearth_budget_limit` per pool; a scoped pool
    /// shows its most used subject.
    fn set_gauges(&self, accounts: &HashMap<Key, Account>) {
        for (i, pool) in self.pools.iter().enumerate() {
            let used = accounts
                .iter()
                .filter(|((j, _), _)| *j == i)
                .map(|(_, a)| a.used)
                .fold(0.0, f64::max);
            metrics::gauge!("hearth_budget_used", "pool" => pool.name.clone()).set(used);
            metrics::gauge!("hearth_budget_limit", "pool" => pool.name.clone()).set(pool.limit);
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Account>> {
        self.accounts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn subject_of<'a>(scope: Scope, payer: Payer<'a>) -> Option<&'a str> {
    match scope {
        Scope::Global => Some(""),
        Scope::User => Some(payer.user_key),
        Scope::Thread => Some(payer.thread_key),
    }
}

/// Tokens a provider reported for a call.
pub fn tokens_of(usage: &Usage) -> Tokens {
    Tokens {
        input: usage.input_tokens.unwrap_or(0),
        output: usage.output_tokens.unwrap_or(0),
        cached: usage.cached_tokens.unwrap_or(0),
        cache_write: usage.cache_write_tokens.unwrap_or(0),
        reasoning: usage.reasoning_tokens.unwrap_or(0),
    }
}

/// A pool's status rows, by subject; a pool nobody used in this window shows
/// one row with no subject and nothing used.
fn pool_rows(pool: &PoolSpec, mut rows: Vec<PoolStatus>, now: Timestamp) -> Vec<PoolStatus> {
    if rows.is_empty() {
        rows.push(PoolStatus {
            name: pool.name.clone(),
            kind: pool.kind,
            scope: pool.scope,
            subject: None,
            limit: pool.limit,
            used: 0.0,
            reserved: 0.0,
            resets_at: match pool.window {
                Window::Rolling24h => now,
                Window::Hour | Window::Day | Window::Month => pool.window.end(now),
            },
        });
    }
    rows.sort_by(|a, b| a.subject.cmp(&b.subject));
    rows
}

/// Estimates held for one call that was sent. Settle it with what the call
/// used; dropped unsettled (the call was cut off), it charges what
/// [`Reservation::settle`] charges for a call that reported nothing.
#[must_use = "a reservation is settled when its call ends"]
pub struct Reservation {
    budget: Arc<Budget>,
    model: String,
    holds: Vec<(Key, f64)>,
    /// The prompt part of the estimate.
    prompt_tokens: u64,
    /// Bytes of answer (text, reasoning, tool calls) streamed so far.
    streamed_bytes: AtomicU64,
    settled: bool,
    /// Its id in the shared ledger (`None` in memory, or when the ledger
    /// could not be reached and memory held it instead).
    ledger_id: Option<String>,
}

impl Reservation {
    /// Notes `bytes` more of the answer as it streams in, so a call cut off
    /// midway is charged what it produced.
    pub fn streamed(&self, bytes: usize) {
        self.streamed_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// What a call charges when its provider reported nothing: the prompt
    /// estimate plus the answer streamed (about four bytes a token).
    pub fn unreported(&self) -> Tokens {
        Tokens {
            input: self.prompt_tokens,
            output: self.streamed_bytes.load(Ordering::Relaxed).div_ceil(4),
            ..Tokens::default()
        }
    }

    /// Replaces the holds with what the call used; `None` (a failed call, a
    /// stream without usage) charges [`Reservation::unreported`]. Either way
    /// the call counts as a request. With a shared ledger this is one
    /// transaction there, done when this returns.
    pub async fn settle(mut self, usage: Option<Tokens>) {
        self.settled = true;
        let usage = usage.unwrap_or_else(|| self.unreported());
        match self.budget.shared.get() {
            Some(shared) => {
                self.budget
                    .settle_shared(
                        shared,
                        &self.holds,
                        &self.model,
                        usage,
                        self.ledger_id.take(),
                    )
                    .await;
            }
            None => self.budget.settle(&self.holds, &self.model, usage),
        }
    }

    /// [`Reservation::settle`] in this process's memory.
    #[cfg(test)]
    pub(crate) fn settle_here(mut self, usage: Option<Tokens>) {
        self.settled = true;
        let usage = usage.unwrap_or_else(|| self.unreported());
        self.budget.settle(&self.holds, &self.model, usage);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        // Cut off mid-call: the request was sent, and is billed.
        let usage = self.unreported();
        if self.budget.shared.get().is_some()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            // Settled in the ledger in the background: a drop cannot wait.
            let budget = self.budget.clone();
            let (holds, model) = (
                std::mem::take(&mut self.holds),
                std::mem::take(&mut self.model),
            );
            let id = self.ledger_id.take();
            handle.spawn(async move {
                if let Some(shared) = budget.shared.get() {
                    budget
                        .settle_shared(shared, &holds, &model, usage, id)
                        .await;
                }
            });
            return;
        }
        self.budget.settle(&self.holds, &self.model, usage);
    }
}

#[cfg(test)]
mod tests;

/// The router asks the budget, from memory, whether an arm's pools can take
/// a run's estimate and how scarce they are.
impl crate::router::Pools for Budget {
    fn affordable(
        &self,
        model: &str,
        user: &str,
        thread: &str,
        estimate: &crate::router::Estimate,
    ) -> bool {
        let payer = Payer {
            user_key: user,
            thread_key: thread,
        };
        let estimate = Estimate {
            input_tokens: estimate.input_tokens,
            output_tokens: estimate.output_tokens,
        };
        Budget::affordable(self, model, payer, estimate).is_ok()
    }

    fn scarcity(&self, model: &str, user: &str, thread: &str) -> f64 {
        Budget::scarcity(
            self,
            model,
            Payer {
                user_key: user,
                thread_key: thread,
            },
        )
    }
}
