//! The router: which model a run goes to when neither the run nor its
//! thread names one.
//!
//! A run is classified (`classify`), the arms that can take it are kept
//! (capabilities, incognito, budget `Pools`), and one is chosen: the
//! cheapest, or (`learn`) by Thompson sampling on a Beta posterior per
//! (arm, task class), less its cost and its pools' scarcity. What runs
//! teach it arrives through `observe`; the counts are stored by the caller
//! (with the run's end), this type only keeps them in memory for choosing.
//! It never calls a model and never touches the store.

mod classify;
mod pools;
mod sample;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

pub use self::classify::{TaskClass, classify};
pub use self::pools::{Estimate, NoPools, Pools};
pub use self::sample::Rng;

/// A quality prior is worth this many observations.
const PRIOR_WEIGHT: f64 = 4.0;
/// Score bonus of a `prefer_local` arm that is local: enough to win a near
/// tie, too small to keep a failing arm.
const PREFER_LOCAL_BONUS: f64 = 0.05;

/// How the router chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// No choice: the default model (the router is not consulted).
    Fixed,
    /// The lowest estimated cost.
    Cheapest,
    /// Thompson sampling, weighed against cost and scarcity.
    Learn,
}

impl Strategy {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Cheapest => "cheapest",
            Self::Learn => "learn",
        }
    }
}

/// Prices of an arm, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmPrice {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
}

/// One model the router may choose, with what it can do.
#[derive(Debug, Clone, PartialEq)]
pub struct Arm {
    /// `<provider>/<model>`.
    pub model: String,
    /// Takes tool definitions (always or depending on the model).
    pub tools: bool,
    /// Takes a reasoning level.
    pub thinking: bool,
    /// Requests stay on this machine or a private network (and cost nothing).
    pub local: bool,
    /// Tokens of context, when known.
    pub context_window: Option<u64>,
    /// Its price, when known; a remote arm without one counts as the
    /// dearest candidate.
    pub price: Option<ArmPrice>,
    /// Task classes it takes; empty takes every class.
    pub tasks: Vec<TaskClass>,
    /// Wins near ties when local.
    pub prefer_local: bool,
    /// Prior success rate per task class (by [`TaskClass::index`]).
    pub quality: [Option<f64>; 7],
}

/// The router's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterSettings {
    /// How it chooses.
    pub strategy: Strategy,
    /// Seed of its draws; `None` seeds from the operating system.
    pub seed: Option<u64>,
    /// Weight of the (normalised) cost against sampled quality.
    pub cost_weight: f64,
    /// Weight of pool scarcity against sampled quality.
    pub scarcity_weight: f64,
}

/// What the router needs to know of a run.
#[derive(Debug, Clone, Copy)]
pub struct RouteRequest<'a> {
    /// The user's message.
    pub text: &'a str,
    /// Who sent it (budget scope).
    pub user: &'a str,
    /// Its thread (budget scope).
    pub thread: &'a str,
    /// Tools will be offered: arms without tools are left out.
    pub needs_tools: bool,
    /// A reasoning level is asked: arms without thinking are left out.
    pub needs_thinking: bool,
    /// Only local arms (an incognito thread with `incognito_local_only`).
    pub local_only: bool,
    /// What the run is expected to use.
    pub estimate: Estimate,
}

/// A candidate and its score.
#[derive(Debug, Clone, PartialEq)]
pub struct Scored {
    /// `<provider>/<model>`.
    pub model: String,
    /// Higher is better; the strategy says what it measures.
    pub score: f64,
}

/// The router's choice for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The run's class.
    pub task: TaskClass,
    /// Candidates, best first: the first is the choice, the rest are the
    /// run's failover order.
    pub candidates: Vec<Scored>,
    /// Why, in a sentence.
    pub reason: String,
}

impl Decision {
    /// The chosen model.
    pub fn chosen(&self) -> &str {
        self.candidates.first().map_or("", |c| c.model.as_str())
    }

    /// The trace's `detail` of a `route` step.
    pub fn detail(&self) -> Value {
        json!({
            "task": self.task.as_str(),
            "candidates": self.candidates.iter()
                .map(|c| json!({ "model": c.model, "score": c.score }))
                .collect::<Vec<_>>(),
            "chosen": self.chosen(),
            "reason": self.reason,
        })
    }
}

/// Why no arm could take a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RouteError {
    /// No arm has what the run needs.
    #[error(
        "no router arm can take this {task} run: {why}; add an arm that can to [[router.arms]], \
         or set the thread's model with `hearth model set <provider>/<model>`"
    )]
    NoArm {
        /// The run's class.
        task: TaskClass,
        /// What each arm lacked.
        why: String,
    },
    /// Arms could take it, but their budget pools cannot.
    #[error(
        "every router arm that could take this {task} run is over its budget ({models}); \
         see `hearth budget` for the pools and when they reset"
    )]
    OverBudget {
        /// The run's class.
        task: TaskClass,
        /// The arms left out for money.
        models: String,
    },
}

/// A posterior as `GET /v1/router` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Posterior {
    /// `<provider>/<model>`.
    pub model: String,
    /// Task class.
    pub task: TaskClass,
    /// Beta alpha: 1 + prior successes + successes.
    pub alpha: f64,
    /// Beta beta: 1 + prior failures + failures.
    pub beta: f64,
    /// Routed runs that chose it.
    pub runs: u64,
}

/// Observed counts of one (arm, task).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    successes: u64,
    failures: u64,
    runs: u64,
}

struct State {
    /// Per arm (same order as `arms`), per task class.
    counts: Vec<[Counts; 7]>,
    rng: Rng,
}

/// The router. Cheap to share (`Arc`); choosing takes one short lock.
pub struct Router {
    settings: RouterSettings,
    arms: Vec<Arm>,
    by_model: HashMap<String, usize>,
    pools: Arc<dyn Pools>,
    state: Mutex<State>,
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("settings", &self.settings)
            .field("arms", &self.arms.len())
            .finish_non_exhaustive()
    }
}

/// Why an arm was left out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Excluded {
    Tools,
    Thinking,
    NotLocal,
    Context,
    Budget,
}

impl Excluded {
    fn as_str(self) -> &'static str {
        match self {
            Self::Tools => "no tools",
            Self::Thinking => "no thinking",
            Self::NotLocal => "not local",
            Self::Context => "context too small",
            Self::Budget => "over budget",
        }
    }
}

impl Router {
    /// A router over `arms` with no observations yet.
    pub fn new(settings: RouterSettings, arms: Vec<Arm>, pools: Arc<dyn Pools>) -> Self {
        let rng = settings.seed.map_or_else(Rng::from_entropy, Rng::seeded);
        let by_model = arms
            .iter()
            .enumerate()
            .map(|(i, a)| (a.model.clone(), i))
            .collect();
        Self {
            state: Mutex::new(State {
                counts: vec![[Counts::default(); 7]; arms.len()],
                rng,
            }),
            settings,
            arms,
            by_model,
            pools,
        }
    }

    /// Uses `pools` for budgets from now on.
    pub fn with_pools(mut self, pools: Arc<dyn Pools>) -> Self {
        self.pools = pools;
        self
    }

    /// How it chooses.
    pub fn strategy(&self) -> Strategy {
        self.settings.strategy
    }

    /// The arms, in configured order.
    pub fn arms(&self) -> &[Arm] {
        &self.arms
    }

    /// True when `model` is one of the arms.
    pub fn is_arm(&self, model: &str) -> bool {
        self.by_model.contains_key(model)
    }

    /// Adds observed counts (or their change; negative values take back).
    /// Models that are not arms and unknown classes are ignored: their
    /// counts stay stored for when the arm is configured again.
    pub fn observe(&self, model: &str, task: &str, successes: i64, failures: i64, runs: i64) {
        let (Some(&i), Some(task)) = (self.by_model.get(model), TaskClass::parse(task)) else {
            return;
        };
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let c = &mut state.counts[i][task.index()];
        c.successes = c.successes.saturating_add_signed(successes);
        c.failures = c.failures.saturating_add_signed(failures);
        c.runs = c.runs.saturating_add_signed(runs);
    }

    /// The posterior of every arm on every class it takes.
    pub fn posteriors(&self) -> Vec<Posterior> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out = Vec::new();
        for (i, arm) in self.arms.iter().enumerate() {
            for task in TaskClass::ALL {
                if !arm.tasks.is_empty() && !arm.tasks.contains(&task) {
                    continue;
                }
                let c = state.counts[i][task.index()];
                let (alpha, beta) = posterior(arm, task, c);
                out.push(Posterior {
                    model: arm.model.clone(),
                    task,
                    alpha,
                    beta,
                    runs: c.runs,
                });
            }
        }
        out
    }

    /// Classifies the run and chooses its arm.
    pub fn route(&self, req: &RouteRequest<'_>) -> Result<Decision, RouteError> {
        let task = classify(req.text);
        self.route_task(task, req)
    }

    /// Chooses an arm for a run of class `task`.
    pub fn route_task(
        &self,
        task: TaskClass,
        req: &RouteRequest<'_>,
    ) -> Result<Decision, RouteError> {
        let takes = |a: &Arm| a.tasks.is_empty() || a.tasks.contains(&task);
        // An arm list that names no arm for this class still has to answer.
        let any_takes = self.arms.iter().any(takes);
        let mut excluded: Vec<(usize, Excluded)> = Vec::new();
        let mut able: Vec<usize> = Vec::with_capacity(self.arms.len());
        for (i, arm) in self.arms.iter().enumerate() {
            if any_takes && !takes(arm) {
                continue;
            }
            let why = if req.needs_tools && !arm.tools {
                Some(Excluded::Tools)
            } else if req.needs_thinking && !arm.thinking {
                Some(Excluded::Thinking)
            } else if req.local_only && !arm.local {
                Some(Excluded::NotLocal)
            } else if arm
                .context_window
                .is_some_and(|w| w < req.estimate.input_tokens + req.estimate.output_tokens)
            {
                Some(Excluded::Context)
            } else if !self
                .pools
                .affordable(&arm.model, req.user, req.thread, &req.estimate)
            {
                Some(Excluded::Budget)
            } else {
                None
            };
            match why {
                Some(w) => excluded.push((i, w)),
                None => able.push(i),
            }
        }
        if able.is_empty() {
            let list = |pred: &dyn Fn(Excluded) -> bool| {
                excluded
                    .iter()
                    .filter(|(_, w)| pred(*w))
                    .map(|(i, w)| format!("{} ({})", self.arms[*i].model, w.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !excluded.is_empty() && excluded.iter().all(|(_, w)| *w == Excluded::Budget) {
                return Err(RouteError::OverBudget {
                    task,
                    models: list(&|_| true),
                });
            }
            let why = if excluded.is_empty() {
                "no arm is configured".to_owned()
            } else {
                list(&|_| true)
            };
            return Err(RouteError::NoArm { task, why });
        }
        let costs: Vec<f64> = able
            .iter()
            .map(|&i| cost(&self.arms[i], &req.estimate))
            .collect();
        let dearest_known = costs
            .iter()
            .copied()
            .filter(|c| !c.is_nan())
            .fold(0.0, f64::max);
        let costs: Vec<f64> = costs
            .iter()
            .map(|c| if c.is_nan() { dearest_known } else { *c })
            .collect();
        let dearest = costs.iter().copied().fold(0.0, f64::max);
        // (arm, score, tie-break): equal scores go to a preferred local arm,
        // then to the arm listed first.
        let mut scored: Vec<(usize, f64, f64)> = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            able.iter()
                .zip(&costs)
                .map(|(&i, &cost)| {
                    let arm = &self.arms[i];
                    let bonus = if arm.prefer_local && arm.local {
                        PREFER_LOCAL_BONUS
                    } else {
                        0.0
                    };
                    let score = match self.settings.strategy {
                        Strategy::Cheapest | Strategy::Fixed => -cost,
                        Strategy::Learn => {
                            let (a, b) = posterior(arm, task, state.counts[i][task.index()]);
                            let theta = state.rng.beta(a, b);
                            let relative = if dearest > 0.0 { cost / dearest } else { 0.0 };
                            let scarcity = self
                                .pools
                                .scarcity(&arm.model, req.user, req.thread)
                                .clamp(0.0, 1.0);
                            theta
                                - self.settings.cost_weight * relative
                                - self.settings.scarcity_weight * scarcity
                                + bonus
                        }
                    };
                    (i, score, bonus)
                })
                .collect()
        };
        scored.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then(b.2.total_cmp(&a.2))
                .then(a.0.cmp(&b.0))
        });
        let n = scored.len();
        let mut reason = match (n, self.settings.strategy) {
            (1, _) => "the only arm that can take this run".to_owned(),
            (_, Strategy::Learn) => format!(
                "highest sampled success rate less cost and budget scarcity of {n} candidates"
            ),
            (_, Strategy::Cheapest | Strategy::Fixed) => {
                format!("lowest estimated cost of {n} candidates")
            }
        };
        if !any_takes {
            reason.push_str("; no arm lists this task class, so every arm was considered");
        }
        if !excluded.is_empty() {
            reason.push_str("; left out: ");
            for (k, (i, w)) in excluded.iter().enumerate() {
                let sep = if k == 0 { "" } else { ", " };
                let _ = write!(reason, "{sep}{} ({})", self.arms[*i].model, w.as_str());
            }
        }
        Ok(Decision {
            task,
            candidates: scored
                .into_iter()
                .map(|(i, score, _)| Scored {
                    model: self.arms[i].model.clone(),
                    score: round(score),
                })
                .collect(),
            reason,
        })
    }
}

/// Beta parameters of an arm on a class: a flat prior, moved by the
/// configured quality (worth [`PRIOR_WEIGHT`] observations), plus counts.
fn posterior(arm: &Arm, task: TaskClass, c: Counts) -> (f64, f64) {
    let (pa, pb) = arm.quality[task.index()]
        .map_or((0.0, 0.0), |q| (PRIOR_WEIGHT * q, PRIOR_WEIGHT * (1.0 - q)));
    (1.0 + pa + c.successes as f64, 1.0 + pb + c.failures as f64)
}

/// The estimated cost of the run on an arm in USD; NaN when unknown.
fn cost(arm: &Arm, e: &Estimate) -> f64 {
    if arm.local {
        return 0.0;
    }
    arm.price.map_or(f64::NAN, |p| {
        (e.input_tokens as f64 * p.input + e.output_tokens as f64 * p.output) / 1e6
    })
}

/// Scores shown in traces: six decimals are plenty and keep JSON short.
fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

#[cfg(test)]
mod tests;
