//! `[router]`: which model a run without a model of its own goes to.
//!
//! `fixed` (the default) keeps today's behaviour: the thread's model, else
//! the default model. `cheapest` and `learn` choose among arms; the choice
//! itself is made in hearth-agent's router, this module only holds and
//! checks the settings.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The task classes runs are sorted into (hearth-agent's classifier keeps
/// the same list; a test there checks it).
pub const TASK_CLASSES: [&str; 7] = [
    "chat",
    "question",
    "code",
    "writing",
    "summarize",
    "tools",
    "reasoning",
];

/// How a run's model is chosen when neither the run nor its thread names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RouterStrategy {
    /// The default model, as before the router existed.
    #[default]
    Fixed,
    /// The arm with the lowest estimated cost for the run.
    Cheapest,
    /// Thompson sampling per (arm, task class), weighed against cost and
    /// budget scarcity.
    Learn,
}

impl RouterStrategy {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fixed => "fixed",
            Self::Cheapest => "cheapest",
            Self::Learn => "learn",
        }
    }
}

/// `[router]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// `fixed`, `cheapest` or `learn`.
    pub strategy: RouterStrategy,
    /// Seeds the router's sampling, so a test gets the same choices each
    /// time; without it every start draws a fresh seed.
    pub seed: Option<u64>,
    /// How much a run's estimated cost counts against an arm's sampled
    /// quality (0 = cost is ignored, 1 = the dearest candidate loses a
    /// whole point of quality).
    pub cost_weight: f64,
    /// How much a budget pool near its limit counts against its arms.
    pub scarcity_weight: f64,
    /// `[[router.arms]]`: the models to choose among. Without any, every
    /// model listed by a provider (and the default model) is an arm, except
    /// `echo`.
    pub arms: Vec<ArmConfig>,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            strategy: RouterStrategy::Fixed,
            seed: None,
            cost_weight: 0.1,
            scarcity_weight: 0.5,
            arms: Vec::new(),
        }
    }
}

/// `[[router.arms]]`: one model the router may choose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmConfig {
    /// `<provider>/<model>`.
    pub model: String,
    /// Task classes this arm takes; empty takes every class.
    #[serde(default)]
    pub tasks: Vec<String>,
    /// Prefer this arm when scores are close (a small bonus).
    #[serde(default)]
    pub prefer_local: bool,
    /// Prior belief in the arm's success rate (0 to 1), for every task or
    /// per task class (`quality = { code = 0.9, chat = 0.6 }`); worth a
    /// few observations, so evidence soon outweighs it.
    #[serde(default)]
    pub quality: Option<Quality>,
}

/// A prior success rate, for every task class or per class.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quality {
    /// The same for every class.
    All(f64),
    /// Per class; classes left out have no prior.
    PerTask(BTreeMap<String, f64>),
}

impl Quality {
    /// The prior success rate for `task`, if any.
    pub fn for_task(&self, task: &str) -> Option<f64> {
        match self {
            Self::All(q) => Some(*q),
            Self::PerTask(m) => m.get(task).copied(),
        }
    }
}

/// The first mistake in `[router]`, as `(key, message)`.
pub(crate) fn validate(config: &RouterConfig) -> Result<(), (String, String)> {
    for (key, w) in [
        ("router.cost_weight", config.cost_weight),
        ("router.scarcity_weight", config.scarcity_weight),
    ] {
        if !(0.0..=10.0).contains(&w) {
            return Err((key.into(), format!("is {w}; use a number from 0 to 10")));
        }
    }
    for (i, arm) in config.arms.iter().enumerate() {
        let key = format!("router.arms[{i}]");
        for task in &arm.tasks {
            if !TASK_CLASSES.contains(&task.as_str()) {
                return Err((
                    format!("{key}.tasks"),
                    format!(
                        "unknown task class {task:?}; known: {}",
                        TASK_CLASSES.join(", ")
                    ),
                ));
            }
        }
        let priors: Vec<(Option<&str>, f64)> = match &arm.quality {
            None => Vec::new(),
            Some(Quality::All(q)) => vec![(None, *q)],
            Some(Quality::PerTask(m)) => m.iter().map(|(t, q)| (Some(t.as_str()), *q)).collect(),
        };
        for (task, q) in priors {
            if let Some(task) = task
                && !TASK_CLASSES.contains(&task)
            {
                return Err((
                    format!("{key}.quality"),
                    format!(
                        "unknown task class {task:?}; known: {}",
                        TASK_CLASSES.join(", ")
                    ),
                ));
            }
            if !(0.0..=1.0).contains(&q) {
                return Err((
                    format!("{key}.quality"),
                    format!("is {q}; a prior success rate is from 0 to 1"),
                ));
            }
        }
        if config.arms[..i].iter().any(|a| a.model == arm.model) {
            return Err((
                format!("{key}.model"),
                format!("{:?} is listed twice; list each arm once", arm.model),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Config;

    fn load(toml: &str) -> Result<Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    #[test]
    fn defaults_to_fixed_without_arms() {
        let c = load("").unwrap();
        assert_eq!(c.router, RouterConfig::default());
        assert_eq!(c.router.strategy, RouterStrategy::Fixed);
    }

    #[test]
    fn arms_with_tasks_and_priors() {
        let c = load(
            "[router]\nstrategy = \"learn\"\nseed = 7\n\
             [[router.arms]]\nmodel = \"echo/a\"\ntasks = [\"code\"]\nquality = 0.9\n\
             [[router.arms]]\nmodel = \"echo/b\"\nprefer_local = true\nquality = { chat = 0.4 }\n",
        )
        .unwrap();
        assert_eq!(c.router.strategy, RouterStrategy::Learn);
        assert_eq!(c.router.seed, Some(7));
        assert_eq!(c.router.arms[0].tasks, vec!["code"]);
        assert_eq!(
            c.router.arms[0].quality.as_ref().unwrap().for_task("x"),
            Some(0.9)
        );
        let b = &c.router.arms[1];
        assert!(b.prefer_local);
        assert_eq!(b.quality.as_ref().unwrap().for_task("chat"), Some(0.4));
        assert_eq!(b.quality.as_ref().unwrap().for_task("code"), None);
    }

    #[test]
    fn mistakes_name_the_key() {
        for (toml, key, says) in [
            (
                "[[router.arms]]\nmodel = \"echo/a\"\ntasks = [\"poetry\"]\n",
                "router.arms[0].tasks",
                "poetry",
            ),
            (
                "[[router.arms]]\nmodel = \"echo/a\"\nquality = 1.5\n",
                "router.arms[0].quality",
                "0 to 1",
            ),
            (
                "[[router.arms]]\nmodel = \"echo/a\"\nquality = { poetry = 0.5 }\n",
                "router.arms[0].quality",
                "poetry",
            ),
            (
                "[[router.arms]]\nmodel = \"echo/a\"\n[[router.arms]]\nmodel = \"echo/a\"\n",
                "router.arms[1].model",
                "twice",
            ),
            (
                "[[router.arms]]\nmodel = \"nonsense\"\n",
                "router.arms[0].model",
                "<provider>/<model>",
            ),
            (
                "[router]\ncost_weight = -1\n",
                "router.cost_weight",
                "0 to 10",
            ),
            ("[router]\nstrategy = \"best\"\n", "router.strategy", "best"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
            assert!(err.contains(says), "{toml}: {err}");
        }
    }
}
