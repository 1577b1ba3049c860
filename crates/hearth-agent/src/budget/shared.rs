//! Pools shared by replicas: reservations and use in the store's budget
//! ledger (PostgreSQL), so every replica checks a call against what all of
//! them hold and used.
//!
//! Each reservation and settlement is one transaction in the ledger under
//! the pool's row lock; two replicas racing for a pool can pass its limit
//! only by what real use exceeds estimates, as threads of one process can.
//! A hold counts while its replica heartbeats, so a dead replica's holds
//! stop counting when its lease runs out. Thresholds are decided in the
//! ledger, so each is announced once across replicas (by the replica whose
//! settlement passed it). When the ledger cannot be reached a call is
//! checked against this replica's mirror of it, with a warning, rather
//! than refused.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_core::{Timestamp, now_ms};
use hearth_llm::prices::Tokens;
use hearth_store::budget::{
    LedgerCharge, LedgerHold, LedgerUse, ROLLING_BUCKET_MS, Reserved, Settled,
};
use hearth_store::{BudgetLedger, StoreError};

use super::{
    Budget, Estimate, Key, PastCall, Payer, PoolStatus, Refusal, Reservation, Scope, Threshold,
    Window, pool_rows, subject_of,
};

/// The ledger, who this replica is in it, and its reservations in flight.
pub(super) struct Shared {
    ledger: Arc<dyn BudgetLedger>,
    /// This replica's id (its holds' holder).
    holder: String,
    /// How long another replica's holds count after its last heartbeat.
    lease_ms: i64,
    /// Ids of this replica's reservations not yet settled.
    live: Mutex<HashSet<String>>,
}

impl Shared {
    fn alive_since(&self, now: Timestamp) -> Timestamp {
        now - self.lease_ms
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Use in `window` counts from buckets at or after this, at `now`.
fn since(window: Window, now: Timestamp) -> Timestamp {
    match window {
        // A minute bucket counts until the whole minute is 24 h old.
        Window::Rolling24h => now - Window::ROLLING_MS - ROLLING_BUCKET_MS + 1,
        Window::Hour | Window::Day | Window::Month => window.start(now),
    }
}

/// The bucket a use at `at` goes in.
fn bucket(window: Window, at: Timestamp) -> Timestamp {
    match window {
        Window::Rolling24h => at - at.rem_euclid(ROLLING_BUCKET_MS),
        Window::Hour | Window::Day | Window::Month => window.start(at),
    }
}

/// The window thresholds are announced once in.
fn announce_key(window: Window, now: Timestamp) -> Timestamp {
    match window {
        Window::Rolling24h => 0,
        Window::Hour | Window::Day | Window::Month => window.start(now),
    }
}

impl Budget {
    /// Keeps reservations and use in `ledger`, shared with the other
    /// replicas, as `holder`; another replica's holds count for `lease`
    /// after its last heartbeat. Once per budget: a second call is ignored.
    pub fn share(&self, ledger: Arc<dyn BudgetLedger>, holder: String, lease: Duration) {
        let _ = self.shared.set(Shared {
            ledger,
            holder,
            lease_ms: i64::try_from(lease.as_millis()).unwrap_or(i64::MAX),
            live: Mutex::new(HashSet::new()),
        });
    }

    /// True when reservations go to a shared ledger.
    pub fn is_shared(&self) -> bool {
        self.shared.get().is_some()
    }

    /// The pools `model` draws from for `payer`, each with what `estimate`
    /// needs there.
    fn wanted(&self, model: &str, payer: Payer<'_>, estimate: Estimate) -> Vec<(Key, f64)> {
        self.pools
            .iter()
            .enumerate()
            .filter(|(_, pool)| self.draws(pool, model))
            .filter_map(|(i, pool)| {
                let subject = subject_of(pool.scope, payer)?;
                Some((
                    (i, subject.to_owned()),
                    self.estimated(pool.kind, model, estimate),
                ))
            })
            .collect()
    }

    /// [`Budget::reserve`] in the ledger.
    pub(super) async fn reserve_shared(
        self: &Arc<Self>,
        shared: &Shared,
        model: &str,
        payer: Payer<'_>,
        estimate: Estimate,
    ) -> Result<Reservation, Refusal> {
        let now = now_ms();
        let wanted = self.wanted(model, payer, estimate);
        let holds: Vec<LedgerHold> = wanted
            .iter()
            .filter_map(|((i, subject), amount)| {
                let pool = self.pools.get(*i)?;
                Some(LedgerHold {
                    pool: pool.name.clone(),
                    subject: subject.clone(),
                    since: since(pool.window, now),
                    limit: pool.limit,
                    amount: *amount,
                })
            })
            .collect();
        let reserved = shared
            .ledger
            .reserve(&holds, &shared.holder, now, shared.alive_since(now))
            .await;
        match reserved {
            Ok(Reserved::Held { id, pools }) => {
                self.mirror(wanted.iter().map(|(k, _)| k).zip(&pools), now);
                shared.live().insert(id.clone());
                Ok(Reservation {
                    budget: self.clone(),
                    model: model.to_owned(),
                    holds: wanted,
                    prompt_tokens: estimate.input_tokens,
                    streamed_bytes: AtomicU64::new(0),
                    settled: false,
                    ledger_id: Some(id),
                })
            }
            Ok(Reserved::Refused { index, state }) => {
                let refused = wanted
                    .get(index)
                    .and_then(|(key, need)| Some((key, *need, self.pools.get(key.0)?)));
                let Some((key, need, pool)) = refused else {
                    // The ledger named a pool that was not asked for.
                    return self.reserve_here(model, payer, estimate);
                };
                self.mirror(std::iter::once((key, &state)), now);
                Err(Refusal {
                    pool: pool.name.clone(),
                    kind: pool.kind,
                    subject: (pool.scope != Scope::Global).then(|| key.1.clone()),
                    model: model.to_owned(),
                    used: state.used,
                    reserved: state.reserved,
                    estimate: need,
                    limit: pool.limit,
                    resets_at: pool.window.end(now),
                })
            }
            Err(e) => {
                tracing::warn!(error = %e, model,
                    "budget ledger unreachable: checking the call against this replica's view of the pools");
                self.reserve_here(model, payer, estimate)
            }
        }
    }

    /// Releases a reservation in the ledger and counts what the call used;
    /// announces the thresholds the ledger says it passed.
    pub(super) async fn settle_shared(
        &self,
        shared: &Shared,
        holds: &[(Key, f64)],
        model: &str,
        usage: Tokens,
        ledger_id: Option<String>,
    ) {
        let now = now_ms();
        let charges: Vec<LedgerCharge> = holds
            .iter()
            .filter_map(|((i, subject), _)| {
                let pool = self.pools.get(*i)?;
                Some(LedgerCharge {
                    pool: pool.name.clone(),
                    subject: subject.clone(),
                    since: since(pool.window, now),
                    bucket: bucket(pool.window, now),
                    amount: self.actual(pool.kind, model, usage),
                    limit: pool.limit,
                    announce_key: announce_key(pool.window, now),
                })
            })
            .collect();
        let id = ledger_id.unwrap_or_default();
        // Forgotten either way: a hold whose settlement failed is tidied away.
        shared.live().remove(&id);
        let settled = shared
            .ledger
            .settle(&id, &charges, &shared.holder, shared.alive_since(now))
            .await;
        let settled: Vec<Settled> = match settled {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, model,
                    "budget ledger unreachable: a call's use is counted in this replica only");
                self.settle(holds, model, usage);
                return;
            }
        };
        self.mirror(
            holds
                .iter()
                .map(|(k, _)| k)
                .zip(settled.iter().map(|s| &s.state)),
            now,
        );
        for ((key, _), s) in holds.iter().zip(&settled) {
            let Some(pool) = self.pools.get(key.0) else {
                continue;
            };
            for &percent in &s.crossed {
                let t = Threshold {
                    pool: pool.name.clone(),
                    kind: pool.kind,
                    subject: (pool.scope != Scope::Global).then(|| key.1.clone()),
                    percent,
                    used: s.state.used,
                    limit: pool.limit,
                    resets_at: pool.window.end(now),
                    at: now,
                };
                tracing::warn!(pool = %t.pool, percent = t.percent, used = t.used, limit = t.limit, "budget pool threshold crossed");
                // Nobody listening is fine: the event is for alerts when configured.
                let _ = self.events.send(t);
            }
        }
    }

    /// Takes the ledger's state of these pools as this replica's view.
    fn mirror<'a>(&self, states: impl Iterator<Item = (&'a Key, &'a LedgerUse)>, now: Timestamp) {
        let mut accounts = self.lock();
        for (key, state) in states {
            if let Some(pool) = self.pools.get(key.0) {
                accounts.entry(key.clone()).or_default().mirror(
                    pool.window,
                    now,
                    state.used,
                    state.reserved,
                );
            }
        }
        self.set_gauges(&accounts);
    }

    /// Every pool's state as [`Budget::status`] shows it: from the ledger
    /// (what every replica holds and used) when shared, else from memory.
    pub async fn current(&self) -> Vec<PoolStatus> {
        let Some(shared) = self.shared.get() else {
            return self.status();
        };
        let now = now_ms();
        let asked: Vec<(String, Timestamp)> = self
            .pools
            .iter()
            .map(|p| (p.name.clone(), since(p.window, now)))
            .collect();
        let rows = match shared
            .ledger
            .status(&asked, &shared.holder, shared.alive_since(now))
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!(error = %e, "budget ledger unreachable: showing this replica's view of the pools");
                return self.status();
            }
        };
        let mut found: HashMap<Key, (LedgerUse, Option<Timestamp>)> = HashMap::new();
        for row in rows {
            if let Some(i) = self.pools.iter().position(|p| p.name == row.pool) {
                found.insert((i, row.subject), (row.state, row.oldest));
            }
        }
        self.mirror(found.iter().map(|(k, (s, _))| (k, s)), now);
        let mut out = Vec::new();
        for (i, pool) in self.pools.iter().enumerate() {
            let rows: Vec<PoolStatus> = found
                .iter()
                .filter(|((j, _), _)| *j == i)
                .map(|((_, subject), (state, oldest))| PoolStatus {
                    name: pool.name.clone(),
                    kind: pool.kind,
                    scope: pool.scope,
                    subject: (pool.scope != Scope::Global).then(|| subject.clone()),
                    limit: pool.limit,
                    used: state.used,
                    reserved: state.reserved,
                    resets_at: match pool.window {
                        Window::Rolling24h => {
                            oldest.map_or(now, |b| b + Window::ROLLING_MS + ROLLING_BUCKET_MS)
                        }
                        Window::Hour | Window::Day | Window::Month => pool.window.end(now),
                    },
                })
                .collect();
            out.extend(pool_rows(pool, rows, now));
        }
        out
    }

    /// Counts in the ledger the stored calls it has not counted (those of
    /// windows nobody used through it yet, e.g. after a copy from SQLite):
    /// each bucket that has no use gets the calls found in it. Nothing
    /// without a ledger.
    pub async fn seed_shared(&self, calls: &[PastCall]) -> Result<(), StoreError> {
        let Some(shared) = self.shared.get() else {
            return Ok(());
        };
        let now = now_ms();
        let mut sums: HashMap<(String, String, Timestamp), f64> = HashMap::new();
        for call in calls {
            for pool in &self.pools {
                if !self.draws(pool, &call.model) {
                    continue;
                }
                let subject = match pool.scope {
                    Scope::Global => Some(String::new()),
                    Scope::User => call.user_key.clone(),
                    Scope::Thread => call.thread_key.clone(),
                };
                let at = bucket(pool.window, call.at);
                let Some(subject) = subject.filter(|_| at >= since(pool.window, now)) else {
                    continue;
                };
                *sums.entry((pool.name.clone(), subject, at)).or_default() +=
                    self.actual(pool.kind, &call.model, call.tokens);
            }
        }
        let uses: Vec<(String, String, Timestamp, f64)> = sums
            .into_iter()
            .map(|((p, s, b), a)| (p, s, b, a))
            .collect();
        shared.ledger.seed(&uses).await
    }

    /// Removes holds that no longer count (dead replicas', and this
    /// replica's whose settlement failed) and use older than any window.
    /// How many holds went; nothing without a ledger.
    pub async fn tidy_shared(&self) -> Result<u64, StoreError> {
        let Some(shared) = self.shared.get() else {
            return Ok(0);
        };
        let now = now_ms();
        let live: Vec<String> = shared.live().iter().cloned().collect();
        // Only holds older than any call lasts: one just taken may not be in
        // `live` yet, and after a reload the budget replaced still has calls
        // in flight under the same holder (a run ends at its wall limit).
        let before = now - 3_600_000;
        // The longest window is a month.
        let forget_before = now - 40 * 86_400_000;
        shared
            .ledger
            .tidy(
                &shared.holder,
                &live,
                before,
                shared.alive_since(now),
                forget_before,
            )
            .await
    }
}
