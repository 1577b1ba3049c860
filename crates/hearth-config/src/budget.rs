//! `[budget]`: limit pools that model calls draw from, and the daily
//! shortcuts that stand for the common ones.

use serde::{Deserialize, Serialize};

/// What a pool counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolKind {
    /// Estimated spend in US dollars (list prices).
    CostUsd,
    /// Prompt plus completion tokens.
    Tokens,
    /// Model calls.
    Requests,
}

/// When a pool's use starts again from zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PoolWindow {
    /// The UTC hour.
    #[serde(rename = "hour")]
    Hour,
    /// The UTC day, resetting at midnight UTC.
    #[serde(rename = "day")]
    Day,
    /// The UTC calendar month.
    #[serde(rename = "month")]
    Month,
    /// The last 24 hours, sliding.
    #[serde(rename = "24h")]
    Rolling24h,
}

/// Who shares one pool's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PoolScope {
    /// Everyone together.
    Global,
    /// Each user apart.
    User,
    /// Each thread apart.
    Thread,
}

/// `[[budget.pools]]`: one limit over a window, for the models matching `models`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawPool")]
pub struct PoolConfig {
    /// Unique name, shown in `GET /v1/budget` and in refusals.
    pub name: String,
    /// What is counted.
    pub kind: PoolKind,
    /// The most that may be used per window (and per subject when scoped).
    pub limit: f64,
    /// When use starts again from zero.
    pub window: PoolWindow,
    /// Who shares the limit.
    pub scope: PoolScope,
    /// Globs (`*`, `?`) over `<provider>/<model>`; every model by default.
    pub models: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPool {
    name: String,
    kind: PoolKind,
    limit: f64,
    #[serde(default = "default_window")]
    window: PoolWindow,
    #[serde(default = "default_scope")]
    scope: PoolScope,
    #[serde(default = "every_model")]
    models: Vec<String>,
}

fn default_window() -> PoolWindow {
    PoolWindow::Day
}

fn default_scope() -> PoolScope {
    PoolScope::Global
}

fn every_model() -> Vec<String> {
    vec!["*".into()]
}

impl TryFrom<RawPool> for PoolConfig {
    type Error = String;

    fn try_from(raw: RawPool) -> Result<Self, String> {
        if raw.name.is_empty()
            || raw.name.len() > 64
            || !raw
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        {
            return Err(format!(
                "pool name {:?} must be 1 to 64 characters of A-Z a-z 0-9 _ - .",
                raw.name
            ));
        }
        check_limit(&format!("pool {:?}: `limit`", raw.name), raw.limit)?;
        if raw.models.is_empty() {
            return Err(format!(
                "pool {:?}: `models` is empty, so no call would draw from it; use [\"*\"] for every model",
                raw.name
            ));
        }
        for glob in &raw.models {
            validate_model_glob(glob).map_err(|e| format!("pool {:?}: {e}", raw.name))?;
        }
        Ok(Self {
            name: raw.name,
            kind: raw.kind,
            limit: raw.limit,
            window: raw.window,
            scope: raw.scope,
            models: raw.models,
        })
    }
}

fn check_limit(what: &str, limit: f64) -> Result<(), String> {
    if !limit.is_finite() || limit <= 0.0 {
        return Err(format!(
            "{what} is {limit}; it must be a number above 0 (to stop all calls, remove the models instead)"
        ));
    }
    Ok(())
}

/// Checks a model glob: `<provider>/<model>` characters (no spaces or
/// control characters) with the wildcards `*` and `?`.
pub fn validate_model_glob(glob: &str) -> Result<(), String> {
    if glob.is_empty() {
        return Err("empty model glob; use \"*\" for every model".into());
    }
    if let Some(c) = glob.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "model glob {glob:?} contains {c:?}; write it as <provider>/<model> with * and ? as wildcards, e.g. \"openai/*\""
        ));
    }
    Ok(())
}

/// `[budget]`: pools, and shortcuts for daily spend limits in USD.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Each user's spend per UTC day (pool `per_user_daily_usd`).
    #[serde(deserialize_with = "positive")]
    pub per_user_daily_usd: Option<f64>,
    /// Each thread's spend per UTC day (pool `per_thread_daily_usd`).
    #[serde(deserialize_with = "positive")]
    pub per_thread_daily_usd: Option<f64>,
    /// Everyone's spend per UTC day (pool `global_daily_usd`).
    #[serde(deserialize_with = "positive")]
    pub global_daily_usd: Option<f64>,
    /// `[[budget.pools]]`.
    pub pools: Vec<PoolConfig>,
}

fn positive<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<f64>::deserialize(d)?;
    if let Some(limit) = v {
        check_limit("the limit", limit).map_err(serde::de::Error::custom)?;
    }
    Ok(v)
}

impl BudgetConfig {
    /// Every pool: the configured ones, then one per shortcut that is set
    /// (named after its key, over every model, daily, in USD).
    pub fn all_pools(&self) -> Vec<PoolConfig> {
        let shortcut = |name: &str, limit: Option<f64>, scope| {
            limit.map(|limit| PoolConfig {
                name: name.into(),
                kind: PoolKind::CostUsd,
                limit,
                window: PoolWindow::Day,
                scope,
                models: every_model(),
            })
        };
        let mut pools = self.pools.clone();
        pools.extend(
            [
                shortcut(
                    "per_user_daily_usd",
                    self.per_user_daily_usd,
                    PoolScope::User,
                ),
                shortcut(
                    "per_thread_daily_usd",
                    self.per_thread_daily_usd,
                    PoolScope::Thread,
                ),
                shortcut("global_daily_usd", self.global_daily_usd, PoolScope::Global),
            ]
            .into_iter()
            .flatten(),
        );
        pools
    }

    /// The first repeated pool name (a shortcut's included), if any.
    pub fn duplicate_name(&self) -> Option<String> {
        let pools = self.all_pools();
        let mut seen = std::collections::HashSet::new();
        pools
            .into_iter()
            .map(|p| p.name)
            .find(|n| !seen.insert(n.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str) -> Result<crate::Config, crate::ConfigError> {
        crate::load_str(toml, "f.toml", Vec::new())
    }

    #[test]
    fn pools_and_shortcuts() {
        let c = load(
            "[budget]\nper_user_daily_usd = 1.5\nglobal_daily_usd = 20\n\
             [[budget.pools]]\nname = \"cloud\"\nkind = \"tokens\"\nlimit = 100000\n\
             window = \"24h\"\nscope = \"thread\"\nmodels = [\"openai/*\", \"claude/*\"]\n\
             [[budget.pools]]\nname = \"calls\"\nkind = \"requests\"\nlimit = 10\n",
        )
        .unwrap();
        let pools = c.budget.all_pools();
        let names: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["cloud", "calls", "per_user_daily_usd", "global_daily_usd"]
        );
        assert_eq!(pools[0].window, PoolWindow::Rolling24h);
        assert_eq!(pools[0].scope, PoolScope::Thread);
        assert_eq!(pools[0].models, ["openai/*", "claude/*"]);
        assert_eq!(
            (pools[1].window, pools[1].scope, pools[1].models.clone()),
            (PoolWindow::Day, PoolScope::Global, vec!["*".to_owned()])
        );
        assert_eq!(
            (pools[2].kind, pools[2].scope, pools[2].limit),
            (PoolKind::CostUsd, PoolScope::User, 1.5)
        );
    }

    #[test]
    fn bad_pools_are_errors_that_name_the_key() {
        for (toml, says) in [
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"cost_usd\"\nlimit = 0\n",
                "above 0",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"cost_usd\"\nlimit = -1\n",
                "above 0",
            ),
            (
                "[[budget.pools]]\nname = \"a b\"\nkind = \"tokens\"\nlimit = 1\n",
                "pool name",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"euros\"\nlimit = 1\n",
                "euros",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"tokens\"\nlimit = 1\nwindow = \"week\"\n",
                "week",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"tokens\"\nlimit = 1\nmodels = [\"open ai/*\"]\n",
                "model glob",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"tokens\"\nlimit = 1\nmodels = []\n",
                "empty",
            ),
            (
                "[[budget.pools]]\nname = \"a\"\nkind = \"tokens\"\nlimt = 1\n",
                "limt",
            ),
            ("[budget]\nglobal_daily_usd = 0\n", "above 0"),
        ] {
            let err = load(toml).unwrap_err().to_string();
            assert!(err.contains("budget"), "{toml}: {err}");
            assert!(err.contains(says), "{toml}: {says}: {err}");
        }
        let err = load(
            "[budget]\nglobal_daily_usd = 3\n[[budget.pools]]\nname = \"global_daily_usd\"\n\
             kind = \"tokens\"\nlimit = 1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("budget.pools") && err.contains("twice"),
            "{err}"
        );
    }
}
