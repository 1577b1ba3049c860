//! The price table: list prices per million tokens, and cost estimates.
//!
//! Built-in entries are list prices gathered in 2026-11 from the providers'
//! published pricing (standard tier, prompts up to 200K tokens); only prices
//! that independent sources agreed on are shipped. They change: every entry
//! can be overridden, and others added, in `[llm.prices."<model>"]`. A model
//! with no price gets cost `null` ("not priced"), never a guess.

use std::collections::BTreeMap;

/// Prices in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Price {
    /// Uncached prompt tokens.
    pub input: f64,
    /// Completion tokens.
    pub output: f64,
    /// Cached prompt tokens (cache hits); the input price when `None`.
    pub cached: Option<f64>,
    /// Prompt tokens written to the cache; the input price when `None`.
    pub cache_write: Option<f64>,
    /// Reasoning tokens are reported apart from output and billed at the
    /// output price (Gemini); otherwise they are part of the output count.
    pub reasoning_apart: bool,
}

const fn p(input: f64, output: f64, cached: f64, cache_write: Option<f64>, apart: bool) -> Price {
    Price {
        input,
        output,
        cached: Some(cached),
        cache_write,
        reasoning_apart: apart,
    }
}

/// Built-in list prices by model-name prefix (a dated variant such as
/// `claude-sonnet-4-5-20250929` matches `claude-sonnet-4-5`).
const BUILTIN: &[(&str, Price)] = &[
    ("claude-sonnet-4-6", p(3.00, 15.00, 0.30, Some(3.75), false)),
    ("claude-sonnet-4-5", p(3.00, 15.00, 0.30, Some(3.75), false)),
    ("claude-sonnet-4", p(3.00, 15.00, 0.30, Some(3.75), false)),
    ("claude-haiku-4-5", p(1.00, 5.00, 0.10, Some(1.25), false)),
    ("gpt-5-mini", p(0.25, 2.00, 0.025, None, false)),
    ("gpt-5-nano", p(0.05, 0.40, 0.005, None, false)),
    ("gpt-5", p(1.25, 10.00, 0.125, None, false)),
    ("gpt-4.1-mini", p(0.40, 1.60, 0.10, None, false)),
    ("gpt-4.1-nano", p(0.10, 0.40, 0.025, None, false)),
    ("gpt-4.1", p(2.00, 8.00, 0.50, None, false)),
    ("gpt-4o-mini", p(0.15, 0.60, 0.075, None, false)),
    ("gemini-2.5-flash-lite", p(0.10, 0.40, 0.025, None, true)),
    ("gemini-2.5-flash", p(0.30, 2.50, 0.075, None, true)),
    ("gemini-2.5-pro", p(1.25, 10.00, 0.31, None, true)),
];

/// Token counts of one or more calls to one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens {
    /// Prompt tokens, cached included.
    pub input: u64,
    /// Completion tokens.
    pub output: u64,
    /// Cached prompt tokens.
    pub cached: u64,
    /// Prompt tokens written to the cache.
    pub cache_write: u64,
    /// Reasoning tokens as reported.
    pub reasoning: u64,
}

/// Built-in prices plus configured overrides.
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    /// Overrides by `<provider>/<model>` or `<model>`.
    overrides: BTreeMap<String, Price>,
}

impl PriceTable {
    /// The built-in table with `overrides` (keys `<provider>/<model>` or `<model>`).
    pub fn new(overrides: BTreeMap<String, Price>) -> Self {
        Self { overrides }
    }

    /// The price of `<provider>/<model>`: a configured `<provider>/<model>`,
    /// then a configured `<model>`, then the longest built-in prefix.
    pub fn price(&self, model_ref: &str) -> Option<Price> {
        let model = model_ref.split_once('/').map_or(model_ref, |(_, m)| m);
        if let Some(p) = self
            .overrides
            .get(model_ref)
            .or_else(|| self.overrides.get(model))
        {
            return Some(*p);
        }
        BUILTIN
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, p)| *p)
    }

    /// The highest input and the highest output price among every known
    /// model (built-in and configured): what a model with no price is
    /// assumed to cost where a limit must hold.
    pub fn most_expensive(&self) -> Price {
        let all = BUILTIN
            .iter()
            .map(|(_, p)| p)
            .chain(self.overrides.values());
        let mut top = p(0.0, 0.0, 0.0, None, false);
        for price in all {
            top.input = top.input.max(price.input);
            top.output = top.output.max(price.output);
        }
        top.cached = Some(top.input);
        top
    }

    /// Estimated cost in USD, or `None` when the model has no price.
    pub fn cost(&self, model_ref: &str, t: Tokens) -> Option<f64> {
        let p = self.price(model_ref)?;
        let uncached = t
            .input
            .saturating_sub(t.cached)
            .saturating_sub(t.cache_write);
        let output = t.output + if p.reasoning_apart { t.reasoning } else { 0 };
        let per = |n: u64, price: f64| n as f64 * price / 1_000_000.0;
        Some(
            per(uncached, p.input)
                + per(t.cached, p.cached.unwrap_or(p.input))
                + per(t.cache_write, p.cache_write.unwrap_or(p.input))
                + per(output, p.output),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn prices_by_longest_prefix_and_overrides_win() {
        let t = PriceTable::default();
        assert_eq!(
            t.price("anthropic/claude-sonnet-4-5-20250929")
                .unwrap()
                .input,
            3.00
        );
        assert_eq!(t.price("x/gpt-5-mini").unwrap().input, 0.25, "not gpt-5");
        assert!(t.price("local/llama3.2").is_none());
        let mut o = BTreeMap::new();
        o.insert("llama3.2".to_owned(), p(0.0, 0.0, 0.0, None, false));
        o.insert("work/gpt-5".to_owned(), p(1.0, 2.0, 0.5, None, false));
        let t = PriceTable::new(o);
        assert_eq!(t.price("local/llama3.2").unwrap().output, 0.0);
        assert_eq!(t.price("work/gpt-5").unwrap().input, 1.0);
        assert_eq!(t.price("other/gpt-5").unwrap().input, 1.25);
    }

    #[test]
    fn cost_splits_cached_and_written_tokens() {
        let t = PriceTable::default();
        // 2374 prompt tokens: 1024 cache hits, 150 cache writes, 1200 uncached.
        let c = t
            .cost(
                "a/claude-sonnet-4-5",
                Tokens {
                    input: 2374,
                    output: 40,
                    cached: 1024,
                    cache_write: 150,
                    reasoning: 0,
                },
            )
            .unwrap();
        let want = (1200.0 * 3.0 + 1024.0 * 0.30 + 150.0 * 3.75 + 40.0 * 15.0) / 1e6;
        assert!(close(c, want), "{c} vs {want}");
        assert_eq!(t.cost("x/unknown", Tokens::default()), None);
    }

    #[test]
    fn most_expensive_takes_the_top_input_and_output() {
        let top = PriceTable::default().most_expensive();
        assert_eq!((top.input, top.output), (3.00, 15.00));
        let mut o = BTreeMap::new();
        o.insert("big".to_owned(), p(20.0, 1.0, 0.0, None, false));
        let top = PriceTable::new(o).most_expensive();
        assert_eq!((top.input, top.output), (20.0, 15.00));
    }

    #[test]
    fn gemini_thoughts_are_billed_as_output() {
        let t = PriceTable::default();
        let c = t
            .cost(
                "g/gemini-2.5-flash",
                Tokens {
                    input: 1000,
                    output: 100,
                    reasoning: 900,
                    ..Tokens::default()
                },
            )
            .unwrap();
        assert!(close(c, (1000.0 * 0.30 + 1000.0 * 2.50) / 1e6), "{c}");
    }
}
