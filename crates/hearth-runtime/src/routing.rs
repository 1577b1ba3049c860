//! Routing runs: the router's arms built from config and catalog, the
//! choice for a run whose thread names no model, the `route` step in its
//! journal, and what its end (or a rating) teaches the router.
//!
//! Learning is kept honest by three rules: only routed runs teach (a pinned
//! model is the user's choice, not evidence), incognito runs teach nothing,
//! and a run's observations commit in the transaction that ends it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use hearth_agent::router::{
    Arm, ArmPrice, Decision, Estimate, Posterior, RouteError, RouteRequest, Router, RouterSettings,
    Strategy, TaskClass,
};
use hearth_agent::{ModelCall, Outcome};
use hearth_config::{RouterConfig, RouterStrategy};
use hearth_core::{ModelRef, ThinkingLevel, now_ms};
use hearth_llm::{Provider, ToolSupport};
use hearth_store::{ArmStats, Rating, RunFeedback, StepKind, StepRecord, StepStatus};
use serde_json::json;
use tracing::{debug, warn};

use crate::catalog::Catalog;
use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;

/// Output tokens a run is assumed to produce when estimating its cost:
/// the most a call may produce.
const OUTPUT_ESTIMATE: u64 = 4096;
/// Characters per token in estimates from text.
const CHARS_PER_TOKEN: u64 = 4;

/// The router of a runtime and the observations of runs not yet committed.
#[derive(Default)]
pub(crate) struct Routing {
    /// Per run: what its end teaches, added to the counts by `finish`.
    pending: Mutex<HashMap<String, Vec<ArmStats>>>,
    /// The message and user of runs ingested here and not routed yet, so
    /// routing them reads nothing back (a recovered run is read instead).
    inputs: Mutex<HashMap<String, (String, String)>>,
}

impl Routing {
    fn input(&self, run_id: &str) -> Option<(String, String)> {
        self.inputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id)
    }

    fn take(&self, run_id: &str) -> Vec<ArmStats> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id)
            .unwrap_or_default()
    }
}

/// A run's route: the router's decision and its candidates resolved, best
/// first (the choice, then the failover order).
pub(crate) struct Routed {
    pub(crate) decision: Decision,
    pub(crate) resolved: Vec<(ModelRef, Arc<dyn Provider>)>,
}

/// `GET /v1/router`.
#[derive(Debug, Clone, PartialEq)]
pub struct RouterReport {
    /// `fixed`, `cheapest` or `learn`.
    pub strategy: &'static str,
    /// Every arm on every task class it takes.
    pub arms: Vec<Posterior>,
}

/// The router for `config` over the catalog's models. Arms are the
/// `[[router.arms]]` entries, or else every model a provider lists (and the
/// default model), `echo` only when listed. With `budget`, arms whose pools
/// cannot afford a run are left out and scarce pools make their arms dearer.
pub fn build_router(
    config: &RouterConfig,
    catalog: &Catalog,
    budget: Option<Arc<hearth_agent::budget::Budget>>,
) -> Result<Router> {
    let mut arms: Vec<Arm> = Vec::new();
    if config.arms.is_empty() {
        let mut models: Vec<String> = Vec::new();
        for (name, entry) in catalog.providers() {
            if entry.kind == hearth_config::ProviderType::Echo {
                continue;
            }
            models.extend(entry.models.iter().map(|m| format!("{name}/{m}")));
        }
        let default = catalog.default_model();
        let default_is_echo = catalog
            .providers()
            .get(&default.provider)
            .is_none_or(|e| e.kind == hearth_config::ProviderType::Echo);
        if !default_is_echo && !models.contains(&default.to_string()) {
            models.push(default.to_string());
        }
        for m in models {
            let (model, _) = catalog.resolve(&m)?;
            arms.push(arm(catalog, &model, &[], false, None));
        }
    } else {
        for a in &config.arms {
            let (model, _) = catalog.resolve(&a.model).map_err(|e| {
                RuntimeError::UnknownModel(format!("[[router.arms]] model {:?}: {e}", a.model))
            })?;
            let tasks: Vec<TaskClass> =
                a.tasks.iter().filter_map(|t| TaskClass::parse(t)).collect();
            arms.push(arm(
                catalog,
                &model,
                &tasks,
                a.prefer_local,
                a.quality.as_ref(),
            ));
        }
    }
    let settings = RouterSettings {
        strategy: match config.strategy {
            RouterStrategy::Fixed => Strategy::Fixed,
            RouterStrategy::Cheapest => Strategy::Cheapest,
            RouterStrategy::Learn => Strategy::Learn,
        },
        seed: config.seed,
        cost_weight: config.cost_weight,
        scarcity_weight: config.scarcity_weight,
    };
    let pools: Arc<dyn hearth_agent::router::Pools> = match budget {
        Some(budget) => budget,
        None => Arc::new(hearth_agent::router::NoPools),
    };
    Ok(Router::new(settings, arms, pools))
}

fn arm(
    catalog: &Catalog,
    model: &ModelRef,
    tasks: &[TaskClass],
    prefer_local: bool,
    quality: Option<&hearth_config::Quality>,
) -> Arm {
    let caps = catalog.capabilities(model);
    let name = model.to_string();
    let mut priors = [None; 7];
    if let Some(q) = quality {
        for t in TaskClass::ALL {
            priors[t.index()] = q.for_task(t.as_str());
        }
    }
    Arm {
        tools: caps.tools != ToolSupport::No,
        thinking: caps.thinking,
        local: catalog.is_local(model),
        // Not in the capability catalog yet: no arm is left out for its
        // context until it is.
        context_window: None,
        price: catalog.prices.price(&name).map(|p| ArmPrice {
            input: p.input,
            output: p.output,
        }),
        tasks: tasks.to_vec(),
        prefer_local,
        quality: priors,
        model: name,
    }
}

impl Runtime {
    /// Routes runs whose thread names no model with `router` (unless its
    /// strategy is `fixed`), after loading what earlier runs taught it.
    /// Set once, before `start`; a second call is refused.
    pub async fn enable_router(&self, router: Router) -> Result<()> {
        if self.inner.live().router.is_some() {
            return Err(RuntimeError::InvalidInput(
                "the router is already set".into(),
            ));
        }
        self.install_router(router).await
    }

    /// Loads what earlier runs taught into `router` and puts it in force
    /// for the next runs (at start, and when a reload rebuilt it).
    pub(crate) async fn load_router(&self, router: &Router) -> Result<()> {
        for s in self.inner.store.arm_stats().await? {
            router.observe(&s.model, &s.task, s.successes, s.failures, s.runs);
        }
        Ok(())
    }

    async fn install_router(&self, router: Router) -> Result<()> {
        self.load_router(&router).await?;
        let router = Arc::new(router);
        self.inner.live.update(|live| live.router = Some(router));
        Ok(())
    }

    /// The router's strategy and posteriors.
    pub fn router_report(&self) -> RouterReport {
        match self.inner.live().router.clone() {
            Some(r) => RouterReport {
                strategy: r.strategy().as_str(),
                arms: r.posteriors(),
            },
            None => RouterReport {
                strategy: Strategy::Fixed.as_str(),
                arms: Vec::new(),
            },
        }
    }

    /// Rates a run's answer: one observation on the arm that answered it
    /// and its task class. Returns whether the router learnt from it (not
    /// for a run whose model was pinned, nor for an incognito run).
    pub async fn rate_run(&self, run_id: &str, rating: Rating) -> Result<bool> {
        self.run_record(run_id).await?;
        let store = self.store_of_run(run_id);
        if !Arc::ptr_eq(&store, &self.inner.store) {
            return Ok(false);
        }
        let steps = store.steps(run_id).await?;
        let Some(route) = steps.iter().find(|s| s.kind == StepKind::Route) else {
            return Ok(false);
        };
        let Some(task) = route.payload["detail"]["task"].as_str() else {
            return Ok(false);
        };
        let answered = steps
            .iter()
            .rev()
            .find(|s| s.kind == StepKind::Llm && s.status == StepStatus::Succeeded)
            .map(|s| s.name.as_str())
            .filter(|m| {
                self.inner
                    .live()
                    .router
                    .clone()
                    .is_some_and(|r| r.is_arm(m))
            });
        let changes = self
            .inner
            .store
            .rate_run(RunFeedback {
                run_id: run_id.to_owned(),
                model: answered.unwrap_or(&route.name).to_owned(),
                task: task.to_owned(),
                rating,
                at: now_ms(),
            })
            .await?;
        if let Some(router) = self.inner.live().router.clone() {
            for c in &changes {
                router.observe(&c.model, &c.task, c.successes, c.failures, c.runs);
            }
        }
        Ok(true)
    }

    /// Whether `live` routes runs (a router whose strategy is not `fixed`):
    /// then a run's model is chosen from its message when it starts.
    pub(crate) fn routes_runs(live: &crate::live::Live) -> bool {
        live.router
            .as_ref()
            .is_some_and(|router| router.strategy() != Strategy::Fixed)
    }

    /// The route of a run whose thread names no model, when a router that
    /// chooses is set. `Ok(None)`: the run takes the default model.
    pub(crate) async fn route_run(
        &self,
        live: &crate::live::Live,
        run_id: &str,
        thread_key: &str,
        thinking: ThinkingLevel,
    ) -> std::result::Result<Option<Routed>, RouteFailure> {
        let Some(router) = live.router.clone() else {
            return Ok(None);
        };
        if router.strategy() == Strategy::Fixed {
            return Ok(None);
        }
        let (text, user_key) = match self.inner.routing.input(run_id) {
            Some(known) => known,
            None => match self.store_of_run(run_id).get_run(run_id).await? {
                Some(run) => (run.input, run.user_key),
                // A run that is gone is not claimed either: nothing to route.
                None => return Ok(None),
            },
        };
        let incognito = self.inner.incognito.store_of_run(run_id).is_some();
        let tools = live.engine.tools();
        let req = RouteRequest {
            text: &text,
            user: &user_key,
            thread: thread_key,
            needs_tools: tools
                .for_channel(hearth_tools::channel_of(thread_key))
                .next()
                .is_some(),
            needs_thinking: thinking != ThinkingLevel::Off,
            local_only: incognito && live.incognito_local_only,
            estimate: Estimate {
                input_tokens: text.len() as u64 / CHARS_PER_TOKEN + 1,
                output_tokens: OUTPUT_ESTIMATE,
            },
        };
        let decision = router.route(&req)?;
        let mut resolved = Vec::with_capacity(decision.candidates.len());
        for c in &decision.candidates {
            match live.catalog.resolve(&c.model) {
                Ok(pair) => resolved.push(pair),
                // Arms were resolved when the router was built.
                Err(e) => warn!(model = %c.model, error = %e, "a router arm no longer resolves"),
            }
        }
        debug!(run_id, task = %decision.task, chosen = decision.chosen(), "routed a run");
        Ok(Some(Routed { decision, resolved }))
    }

    /// Works out what a routed run's end teaches (from the model calls the
    /// engine reports, those before a resume included) and keeps it for
    /// `finish` to commit with the end.
    pub(crate) fn learn_from(
        &self,
        run_id: &str,
        decision: &Decision,
        outcome: &Outcome,
        calls: &[ModelCall],
    ) {
        if self.inner.incognito.store_of_run(run_id).is_some() {
            return;
        }
        let observed = observations(decision, outcome, calls);
        if !observed.is_empty() {
            self.inner
                .routing
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(run_id.to_owned(), observed);
        }
    }

    /// Keeps the message and user of the run `run_id` being stored, for its
    /// routing (only when runs are routed).
    pub(crate) fn remember_route_input(&self, run_id: &str, input: &str, user_key: &str) {
        let routes = self
            .inner
            .live()
            .router
            .as_ref()
            .is_some_and(|r| r.strategy() != Strategy::Fixed);
        if routes {
            self.inner
                .routing
                .inputs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(run_id.to_owned(), (input.to_owned(), user_key.to_owned()));
        }
    }

    /// Forgets what routing kept for a run that ends without being routed.
    pub(crate) fn forget_route_input(&self, run_id: &str) {
        self.inner.routing.input(run_id);
    }

    /// The observations waiting for this run's end (taken once).
    pub(crate) fn take_observations(&self, run_id: &str) -> Vec<ArmStats> {
        self.inner.routing.take(run_id)
    }

    /// Adds committed observations to the router's memory.
    pub(crate) fn observed(&self, committed: &[ArmStats]) {
        if let Some(router) = self.inner.live().router.clone() {
            for c in committed {
                router.observe(&c.model, &c.task, c.successes, c.failures, c.runs);
            }
        }
    }
}

/// What a routed run's model calls say of its candidates: an arm that
/// answered scores the run's outcome (success, or failure when the run
/// failed anyway, e.g. at a limit; nothing when cancelled); an arm whose
/// calls all failed (and was failed over from) scores a failure. The
/// chosen arm counts one routed run.
fn observations(decision: &Decision, outcome: &Outcome, calls: &[ModelCall]) -> Vec<ArmStats> {
    let task = decision.task.as_str();
    // model -> (answered, failed)
    let mut seen: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for c in calls {
        let e = seen.entry(c.model.as_str()).or_default();
        if c.answered {
            e.0 = true;
        } else {
            e.1 = true;
        }
    }
    let mut out: Vec<ArmStats> = Vec::new();
    for c in &decision.candidates {
        let (answered, failed) = seen.get(c.model.as_str()).copied().unwrap_or_default();
        let (successes, failures) = match (answered, failed, outcome) {
            (true, _, Outcome::Succeeded(_)) => (1, 0),
            (true, _, Outcome::Failed(_)) | (false, true, _) => (0, 1),
            (true, _, Outcome::Cancelled) | (false, false, _) => (0, 0),
        };
        let runs = i64::from(c.model == decision.chosen());
        if successes + failures + runs > 0 {
            out.push(ArmStats {
                model: c.model.clone(),
                task: task.to_owned(),
                successes,
                failures,
                runs,
            });
        }
    }
    out
}

/// A routed run's `route` step (index 0; the engine starts its own steps
/// after it). It is written with the run's end, in the same commit: it is
/// for the trace, and a commit of its own cost every routed run a write. A
/// run that resumes after a crash is routed again and records that choice.
pub(crate) fn route_step(run_id: &str, d: &Decision, at: hearth_core::Timestamp) -> StepRecord {
    StepRecord {
        run_id: run_id.to_owned(),
        index: 0,
        kind: StepKind::Route,
        name: d.chosen().to_owned(),
        status: StepStatus::Succeeded,
        started_at: at,
        finished_at: Some(at),
        tokens: None,
        payload: json!({ "detail": d.detail() }),
    }
}

/// Why a run could not be routed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RouteFailure {
    /// The run could not be read.
    #[error("could not read the run to route it: {0}")]
    Store(#[from] hearth_store::StoreError),
    /// No arm could take it.
    #[error(transparent)]
    Route(#[from] RouteError),
}

impl RouteFailure {
    /// The run's error code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::Store(_) => "store_error",
            Self::Route(RouteError::OverBudget { .. }) => "budget_exceeded",
            Self::Route(RouteError::NoArm { .. }) => "no_route",
        }
    }
}

#[cfg(test)]
mod tests {
    use hearth_agent::router::Scored;
    use hearth_core::RunError;

    use super::*;

    fn decision() -> Decision {
        Decision {
            task: TaskClass::Code,
            candidates: vec![
                Scored {
                    model: "p/a".into(),
                    score: 0.9,
                },
                Scored {
                    model: "p/b".into(),
                    score: 0.5,
                },
            ],
            reason: String::new(),
        }
    }

    fn call(model: &str, answered: bool) -> ModelCall {
        ModelCall {
            model: model.into(),
            answered,
        }
    }

    fn stats(model: &str, s: i64, f: i64, runs: i64) -> ArmStats {
        ArmStats {
            model: model.into(),
            task: "code".into(),
            successes: s,
            failures: f,
            runs,
        }
    }

    #[test]
    fn a_failover_fails_the_arm_that_failed_and_credits_the_one_that_answered() {
        let calls = [call("p/a", false), call("p/a", false), call("p/b", true)];
        let got = observations(&decision(), &Outcome::Succeeded("x".into()), &calls);
        assert_eq!(got, [stats("p/a", 0, 1, 1), stats("p/b", 1, 0, 0)]);
    }

    #[test]
    fn a_retry_that_answers_is_a_success_and_a_failed_run_fails_its_arm() {
        let calls = [call("p/a", false), call("p/a", true)];
        let ok = observations(&decision(), &Outcome::Succeeded("x".into()), &calls);
        assert_eq!(ok, [stats("p/a", 1, 0, 1)]);
        let failed = Outcome::Failed(RunError {
            code: "limit_exceeded".into(),
            message: String::new(),
        });
        let got = observations(&decision(), &failed, &calls[1..]);
        assert_eq!(got, [stats("p/a", 0, 1, 1)]);
        let got = observations(&decision(), &Outcome::Cancelled, &calls[1..]);
        assert_eq!(got, [stats("p/a", 0, 0, 1)], "a cancel only counts the run");
    }
}
