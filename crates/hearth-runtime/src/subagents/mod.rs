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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hearth_agent::subagents::{Family, MARKER, Spent};
use hearth_core::{ChildRun, delegate_key};
use hearth_store::{RunRecord, StepKind, StepRecord, Store};
use serde_json::json;

pub(crate) use tools::SubagentTools;

use crate::error::Result;
use crate::live::Live;
use crate::runtime::Runtime;

/// Per running run: the lock that numbers its children one at a time (the
/// model may ask for several in one turn, and they run concurrently), and
/// the limits it shares with its family.
#[derive(Default)]
pub(crate) struct Families {
    members: Mutex<HashMap<String, Member>>,
    /// Runs queued again after a restart (or taken over from another
    /// replica) that had started before: their family's spending so far is
    /// in the store, not in this process.
    resumed: Mutex<HashSet<String>>,
}

/// One running run of a family.
#[derive(Default, Clone)]
struct Member {
    numbering: Arc<tokio::sync::Mutex<()>>,
    family: Option<Arc<Family>>,
    /// The run the family started with (its first ancestor).
    root: Option<String>,
    /// The run as it was claimed here: a `delegate` call reads its parent
    /// from it, not from the store.
    record: Option<Arc<RunRecord>>,
    /// It called `delegate`, or was resumed (and may have before): it may
    /// leave children running when it ends.
    may_have_children: bool,
    /// The children it started, when all were started here (it was not
    /// resumed): its `delegate` calls and its end read them here, not from
    /// the store.
    children: Option<Vec<KnownChild>>,
}

/// A child a run started in this process.
#[derive(Clone)]
pub(crate) struct KnownChild {
    /// The key it was stored with (`delegate_key` of the call).
    pub(crate) key: String,
    /// Its run.
    pub(crate) run_id: String,
}

/// What a run that ended may have left running.
pub(crate) enum Leftover {
    /// It started no child.
    Nothing,
    /// The children it started, all here.
    Known(Vec<String>),
    /// Children that only the store knows of (it was resumed).
    Unknown,
}

/// What a run brings to its family when it starts here.
pub(crate) struct Before {
    /// What the family spent before, when that is not all in this process.
    spending: Option<Spending>,
    /// It never ran before: every child it starts is started here.
    fresh: bool,
}

/// What a family had spent before this process ran any of it: its root and
/// what each of its other runs took, read from their journals.
pub(crate) struct Spending {
    root: String,
    runs: Vec<(String, Spent)>,
}

impl Families {
    fn members(&self) -> std::sync::MutexGuard<'_, HashMap<String, Member>> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_of(&self, parent_run_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.members();
        let member = map.entry(parent_run_id.to_owned()).or_default();
        member.may_have_children = true;
        member.numbering.clone()
    }

    /// Notes that `run` had started before it was queued here (a restart,
    /// or a lease taken over), so its family's spending is read again.
    pub(crate) fn resumed(&self, run: &RunRecord) {
        // The first claim records the mode; a queued run has neither.
        if run.status == hearth_core::RunStatus::Running || run.mode.is_some() {
            self.resumed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(run.run_id.clone());
        }
    }

    /// Whether `run` was resumed (it ran before), and whether its parent
    /// does not run here: either way its family spent what this process
    /// has not seen.
    fn resumed_or_parent_away(&self, run: &RunRecord) -> (bool, bool) {
        let resumed = self
            .resumed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&run.run_id);
        let parent_away = run
            .parent_run_id
            .as_deref()
            .is_some_and(|p| self.members().get(p).is_none_or(|m| m.family.is_none()));
        (resumed, parent_away)
    }

    /// The limits `run` shares: its parent's family when the parent runs
    /// here, else the family another of its runs recovered here joined
    /// first, else a family it starts with what `before` says was spent.
    pub(crate) fn join(
        &self,
        run: &Arc<RunRecord>,
        max_wall: Duration,
        Before {
            spending: before,
            fresh,
        }: Before,
    ) -> Arc<Family> {
        let mut map = self.members();
        let inherited = run
            .parent_run_id
            .as_deref()
            .and_then(|p| map.get(p))
            .and_then(|m| Some((m.family.clone()?, m.root.clone()?)));
        let resumed = before.is_some();
        let (family, root) = match (inherited, before) {
            (Some(found), _) => found,
            (None, None) => (Arc::new(Family::new(max_wall)), run.run_id.clone()),
            (None, Some(before)) => {
                // A child recovered before its parent started again (or the
                // other way round) already holds the family.
                let running = map
                    .values()
                    .find(|m| m.root.as_deref() == Some(before.root.as_str()))
                    .and_then(|m| m.family.clone());
                let family = running.unwrap_or_else(|| {
                    let family = Family::new(max_wall);
                    for (id, spent) in before.runs {
                        family.report(&id, spent);
                    }
                    Arc::new(family)
                });
                (family, before.root)
            }
        };
        let member = map.entry(run.run_id.clone()).or_default();
        member.family = Some(family.clone());
        member.root = Some(root);
        member.record = Some(run.clone());
        member.may_have_children |= resumed || !fresh;
        member.children = fresh.then(Vec::new);
        family
    }

    /// The children `parent_run_id` started, when all were started here.
    fn known_children(&self, parent_run_id: &str) -> Option<Vec<KnownChild>> {
        self.members()
            .get(parent_run_id)
            .and_then(|m| m.children.clone())
    }

    /// Notes a child `parent_run_id` started here.
    fn add_child(&self, parent_run_id: &str, child: KnownChild) {
        if let Some(children) = self
            .members()
            .get_mut(parent_run_id)
            .and_then(|m| m.children.as_mut())
            && !children.iter().any(|c| c.run_id == child.run_id)
        {
            children.push(child);
        }
    }

    /// `run_id` as it was claimed, while it runs here.
    pub(crate) fn record_of(&self, run_id: &str) -> Option<Arc<RunRecord>> {
        self.members().get(run_id).and_then(|m| m.record.clone())
    }

    /// The limits `run_id` shares, while it runs here.
    fn family_of(&self, run_id: &str) -> Option<Arc<Family>> {
        self.members().get(run_id).and_then(|m| m.family.clone())
    }

    /// Forgets a run that ended: its children are numbered already. What
    /// it may have left running.
    pub(crate) fn forget(&self, run_id: &str) -> Leftover {
        let member = self.members().remove(run_id);
        self.resumed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(run_id);
        match member {
            Some(m) if m.may_have_children => match m.children {
                Some(known) => Leftover::Known(known.into_iter().map(|c| c.run_id).collect()),
                None => Leftover::Unknown,
            },
            _ => Leftover::Nothing,
        }
    }
}

/// What a run took of the `[agent]` limits, from its journal.
fn spent_of(steps: &[StepRecord]) -> Spent {
    let count = |f: &dyn Fn(&StepRecord) -> bool| {
        u32::try_from(steps.iter().filter(|s| f(s)).count()).unwrap_or(u32::MAX)
    };
    Spent {
        steps: count(&|_| true),
        tool_calls: count(&|s| s.kind == StepKind::Tool),
        llm_calls: count(&|s| s.kind.is_model_call()),
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

    /// What `run`'s family spent before this process ran it, when that is
    /// not all in this process: after a restart, the children that ended
    /// before it still count against the limits the family shares. Nothing
    /// is read for a new run, or a child of a run here.
    pub(crate) async fn spending_before(&self, run: &RunRecord) -> Before {
        let (resumed, parent_away) = self.inner.families.resumed_or_parent_away(run);
        let spending = if resumed || parent_away {
            self.read_spending(run).await
        } else {
            None
        };
        Before {
            spending,
            fresh: !resumed,
        }
    }

    /// What the family of `run` spent, from the journals of its runs.
    async fn read_spending(&self, run: &RunRecord) -> Option<Spending> {
        let store = self.family_store(run).await.ok()?;
        let read = async {
            let mut root = run.clone();
            // Bounded: a family is never deeper than a thread key says.
            for _ in 0..=hearth_agent::subagents::depth(&run.thread_key) {
                let Some(parent) = root.parent_run_id.as_deref() else {
                    break;
                };
                match store.get_run(parent).await? {
                    Some(p) => root = p,
                    None => break,
                }
            }
            let mut runs = Vec::new();
            let mut next = vec![root.clone()];
            while let Some(r) = next.pop() {
                if r.run_id != run.run_id {
                    runs.push((r.run_id.clone(), spent_of(&store.steps(&r.run_id).await?)));
                }
                next.extend(children_of(&store, &r).await?);
            }
            Ok::<_, crate::error::RuntimeError>(Spending {
                root: root.run_id,
                runs,
            })
        };
        match read.await {
            Ok(spending) => Some(spending),
            Err(e) => {
                tracing::warn!(run_id = %run.run_id, error = %e, "could not read what the family of a resumed run spent; it counts only what runs here");
                None
            }
        }
    }

    /// A sub-agent recovered after a restart has lost what its parent chose
    /// for it with the rest of what was kept in memory: its model, tools and
    /// steps are read again from the parent's journaled `delegate` call (a
    /// model the call did not name is the parent's, as when it started).
    pub(crate) async fn with_delegated_tools(
        &self,
        live: &Live,
        run: &RunRecord,
        mut overrides: crate::supplied::RunOverrides,
    ) -> crate::supplied::RunOverrides {
        // What was supplied at ingest is still here: not recovered.
        if run.source != hearth_core::DELEGATE_SOURCE || overrides.parent_run_id.is_some() {
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
                tracing::warn!(run_id = %run.run_id, error = %e, "could not read the parent of a recovered sub-agent; it keeps every read-class tool its user may use and runs on the default model");
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
        let Some(args) = args else {
            return overrides;
        };
        overrides.tools = tools::tools_arg(&args).ok().flatten();
        overrides.max_steps = tools::max_steps_arg(&args).ok().flatten();
        overrides.model = match args.get("model").and_then(serde_json::Value::as_str) {
            // The router picks again, as it did.
            Some("auto") if Self::routes_runs(live) => None,
            Some(m) if m != "auto" => Some(m.to_owned()),
            _ => match self.run_record(parent).await {
                Ok(parent) => parent.model,
                Err(e) => {
                    tracing::warn!(run_id = %run.run_id, error = %e, "could not read the parent of a recovered sub-agent; it runs on the default model");
                    None
                }
            },
        };
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

    /// Cancels those of `children`, all started here, that have not ended.
    pub(crate) async fn cancel_running(&self, children: &[String]) {
        for child in children {
            let running = self
                .inner
                .bus
                .get(child)
                .is_some_and(|log| !log.status().is_terminal());
            if running && let Err(e) = Box::pin(self.cancel(child)).await {
                tracing::warn!(run_id = %child, error = %e, "could not cancel a sub-agent");
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
    /// The thread of a new child.
    thread: String,
    /// The run of the child this call started before (a resumed parent), if any.
    existing: Option<String>,
    /// How many children the parent started before this one.
    started: usize,
    /// How many of them have not ended.
    running: usize,
}

impl Runtime {
    /// Finds the child `call_id` of `parent` started, or the thread the
    /// next child takes: from what this process knows when the parent
    /// started all its children here, else from the store.
    async fn slot(
        &self,
        store: &Arc<dyn Store>,
        parent: &RunRecord,
        call_id: &str,
    ) -> Result<Slot> {
        let key = delegate_key(&parent.run_id, call_id);
        let (existing, started, running) = match self.inner.families.known_children(&parent.run_id)
        {
            Some(known) => {
                // A child's event log stays open until it ends.
                let running = known
                    .iter()
                    .filter(|c| {
                        self.inner
                            .bus
                            .get(&c.run_id)
                            .is_some_and(|log| !log.status().is_terminal())
                    })
                    .count();
                let existing = known
                    .iter()
                    .find(|c| c.key == key)
                    .map(|c| c.run_id.clone());
                (existing, known.len(), running)
            }
            None => {
                let siblings = children_of(store, parent).await?;
                let running = siblings.iter().filter(|c| !c.status.is_terminal()).count();
                let existing = siblings
                    .iter()
                    .find(|c| c.idempotency_key.as_deref() == Some(key.as_str()))
                    .map(|c| c.run_id.clone());
                (existing, siblings.len(), running)
            }
        };
        let thread = child_thread(parent, u32::try_from(started + 1).unwrap_or(u32::MAX));
        Ok(Slot {
            key,
            thread,
            existing,
            started,
            running,
        })
    }
}
