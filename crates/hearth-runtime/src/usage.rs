//! Usage reports with estimated cost, and the daily spend alert.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hearth_llm::prices::{PriceTable, Tokens};
use hearth_store::{UsageGroup, UsageQuery, UsageRow};

/// One group of model calls with its estimated cost.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageReport {
    /// Provider, `<provider>/<model>` or `YYYY-MM-DD`.
    pub key: String,
    /// Calls, failed ones included.
    pub calls: u64,
    /// Prompt tokens, cached included.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cached prompt tokens.
    pub cached_tokens: u64,
    /// USD; `None` when a model in the group has no price, or no call
    /// reported usage.
    pub cost_usd: Option<f64>,
    /// Calls whose provider reported no usage.
    pub untracked_calls: u64,
}

/// Prices one usage row: the sum over its models, unknown if any is unpriced.
pub fn report(row: &UsageRow, prices: &PriceTable) -> UsageReport {
    let tracked = row.by_model.iter().filter(|m| m.calls > m.untracked_calls);
    let mut cost = Some(0.0);
    let mut any = false;
    for m in tracked {
        any = true;
        let t = Tokens {
            input: m.input_tokens,
            output: m.output_tokens,
            cached: m.cached_tokens,
            cache_write: m.cache_write_tokens,
            reasoning: m.reasoning_tokens,
        };
        cost = match (cost, prices.cost(&m.model, t)) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    UsageReport {
        key: row.key.clone(),
        calls: row.calls,
        input_tokens: row.input_tokens,
        output_tokens: row.output_tokens,
        cached_tokens: row.cached_tokens,
        cost_usd: if any { cost } else { None },
        untracked_calls: row.untracked_calls,
    }
}

/// Prices each model of one usage row on its own, keyed by the model.
pub fn by_model(row: &UsageRow, prices: &PriceTable) -> Vec<UsageReport> {
    row.by_model
        .iter()
        .map(|m| {
            let one = UsageRow {
                key: m.model.clone(),
                calls: m.calls,
                input_tokens: m.input_tokens,
                output_tokens: m.output_tokens,
                cached_tokens: m.cached_tokens,
                untracked_calls: m.untracked_calls,
                by_model: vec![m.clone()],
            };
            report(&one, prices)
        })
        .collect()
}

/// The query for "today so far" (UTC).
pub fn today(now_ms: i64) -> UsageQuery {
    let day_ms = 86_400_000;
    UsageQuery {
        since: Some(now_ms - now_ms.rem_euclid(day_ms)),
        until: None,
        group_by: UsageGroup::Day,
    }
}

/// State of the daily spend alert: checks at most every `CHECK_EVERY`, fires
/// once per UTC day.
#[derive(Debug, Default)]
pub struct SpendAlert {
    state: Mutex<AlertState>,
}

#[derive(Debug, Default)]
struct AlertState {
    last_check: Option<Instant>,
    alerted_day: Option<i64>,
}

/// How often today's spend is re-read from the store.
const CHECK_EVERY: Duration = Duration::from_secs(30);

impl SpendAlert {
    /// True when a check is due now (and marks it done).
    pub fn due(&self) -> bool {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.last_check.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
            return false;
        }
        s.last_check = Some(Instant::now());
        true
    }

    /// True the first time on `day` that `spent` reaches `threshold`.
    pub fn crossed(&self, day: i64, spent: f64, threshold: f64) -> bool {
        let mut s = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if spent < threshold || s.alerted_day == Some(day) {
            return false;
        }
        s.alerted_day = Some(day);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hearth_store::ModelUsage;

    fn row(models: Vec<ModelUsage>) -> UsageRow {
        UsageRow {
            key: "k".into(),
            calls: models.iter().map(|m| m.calls).sum(),
            input_tokens: 0,
            output_tokens: 0,
            cached_tokens: 0,
            untracked_calls: models.iter().map(|m| m.untracked_calls).sum(),
            by_model: models,
        }
    }

    #[test]
    fn cost_is_null_when_any_model_is_unpriced_or_nothing_was_tracked() {
        let prices = PriceTable::default();
        let priced = ModelUsage {
            model: "a/gpt-4.1-mini".into(),
            calls: 1,
            input_tokens: 1_000_000,
            ..Default::default()
        };
        let unpriced = ModelUsage {
            model: "l/llama".into(),
            calls: 1,
            input_tokens: 5,
            ..Default::default()
        };
        let untracked = ModelUsage {
            model: "l/llama".into(),
            calls: 2,
            untracked_calls: 2,
            ..Default::default()
        };
        assert_eq!(
            report(&row(vec![priced.clone()]), &prices).cost_usd,
            Some(0.40)
        );
        assert_eq!(
            report(&row(vec![priced.clone(), unpriced]), &prices).cost_usd,
            None
        );
        assert_eq!(
            report(&row(vec![priced, untracked.clone()]), &prices).cost_usd,
            Some(0.40)
        );
        assert_eq!(report(&row(vec![untracked]), &prices).cost_usd, None);
    }

    #[test]
    fn alert_fires_once_per_day() {
        let a = SpendAlert::default();
        assert!(a.due());
        assert!(!a.due(), "throttled");
        assert!(!a.crossed(1, 4.0, 5.0));
        assert!(a.crossed(1, 5.5, 5.0));
        assert!(!a.crossed(1, 9.0, 5.0));
        assert!(a.crossed(2, 5.0, 5.0));
        assert_eq!(today(86_400_000 * 3 + 5).since, Some(86_400_000 * 3));
    }
}
