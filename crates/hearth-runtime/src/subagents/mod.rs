//! Sub-agents: a run's `delegate` call starts a child run in the thread
//! `<parent thread>/sub/<s>.<k>` (`s` the parent run's number, `k` the k-th
//! child it started), with the task as its only history, its own model, the
//! parent's user, roles, scope and permission mode, and read-class tools only.
//!
//! The runs themselves record the family: a child's `parent_run_id` names
//! its parent (indexed, so a parent lists its children with one probe), and
//! its idempotency key the parent's call ([`hearth_core::delegate_key`]). So
//! a parent resumed after a crash finds the child its call started instead
//! of starting a second one, with no table of its own.

mod tools;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_agent::subagents::{Family, MARKER};
use hearth_core::{ChildRun, delegate_key};
use hearth_store::{RunRecord, StepKind, StepRecord, Store};
use serde_json::json;

pub(crate) use tools::SubagentTools;

use crate::error::Result;
use crate::runtime::Runtime;

/// Per running run: the lock that numbers its children one at a time (the
/// model may ask for several in one turn, and they run concurrently), and
/// the limits it shares with its family.
#[derive(Default)]
pub(crate) struct Families(Mutex<HashMap<String, Member>>);

/// One running run of a family.
#[derive(Default, Clone)]
struct Member {
    numbering: Arc<tokio::sync::Mutex<()>>,
    family: Option<Arc<Family>>,
}

impl Families {
    fn lock_of(&self, parent_run_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(parent_run_id.to_owned())
            .or_default()
            .numbering
            .clone()
    }

    /// The limits `run` shares: its parent's family when the parent runs
    /// here, else a family it starts (an ordinary run, or a sub-agent
    /// recovered where its parent no longer runs).
    pub(crate) fn join(&self, run: &RunRecord, max_wall: Duration) -> Arc<Family> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let inherited = run
            .parent_run_id
            .as_deref()
            .and_then(|p| map.get(p))
            .and_then(|m| m.family.clone());
        let family = inherited.unwrap_or_else(|| Arc::new(Family::new(max_wall)));
        map.entry(run.run_id.clone()).or_default().family = Some(family.clone());
        family
    }

    /// The limits `run_id` shares, while it runs here.
    fn family_of(&self, run_id: &str) -> Option<Arc<Family>> {
        let map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.get(run_id).and_then(|m| m.family.clone())
    }

    /// Forgets a run that ended: its children are numbered already.
    pub(crate) fn forget(&self, run_id: &str) {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        map.remove(run_id);
    }
}

/// Who asks `run`'s confirmations when it is a sub-agent: `sub-agent 2 of
/// run <parent> (model <m>)`, shown in its parent's conversation.
pub(crate) fn asker(run: &RunRecord, model: &str) -> Option<String> {
    let parent = run.parent_run_id.as_deref()?;
    let nth = hearth_agent::subagents::ordinal(&run.thread_key)
        .map_or_else(|| "a sub-agent".to_owned(), |k| format!("sub-agent {k}"));
    Some(format!("{nth} of run {parent} (model {model})"))
}

/// The thread of the `k`-th child of `parent`.
fn child_thread(parent: &RunRecord, k: u32) -> String {
    format!("{}{MARKER}{}.{k}", parent.thread_key, parent.seq)
}

/// The children a parent run started, oldest first.
async fn children_of(store: &Arc<dyn Store>, parent: &RunRecord) -> Result<Vec<RunRecord>> {
    Ok(store.child_runs(&parent.run_id).await?)
}

/// A child run as its parent's envelope lists it.
fn child_run(c: RunRecord) -> ChildRun {
    ChildRun {
        run_id: c.run_id,
        thread_key: c.thread_key,
        model: c.model,
        status: c.status,
    }
}

/// Whether `run` is a child `parent_run_id` started.
fn is_child_of(run: &RunRecord, parent_run_id: &str) -> bool {
    run.source == hearth_core::DELEGATE_SOURCE
        && run.parent_run_id.as_deref() == Some(parent_run_id)
}

impl Runtime {
    /// The store that holds the runs of `thread_key`'s children: memory for
    /// an incognito thread (its children are incognito too).
    async fn family_store(&self, parent: &RunRecord) -> Result<Arc<dyn Store>> {
        if self.inner.incognito.is_thread(&parent.thread_key) {
            return self.inner.incognito.store().await;
        }
        Ok(self.inner.store.clone())
    }

    /// A sub-agent recovered after a restart has lost the tools and steps
    /// its parent chose for it with the rest of what was kept in memory: they are read
    /// again from the parent's journaled `delegate` call.
    pub(crate) async fn with_delegated_tools(
        &self,
        run: &RunRecord,
        mut overrides: crate::supplied::RunOverrides,
    ) -> crate::supplied::RunOverrides {
        if run.source != hearth_core::DELEGATE_SOURCE
            || overrides.tools.is_some()
            || overrides.max_steps.is_some()
        {
            return overrides;
        }
        let Some(parent) = run.parent_run_id.as_deref() else {
            return overrides;
        };
        // The call is named by the key the child was stored with.
        let Some(call_id) = run
            .idempotency_key
            .as_deref()
            .and_then(|k| k.strip_prefix(&format!("delegate:{parent}:")))
        else {
            return overrides;
        };
        let steps = match self.store_of_run(parent).steps(parent).await {
            Ok(steps) => steps,
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, error = %e, "could not read the parent of a recovered sub-agent; it keeps every read-class tool its user may use");
                return overrides;
            }
        };
        let args = steps
            .iter()
            .filter(|s| s.kind == StepKind::Llm)
            .filter_map(|s| {
                serde_json::from_value::<hearth_core::Message>(s.payload["message"].clone()).ok()
            })
            .flat_map(|m| m.content)
            .find_map(|c| match c {
                hearth_core::Content::ToolCall { id, arguments, .. } if id == call_id => {
                    serde_json::from_str::<serde_json::Value>(&arguments).ok()
                }
                _ => None,
            });
        if let Some(args) = args {
            overrides.tools = tools::tools_arg(&args).ok().flatten();
            overrides.max_steps = tools::max_steps_arg(&args).ok().flatten();
        }
        overrides
    }

    /// The sub-agents `run` started, for its envelope.
    pub(crate) async fn child_runs(&self, run: &RunRecord) -> Result<Vec<ChildRun>> {
        // Only a run that called `delegate` has any: most runs never did.
        let store = self.family_store(run).await?;
        let children = children_of(&store, run).await?;
        Ok(children.into_iter().map(child_run).collect())
    }

    /// A stored run and the sub-agents it started, in one read of the
    /// store (where it can): `None` when its family is not all on disk (an
    /// incognito run, or one of a thread that is incognito now, whose
    /// children are in memory), and the caller reads them apart.
    pub(crate) async fn stored_run_with_children(
        &self,
        run_id: &str,
    ) -> Result<Option<(RunRecord, Vec<ChildRun>)>> {
        if self.inner.incognito.store_of_run(run_id).is_some() {
            return Ok(None);
        }
        let Some((run, children)) = self.inner.store.run_with_children(run_id).await? else {
            return Err(crate::error::RuntimeError::RunNotFound(run_id.to_owned()));
        };
        if self.inner.incognito.is_thread(&run.thread_key) {
            return Ok(None);
        }
        Ok(Some((run, children.into_iter().map(child_run).collect())))
    }

    /// Cancels the unfinished children of a cancelled run (and theirs).
    pub(crate) async fn cancel_children(&self, parent: &RunRecord) {
        let Ok(store) = self.family_store(parent).await else {
            return;
        };
        let children = match children_of(&store, parent).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(run_id = %parent.run_id, error = %e, "could not list the children of a cancelled run");
                return;
            }
        };
        for child in children.iter().filter(|c| !c.status.is_terminal()) {
            if let Err(e) = Box::pin(self.cancel(&child.run_id)).await {
                tracing::warn!(run_id = %child.run_id, error = %e, "could not cancel a sub-agent");
            }
        }
    }

    /// A parent's trace: each `delegate` step gets the child it started as
    /// its detail (`child_run_id`, `model`, `status`, `steps`, `cost_usd`).
    pub(crate) async fn with_child_details(&self, steps: &mut [StepRecord]) {
        for step in steps
            .iter_mut()
            .filter(|s| s.kind == StepKind::Tool && s.name == tools::DELEGATE)
        {
            let handle = step
                .payload
                .get("output")
                .and_then(|o| o.as_str())
                .and_then(|o| serde_json::from_str::<serde_json::Value>(o).ok())
                .and_then(|o| o.get("handle").and_then(|h| h.as_str().map(str::to_owned)));
            let Some(child_id) = handle else {
                continue;
            };
            let store = self.store_of_run(&child_id);
            let (Ok(Some(child)), Ok(child_steps)) =
                (store.get_run(&child_id).await, store.steps(&child_id).await)
            else {
                continue;
            };
            let detail = json!({
                "child_run_id": child.run_id,
                "model": child.model,
                "status": child.status.as_str(),
                "steps": child_steps.len(),
                "cost_usd": self.cost_of(&child_steps),
            });
            step.payload["detail"] = detail;
        }
    }

    /// What a run's model calls cost at the configured prices; `None` when
    /// a model it called has no price.
    fn cost_of(&self, steps: &[StepRecord]) -> Option<f64> {
        let live = self.inner.live();
        let mut total = 0.0;
        for s in steps.iter().filter(|s| s.kind.is_model_call()) {
            let Some(usage) = s
                .tokens
                .clone()
                .and_then(|t| serde_json::from_value::<hearth_core::Usage>(t).ok())
            else {
                continue;
            };
            let tokens = hearth_llm::prices::Tokens {
                input: usage.input_tokens.unwrap_or(0),
                output: usage.output_tokens.unwrap_or(0),
                cached: usage.cached_tokens.unwrap_or(0),
                cache_write: usage.cache_write_tokens.unwrap_or(0),
                reasoning: usage.reasoning_tokens.unwrap_or(0),
            };
            total += live.catalog.prices.cost(&s.name, tokens)?;
        }
        Some(total)
    }
}

/// The key and thread of a new or existing child.
pub(crate) struct Slot {
    /// The child's idempotency key.
    key: String,
    /// Its thread.
    thread: String,
    /// The child this call started before (a resumed parent), if any.
    existing: Option<RunRecord>,
    /// The parent's children before this one.
    siblings: Vec<RunRecord>,
}

/// Finds the child `call_id` of `parent` started, or the thread the next
/// child takes.
async fn slot(store: &Arc<dyn Store>, parent: &RunRecord, call_id: &str) -> Result<Slot> {
    let key = delegate_key(&parent.run_id, call_id);
    let siblings = children_of(store, parent).await?;
    let existing = siblings
        .iter()
        .find(|c| c.idempotency_key.as_deref() == Some(key.as_str()))
        .cloned();
    let thread = match &existing {
        Some(c) => c.thread_key.clone(),
        None => child_thread(
            parent,
            u32::try_from(siblings.len() + 1).unwrap_or(u32::MAX),
        ),
    };
    Ok(Slot {
        key,
        thread,
        existing,
        siblings,
    })
}
