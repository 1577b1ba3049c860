//! What the router asks of budgets: whether a model's pools can take a
//! run's estimate, and how close to their limits they are. The budget
//! module implements it; without budgets every arm is affordable.

/// What a run is expected to use, before it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// Input tokens (estimated from the text).
    pub input_tokens: u64,
    /// Output tokens (the most a call may produce).
    pub output_tokens: u64,
}

/// Budget pools as the router sees them. Called on every routed run, so
/// answers come from memory, not the store.
pub trait Pools: Send + Sync {
    /// True when every pool `model` draws from for this user and thread
    /// can take `estimate` on top of what is used and reserved.
    fn affordable(&self, model: &str, user: &str, thread: &str, estimate: &Estimate) -> bool;

    /// How close the model's tightest pool is to its limit: 0 (plenty
    /// left, or no pool) to 1 (exhausted).
    fn scarcity(&self, model: &str, user: &str, thread: &str) -> f64;
}

/// No budget pools: everything is affordable and nothing is scarce.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPools;

impl Pools for NoPools {
    fn affordable(&self, _: &str, _: &str, _: &str, _: &Estimate) -> bool {
        true
    }

    fn scarcity(&self, _: &str, _: &str, _: &str) -> f64 {
        0.0
    }
}
