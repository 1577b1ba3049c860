//! `Runtime`: the handle every surface holds, its parts and settings, and
//! the calls that read, wait for, cancel and shut down runs. Ingest is in
//! `ingest.rs`, execution in `execute.rs`, recovery in `recovery.rs`.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hearth_agent::{Engine, Outcome};
use hearth_core::records::ThreadActivity;
use hearth_core::{RunEnvelope, RunStatus};
use hearth_store::{ReplyRouter, RunFilter, RunRecord, StepRecord, Store};
use hearth_tools::ToolRegistry;
use tokio::sync::{Notify, watch};

use crate::bus::EventBus;
use crate::catalog::Catalog;
use crate::envelope::envelope;
use crate::error::{Result, RuntimeError};
use crate::incognito::Incognito;
use crate::live::{Live, LiveCell, SurfaceCell};
use crate::notices::Notices;
use crate::scheduler::{CancelFound, Scheduler};
use crate::supplied::Supplied;
use crate::surfaces::ChatSurface;
use crate::usage::SpendAlert;

/// Settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// This process's lease owner id.
    pub owner: String,
    /// How long a run's lease lasts without renewal.
    pub lease: Duration,
    /// How often leases are renewed and expired ones swept.
    pub sweep_every: Duration,
    /// Log a warning once per UTC day when the day's estimated spend
    /// reaches this (USD); a configuration reload replaces it.
    pub daily_spend_alert_usd: Option<f64>,
    /// Incognito runs may use only local models; a configuration reload
    /// replaces it.
    pub incognito_local_only: bool,
    /// Runs queued or running in this process beyond which new messages are
    /// refused (`Overloaded`) instead of queued.
    pub max_queued: usize,
    /// True when no other process uses the store (SQLite with the home
    /// locked): leases left by earlier processes are released at start, so
    /// their runs are recovered at once instead of after their lease.
    pub sole_owner: bool,
    /// Where this process's HTTP API listens, as other replicas see it.
    pub addr: Option<String>,
    /// When this process started (unix ms).
    pub started_at: hearth_core::Timestamp,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            owner: format!("proc_{}", uuid::Uuid::now_v7().simple()),
            lease: Duration::from_secs(60),
            sweep_every: Duration::from_secs(20),
            daily_spend_alert_usd: None,
            incognito_local_only: false,
            max_queued: 10_000,
            sole_owner: true,
            addr: None,
            started_at: hearth_core::now_ms(),
        }
    }
}

/// The result of waiting for a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// Terminal.
    Finished(RunEnvelope),
    /// Not terminal yet (timed out, or awaiting confirmation).
    Pending(RunEnvelope),
}

pub(crate) struct Inner {
    pub(crate) store: Arc<dyn Store>,
    /// The enabled apps' tools (refreshed when apps change).
    pub(crate) app_tools: Arc<crate::apps::tools::AppTools>,
    /// Everything a configuration reload replaces (see `live.rs`).
    pub(crate) live: LiveCell,
    /// How to read and apply the configuration again.
    pub(crate) reload: crate::reload::Reloader,
    pub(crate) bus: EventBus,
    pub(crate) scheduler: Scheduler,
    pub(crate) options: RuntimeOptions,
    pub(crate) shutting_down: AtomicBool,
    /// Runs taken from the queues and not yet done (claimed or claiming).
    pub(crate) in_flight: watch::Sender<usize>,
    /// Runs this process has claimed and is executing: the only ones whose
    /// leases it renews.
    executing: Mutex<HashSet<String>>,
    pub(crate) spend_alert: SpendAlert,
    pub(crate) incognito: Incognito,
    /// Overrides of runs accepted and not started yet.
    pub(crate) supplied: Supplied,
    /// Direct tool calls accepted (or recovered) and not started yet.
    pub(crate) direct: crate::direct::DirectRuns,
    /// Runs stored already claimed and prepared, not started yet.
    pub(crate) preclaimed: crate::claimed_here::Preclaimed,
    /// Runs stored held here, until their worker claims them again.
    pub(crate) held: crate::claimed_here::Held,
    /// The chat channels' reply router, when there is a chat surface: it
    /// follows the surface in force (see [`SurfaceCell::replies`]).
    pub(crate) replies: Option<Arc<dyn ReplyRouter>>,
    /// The chat channels, started and stopped with the runtime, replaced
    /// by a reload that changes them.
    pub(crate) surface: SurfaceCell,
    /// The MCP servers and executable skills this runtime's tools call.
    pub(crate) mcp: hearth_mcp::McpManager,
    /// The skills offered to the model.
    pub(crate) skills: Arc<hearth_skills::Skills>,
    /// Process-wide events (budget thresholds, the daily spend alert,
    /// failed jobs).
    pub(crate) notices: Notices,
    /// Wakes the jobs ticker when jobs change.
    pub(crate) jobs_wake: Arc<Notify>,
    /// The model router and what runs taught it, pending their commit.
    pub(crate) routing: crate::routing::Routing,
    /// Memory search by words and meaning; embeds saved memories.
    pub(crate) memory: Arc<crate::memory::SemanticMemory>,
    /// Pulls of work and runs followed on other replicas (shared store).
    pub(crate) wakeups: crate::wakeups::Wakeups,
    /// Numbers each parent's sub-agents one at a time.
    pub(crate) families: crate::subagents::Families,
}

impl Inner {
    /// The live configuration in force now; a run takes it once.
    pub(crate) fn live(&self) -> Arc<Live> {
        self.live.get()
    }

    pub(crate) fn executing(&self) -> Vec<String> {
        let set = self
            .executing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        set.iter().cloned().collect()
    }

    pub(crate) fn executing_insert(&self, run_id: &str) {
        let mut set = self
            .executing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        set.insert(run_id.to_owned());
    }

    pub(crate) fn executing_remove(&self, run_id: &str) {
        let mut set = self
            .executing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        set.remove(run_id);
    }
}

/// The runtime. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

/// Checks a key from outside that has no type of its own (a source, an
/// idempotency key), by the rules of [`hearth_core::ThreadKey`].
pub fn check_key(name: &'static str, value: &str) -> Result<()> {
    Ok(hearth_core::check_key(name, value)?)
}

/// What a runtime is made of; the builder gathers it.
pub(crate) struct Parts<'a> {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) catalog: Catalog,
    /// The tools, without the job tools.
    pub(crate) tools: ToolRegistry,
    /// Whether the job tools join `tools`.
    pub(crate) job_tools: bool,
    /// Whether the sub-agent tools join `tools`.
    pub(crate) subagent_tools: bool,
    /// Makes the engine from the tools.
    pub(crate) make_engine: Box<dyn FnOnce(ToolRegistry) -> Engine + 'a>,
    pub(crate) options: RuntimeOptions,
    pub(crate) notices: Notices,
    pub(crate) surface: Option<Arc<dyn ChatSurface>>,
    pub(crate) mcp: hearth_mcp::McpManager,
    pub(crate) skills: Arc<hearth_skills::Skills>,
    /// The configuration and environment the runtime was built from.
    pub(crate) config: Arc<hearth_config::Config>,
    pub(crate) env: Arc<std::collections::BTreeMap<String, String>>,
    /// The sealed secrets opened, as hashes.
    pub(crate) secrets: Arc<std::collections::BTreeMap<String, String>>,
    /// What a reload needs beside them.
    pub(crate) reload: crate::reload::Reloader,
    /// Memory search by words and meaning (its tools are in `tools`).
    pub(crate) memory: Arc<crate::memory::SemanticMemory>,
}

impl Runtime {
    /// A runtime over its parts. Call `start` to recover and begin sweeping.
    /// The job tools get the runtime as it is made: they hold it weakly,
    /// since the runtime owns them.
    pub(crate) fn from_parts(parts: Parts<'_>) -> Self {
        let Parts {
            store,
            catalog,
            mut tools,
            job_tools,
            subagent_tools,
            make_engine,
            options,
            notices,
            surface,
            mcp,
            skills,
            config,
            env,
            secrets,
            reload,
            memory,
        } = parts;
        let surface_cell = SurfaceCell::new(surface.clone());
        let inner = Arc::new_cyclic(|weak| {
            let app_tools = Arc::new(crate::apps::tools::AppTools::default());
            tools.add_source(app_tools.clone());
            if job_tools {
                for tool in crate::jobs::JobTools::new(weak.clone()).tools() {
                    tools.register(tool);
                }
            }
            if subagent_tools {
                for tool in crate::subagents::SubagentTools::new(weak.clone()).tools() {
                    tools.register(tool);
                }
            }
            Inner {
                app_tools,
                store,
                live: LiveCell::new(Live {
                    config,
                    env,
                    secrets,
                    catalog: Arc::new(catalog),
                    engine: Arc::new(make_engine(tools)),
                    router: None,
                    incognito_local_only: options.incognito_local_only,
                    daily_spend_alert_usd: options.daily_spend_alert_usd,
                    loaded_at: hearth_core::now_ms(),
                }),
                reload,
                bus: EventBus::default(),
                scheduler: Scheduler::default(),
                options,
                shutting_down: AtomicBool::new(false),
                in_flight: watch::Sender::new(0),
                executing: Mutex::new(HashSet::new()),
                spend_alert: SpendAlert::default(),
                incognito: Incognito::default(),
                supplied: Supplied::default(),
                direct: crate::direct::DirectRuns::default(),
                preclaimed: crate::claimed_here::Preclaimed::default(),
                held: crate::claimed_here::Held::default(),
                replies: surface.is_some().then(|| surface_cell.replies()),
                surface: surface_cell,
                mcp,
                skills,
                notices,
                jobs_wake: Arc::new(Notify::new()),
                routing: crate::routing::Routing::default(),
                memory,
                wakeups: crate::wakeups::Wakeups::default(),
                families: crate::subagents::Families::default(),
            }
        });
        inner.memory.attach(Arc::downgrade(&inner));
        Self { inner }
    }

    /// Process-wide events: `run.failed`, `budget.threshold`,
    /// `spend.daily_exceeded`, `job.failed`.
    pub fn notices(&self) -> tokio::sync::broadcast::Receiver<crate::notices::Notice> {
        self.inner.notices.subscribe()
    }

    /// Where notices are published, for the parts outside the runtime that
    /// publish their own (the channels: `channel.degraded`, `outbox.failed`).
    pub fn notice_bus(&self) -> Notices {
        self.inner.notices.clone()
    }

    /// Runs that change on this replica from now on (queued, started,
    /// awaiting confirmation, ended): what live views redraw.
    pub fn run_changes(&self) -> tokio::sync::broadcast::Receiver<crate::bus::RunChange> {
        self.inner.bus.changes()
    }

    /// One run's envelope.
    pub async fn get_run(&self, run_id: &str) -> Result<RunEnvelope> {
        if let Some((run, children)) = self.stored_run_with_children(run_id).await? {
            let mut env = self.envelope_of(&run).await?;
            env.children = children;
            return Ok(env);
        }
        let run = self.run_record(run_id).await?;
        let mut env = self.envelope_of(&run).await?;
        env.children = self.child_runs(&run).await?;
        Ok(env)
    }

    pub(crate) async fn run_record(&self, run_id: &str) -> Result<RunRecord> {
        self.store_of_run(run_id)
            .get_run(run_id)
            .await?
            .ok_or_else(|| RuntimeError::RunNotFound(run_id.to_owned()))
    }

    /// The threads that have runs, the most recently active first (the
    /// incognito threads of this process included).
    pub async fn list_threads(&self, limit: u32) -> Result<Vec<ThreadActivity>> {
        let mut threads = self.inner.store.list_threads(limit).await?;
        if let Some(memory) = self.inner.incognito.opened() {
            threads.extend(memory.list_threads(limit).await?);
            threads.sort_by_key(|t| std::cmp::Reverse(t.last_run_at));
            threads.truncate(usize::try_from(limit).unwrap_or(usize::MAX).max(1));
        }
        Ok(threads)
    }

    /// Runs matching a filter, newest first.
    pub async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunEnvelope>> {
        let mut runs = self.inner.store.list_runs(filter).await?;
        if let Some(memory) = self.inner.incognito.opened() {
            runs.extend(memory.list_runs(filter).await?);
            runs.sort_by_key(|r| std::cmp::Reverse(r.created_at));
            runs.truncate(usize::try_from(filter.limit).unwrap_or(usize::MAX).max(1));
        }
        let mut out = Vec::with_capacity(runs.len());
        for run in &runs {
            out.push(self.envelope_of(run).await?);
        }
        Ok(out)
    }

    /// A run's journal. One read for a run that has steps (the OpenAI
    /// surface reads every answer's usage here); only an empty journal asks
    /// whether the run exists.
    pub async fn trace(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        let mut steps = self.store_of_run(run_id).steps(run_id).await?;
        if steps.is_empty() {
            self.run_record(run_id).await?;
        }
        self.with_child_details(&mut steps).await;
        Ok(steps)
    }

    /// Waits until the run is terminal or awaiting confirmation, at most `timeout`.
    pub async fn wait(&self, run_id: &str, timeout: Duration) -> Result<WaitOutcome> {
        let mut log = self.inner.bus.get(run_id);
        if log.is_none() && self.inner.store.cluster().is_some() {
            // Another replica may be executing it: a log here follows it,
            // ended by the database's notification of its end.
            let run = self.run_record(run_id).await?;
            if !run.status.is_terminal() && !self.is_incognito_run(run_id) {
                log = Some(self.follow_remote(&run).await?);
            }
        }
        if let Some(log) = &log {
            let mut rx = log.subscribe();
            let _ = tokio::time::timeout(
                timeout,
                rx.wait_for(|(_, st)| st.is_terminal() || *st == RunStatus::AwaitingConfirmation),
            )
            .await;
        }
        // A run this process ended answers with what its end stored.
        let env = match log.as_ref().and_then(|l| l.ended()) {
            Some(run) => self.envelope_of(run).await?,
            None => self.get_run(run_id).await?,
        };
        Ok(if env.status.is_terminal() {
            WaitOutcome::Finished(env)
        } else {
            WaitOutcome::Pending(env)
        })
    }

    /// True when `run_id` lives in this process's incognito memory.
    pub(crate) fn is_incognito_run(&self, run_id: &str) -> bool {
        self.inner.incognito.store_of_run(run_id).is_some()
    }

    /// Cancels a run; returns its envelope (the terminal status it already had,
    /// if it had one).
    pub async fn cancel(&self, run_id: &str) -> Result<RunEnvelope> {
        let run = self.run_record(run_id).await?;
        if run.status.is_terminal() {
            return Ok(envelope(&run));
        }
        // The parent is told first: a child that ends as it is cancelled
        // then cannot let its parent go on to another step.
        let found = self.inner.scheduler.cancel(&run.thread_key, run_id);
        // Its children work for it alone: nobody would read their answers.
        self.cancel_children(&run).await;
        if !matches!(found, CancelFound::Active)
            && let Some(cluster) = self.inner.store.cluster()
        {
            // Another replica may execute it (or have claimed it from the
            // queue here): its end, written here, must be notified to it.
            cluster.watch_end(run_id).await?;
        }
        match found {
            CancelFound::Active => self.await_end(run_id).await,
            CancelFound::Queued => {
                let log = self.inner.bus.open(run_id, run.status);
                self.finish(
                    &run,
                    &log,
                    Outcome::Cancelled,
                    Vec::new(),
                    Vec::new(),
                    Vec::new(),
                )
                .await;
            }
            CancelFound::NotHere => {
                // Perhaps executing on another replica, which must stop it
                // before the thread's next run starts.
                let log = self.inner.bus.open(run_id, run.status);
                self.finish_cancelled_elsewhere(&run, &log).await;
            }
        }
        self.get_run(run_id).await
    }

    /// Cancels the thread's active run `run_id` in this process (if it is
    /// still active) and waits for its end, whatever the store says of it.
    pub(crate) async fn stop_active(&self, thread_key: &str, run_id: &str) {
        if let CancelFound::Active = self.inner.scheduler.cancel(thread_key, run_id) {
            self.await_end(run_id).await;
        }
    }

    async fn await_end(&self, run_id: &str) {
        if let Some(log) = self.inner.bus.get(run_id) {
            let mut rx = log.subscribe();
            let _ = rx.wait_for(|(_, st)| st.is_terminal()).await;
        }
    }

    /// Stops taking messages and starting queued runs, and waits up to
    /// `grace` for the runs in flight; returns as soon as they end, with how
    /// many are still going. Then stops the chat surface (pending replies
    /// stay in the outbox) and closes the MCP servers and executable skills
    /// (each child is closed, none outlives hearth). Queued runs stay queued
    /// in the store, and runs still going after the grace stay stored as
    /// running; both are recovered at the next start.
    pub async fn shutdown(&self, grace: Duration) -> usize {
        self.inner.shutting_down.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + grace;
        let mut rx = self.inner.in_flight.subscribe();
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|n| *n == 0)).await;
        let left = *rx.borrow();
        if let Some(surface) = self.inner.surface.get() {
            surface.shutdown().await;
        }
        self.inner.mcp.shutdown().await;
        self.leave_cluster().await;
        left
    }

    /// True once `shutdown` began.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Relaxed)
    }
}

pub(crate) fn lease_ms(o: &RuntimeOptions) -> i64 {
    i64::try_from(o.lease.as_millis()).unwrap_or(i64::MAX)
}
