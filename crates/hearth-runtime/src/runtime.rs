//! `Runtime`: ingest, scheduling, cancellation, waiting, recovery, shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hearth_agent::firewall::SecretScanner;
use hearth_agent::{Candidate, Engine, EventSink, Outcome, RunInput, ToolMode};
use hearth_core::{
    DeliveryMode, Inbound, ModelRef, RunEnvelope, RunEventKind, RunStatus, ThinkingLevel, now_ms,
};
use hearth_store::{CreateRunOutcome, NewRun, RunFilter, RunFinish, RunRecord, StepRecord, Store};
use serde_json::{Value, json};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::bus::{EventBus, RunLog};
use crate::catalog::{Catalog, ToolSupport};
use crate::envelope::envelope;
use crate::error::{Result, RuntimeError};
use crate::incognito::Incognito;
use crate::scheduler::{CancelFound, Enqueued, Scheduler};
use crate::usage::SpendAlert;

/// Longest accepted thread key, user key, source or idempotency key.
const MAX_KEY_LEN: usize = 256;

/// Settings of the runtime.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// This process's lease owner id.
    pub owner: String,
    /// How long a run's lease lasts without renewal.
    pub lease: Duration,
    /// How often leases are renewed and expired ones swept.
    pub sweep_every: Duration,
    /// Log a warning once per UTC day when the day's estimated spend reaches this (USD).
    pub daily_spend_alert_usd: Option<f64>,
    /// Incognito runs may use only local models.
    pub incognito_local_only: bool,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        Self {
            owner: format!("proc_{}", uuid::Uuid::now_v7().simple()),
            lease: Duration::from_secs(60),
            sweep_every: Duration::from_secs(20),
            daily_spend_alert_usd: None,
            incognito_local_only: false,
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
    pub(crate) catalog: Catalog,
    pub(crate) engine: Engine,
    pub(crate) bus: EventBus,
    pub(crate) scheduler: Scheduler,
    pub(crate) options: RuntimeOptions,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) in_flight: watch::Sender<usize>,
    pub(crate) spend_alert: SpendAlert,
    pub(crate) incognito: Incognito,
}

/// The runtime. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

struct LogSink<'a>(&'a RunLog);

impl EventSink for LogSink<'_> {
    fn emit(&self, kind: RunEventKind, data: Value) {
        // The run's status follows its events: it awaits from the question
        // until the next thing it does.
        let status = match kind {
            RunEventKind::ConfirmationRequired => Some(RunStatus::AwaitingConfirmation),
            _ if self.0.status() == RunStatus::AwaitingConfirmation => Some(RunStatus::Running),
            _ => None,
        };
        self.0.push(kind, data, status);
    }
}

pub(crate) fn check_key(name: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > MAX_KEY_LEN || value.chars().any(char::is_control) {
        return Err(RuntimeError::InvalidInput(format!(
            "{name} must be 1 to {MAX_KEY_LEN} characters without control characters"
        )));
    }
    Ok(())
}

impl Runtime {
    /// A runtime over its parts. Call `start` to recover and begin sweeping.
    pub fn new(
        store: Arc<dyn Store>,
        catalog: Catalog,
        engine: Engine,
        options: RuntimeOptions,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                catalog,
                engine,
                bus: EventBus::default(),
                scheduler: Scheduler::default(),
                options,
                shutting_down: AtomicBool::new(false),
                in_flight: watch::Sender::new(0),
                spend_alert: SpendAlert::default(),
                incognito: Incognito::default(),
            }),
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The model catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.inner.catalog
    }

    /// The event bus.
    pub fn bus(&self) -> &EventBus {
        &self.inner.bus
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Re-queues every run a previous process left unfinished, then starts the
    /// lease heartbeat and the periodic sweep. Returns how many were recovered.
    pub async fn start(&self) -> Result<usize> {
        self.inner
            .incognito
            .load(self.inner.store.incognito_threads().await?);
        let recovered = self.sweep(true).await?;
        if recovered > 0 {
            info!(runs = recovered, "recovered unfinished runs");
        }
        self.start_retention();
        let weak = Arc::downgrade(&self.inner);
        let every = self.inner.options.sweep_every;
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let rt = Runtime { inner };
                let until = now_ms() + lease_ms(&rt.inner.options);
                // Only the runs a worker is executing: a run whose worker is
                // gone must let its lease lapse so the sweep recovers it.
                let executing: Vec<String> = rt
                    .inner
                    .scheduler
                    .lock()
                    .values()
                    .filter_map(|slot| Some(slot.active.as_ref()?.run_id.clone()))
                    .collect();
                if let Err(e) = rt
                    .inner
                    .store
                    .renew_leases(&rt.inner.options.owner, &executing, until)
                    .await
                {
                    warn!(error = %e, "could not renew run leases");
                }
                if let Err(e) = rt.sweep(false).await {
                    warn!(error = %e, "recovery sweep failed");
                }
            }
        });
        Ok(recovered)
    }

    /// Runs the retention clean-up now (in the background) and every
    /// `RETENTION_EVERY`, for as long as the runtime lives.
    fn start_retention(&self) {
        let weak = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(crate::retention::RETENTION_EVERY);
            // After a long pause (a suspended laptop) one round is enough.
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(inner) = weak.upgrade() else { return };
                let store = inner.store.clone();
                drop(inner);
                if let Err(e) = crate::retention::run_once(store.as_ref(), now_ms()).await {
                    warn!(error = %e, "retention clean-up failed; retrying at the next round");
                }
            }
        });
    }

    /// Queues unfinished runs this process does not hold: all of them at start,
    /// later only those whose lease expired.
    async fn sweep(&self, at_start: bool) -> Result<usize> {
        let now = now_ms();
        let mut n = 0;
        for run in self.inner.store.unfinished_runs().await? {
            if self.inner.bus.get(&run.run_id).is_some() {
                continue;
            }
            let expired = run.lease_until.is_none_or(|t| t < now);
            if !at_start && run.status == RunStatus::Running && !expired {
                continue;
            }
            self.inner.bus.open(&run.run_id, run.status);
            self.schedule(run);
            n += 1;
        }
        Ok(n)
    }

    fn schedule(&self, run: RunRecord) {
        let thread_key = run.thread_key.clone();
        if let Enqueued::StartWorker = self.inner.scheduler.enqueue(run) {
            let rt = self.clone();
            tokio::spawn(async move { rt.worker(thread_key).await });
        }
    }

    async fn worker(self, thread_key: String) {
        while let Some((run, cancel, steer)) = self.inner.scheduler.next(&thread_key) {
            self.execute(run, cancel, steer).await;
        }
    }

    /// Accepts a message: stored before this returns; a duplicate idempotency
    /// key returns the run it made before.
    pub async fn ingest(&self, mut inbound: Inbound) -> Result<RunEnvelope> {
        if self.inner.shutting_down.load(Ordering::Relaxed) {
            return Err(RuntimeError::ShuttingDown);
        }
        if inbound.text.trim().is_empty() {
            return Err(RuntimeError::InvalidInput("text must not be empty".into()));
        }
        check_key("thread_key", &inbound.thread_key)?;
        check_key("user_key", &inbound.user_key)?;
        check_key("source", &inbound.source)?;
        if let Some(k) = &inbound.idempotency_key {
            check_key("idempotency_key", k)?;
        }
        // Read before redaction: a token is random enough to look like a secret.
        if let Some(env) = self
            .confirmation_command(&inbound.thread_key, &inbound.user_key, &inbound.text)
            .await?
        {
            return Ok(env);
        }
        // Secrets are redacted before the message is stored or sent anywhere:
        // nothing of them reaches disk, a provider or the history.
        let redacted = SecretScanner::new().redact(&inbound.text);
        if !redacted.findings.is_empty() {
            info!(
                thread_key = %inbound.thread_key,
                secrets = redacted.findings.len(),
                "redacted secrets from a message"
            );
            inbound.text = redacted.text.into_owned();
        }
        if inbound.delivery_mode == DeliveryMode::Steer
            && let Some(run_id) = self.inner.scheduler.active_run(&inbound.thread_key)
        {
            // Stored before it is acknowledged, like any message; if the run
            // ends before it can take it, it becomes an ordinary follow-up.
            let steer = self
                .store_of_run(&run_id)
                .add_steer(&run_id, &inbound.text, now_ms())
                .await?;
            self.deny_pending_on_thread(&inbound.thread_key).await;
            if self.inner.scheduler.send_steer(
                &inbound.thread_key,
                &run_id,
                steer.id,
                &inbound.text,
            ) {
                return self.get_run(&run_id).await;
            }
        }
        let thread_key = inbound.thread_key.clone();
        let env = self.ingest_stored(inbound).await?;
        // Stored first: an ordinary message denies what the thread waits for
        // only once it is safe.
        self.deny_pending_on_thread(&thread_key).await;
        Ok(env)
    }

    /// Stores a validated message as a new run (or finds its idempotent twin) and queues it.
    async fn ingest_stored(&self, inbound: Inbound) -> Result<RunEnvelope> {
        let lock = self.inner.scheduler.ingest_lock(&inbound.thread_key);
        let guard = lock.lock().await;
        let incognito = self.inner.incognito.is_thread(&inbound.thread_key);
        let store = if incognito {
            self.inner.incognito.store()?
        } else {
            self.inner.store.clone()
        };
        let outcome = store
            .create_run(NewRun {
                run_id: hearth_core::new_run_id(),
                thread_key: inbound.thread_key,
                user_key: inbound.user_key,
                source: inbound.source,
                input: inbound.text,
                idempotency_key: inbound.idempotency_key,
                created_at: now_ms(),
            })
            .await;
        let run = match outcome {
            Ok(CreateRunOutcome::Existing(run)) => return Ok(envelope(&run)),
            Ok(CreateRunOutcome::Created(run)) => run,
            Err(e) => return Err(e.into()),
        };
        if incognito {
            self.inner.incognito.add_run(&run.run_id);
        }
        metrics::counter!("hearth_runs_accepted_total").increment(1);
        let log = self.inner.bus.open(&run.run_id, RunStatus::Queued);
        log.push(
            RunEventKind::Queued,
            json!({ "run_id": run.run_id, "thread_key": run.thread_key }),
            None,
        );
        let env = envelope(&run);
        self.schedule(run);
        drop(guard);
        drop(lock);
        Ok(env)
    }

    async fn execute(
        &self,
        run: RunRecord,
        cancel: tokio_util::sync::CancellationToken,
        steer: tokio::sync::mpsc::UnboundedReceiver<(i64, String)>,
    ) {
        let inner = &self.inner;
        let log = inner.bus.open(&run.run_id, run.status);
        let outcome = self.prepare(&run).await;
        let (model, provider, thinking) = match outcome {
            Ok(v) => v,
            Err((code, message)) => {
                self.finish(
                    &run,
                    &log,
                    Outcome::Failed(hearth_core::RunError { code, message }),
                    Vec::new(),
                    Vec::new(),
                    Vec::new(),
                )
                .await;
                return;
            }
        };
        // Marking the run running is not awaited: only the acknowledgement and
        // the answer must be durable before they are given, and in strict mode
        // a third fsync wait per run would cost a third of the throughput. A
        // crash before it commits leaves the run queued, which recovery treats
        // the same; landing after the run's end it changes nothing, because
        // `start_run` skips terminal runs. Runs reach here only from the queue,
        // from which cancelling removes them, so none is terminal already.
        let until = now_ms() + lease_ms(&inner.options);
        let journal = inner.incognito.store_of_run(&run.run_id);
        let (store, run_id, owner, model_name) = (
            self.store_of_run(&run.run_id),
            run.run_id.clone(),
            inner.options.owner.clone(),
            model.to_string(),
        );
        tokio::spawn(async move {
            if let Err(e) = store.start_run(&run_id, &owner, until, &model_name).await {
                warn!(run_id = %run_id, error = %e, "could not mark a run running; recovery will retry it if the process stops");
            }
        });
        log.push(
            RunEventKind::Started,
            json!({ "run_id": run.run_id, "model": model.to_string() }),
            Some(RunStatus::Running),
        );
        inner.in_flight.send_modify(|n| *n += 1);
        metrics::gauge!("hearth_runs_in_flight").increment(1.0);
        let local_only = inner.options.incognito_local_only && journal.is_some();
        let fallbacks = inner.catalog.fallbacks_for(&model);
        let candidates = std::iter::once((model, provider))
            .chain(fallbacks)
            .filter(|(m, _)| !local_only || inner.catalog.is_local(m))
            .map(|(m, p)| candidate(&inner.catalog, m, p))
            .collect();
        let input = RunInput {
            run_id: run.run_id.clone(),
            thread_key: run.thread_key.clone(),
            text: run.input.clone(),
            user_key: run.user_key.clone(),
            // Channels with their own spaces (guilds, workspaces) come later.
            scope: "global".into(),
            candidates,
            thinking,
            cancel,
            steer: Some(steer),
            incognito: journal.is_some(),
            journal,
        };
        let result = inner.engine.run(input, &LogSink(&log)).await;
        let follow_ups = result
            .unseen_steer
            .into_iter()
            .map(|text| NewRun {
                run_id: hearth_core::new_run_id(),
                thread_key: run.thread_key.clone(),
                user_key: run.user_key.clone(),
                source: run.source.clone(),
                input: text,
                idempotency_key: None,
                created_at: now_ms(),
            })
            .collect();
        self.finish(
            &run,
            &log,
            result.outcome,
            result.messages,
            result.steps,
            follow_ups,
        )
        .await;
        metrics::gauge!("hearth_runs_in_flight").decrement(1.0);
        inner.in_flight.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// The model, provider and thinking level a run uses.
    async fn prepare(
        &self,
        run: &RunRecord,
    ) -> std::result::Result<
        (
            hearth_core::ModelRef,
            Arc<dyn hearth_llm::Provider>,
            ThinkingLevel,
        ),
        (String, String),
    > {
        let state = self
            .inner
            .store
            .thread_state(&run.thread_key)
            .await
            .map_err(|e| ("store_error".to_owned(), e.to_string()))?;
        let model = state
            .model
            .clone()
            .unwrap_or_else(|| self.inner.catalog.default_model().to_string());
        let (model, provider) = self
            .inner
            .catalog
            .resolve(&model)
            .map_err(|e| ("unknown_model".to_owned(), e.to_string()))?;
        let thinking = ThinkingLevel::parse(&state.thinking).unwrap_or_default();
        if self.inner.options.incognito_local_only
            && self.inner.incognito.store_of_run(&run.run_id).is_some()
            && !self.inner.catalog.is_local(&model)
        {
            return Err((
                "not_local".to_owned(),
                format!(
                    "this thread is incognito and [llm] incognito_local_only is set, but {model} \
                     is not a local model; pick one with `hearth model set <provider>/<model>` \
                     (a provider whose base_url is on this machine or a private network)"
                ),
            ));
        }
        Ok((model, provider, thinking))
    }

    async fn finish(
        &self,
        run: &RunRecord,
        log: &RunLog,
        outcome: Outcome,
        messages: Vec<hearth_core::Message>,
        steps: Vec<StepRecord>,
        follow_ups: Vec<NewRun>,
    ) {
        let (status, output, error) = match outcome {
            Outcome::Succeeded(text) => (RunStatus::Succeeded, Some(text), None),
            Outcome::Failed(e) => (RunStatus::Failed, None, Some(e)),
            Outcome::Cancelled => (RunStatus::Cancelled, None, None),
        };
        let finish = RunFinish {
            run_id: run.run_id.clone(),
            status,
            output: output.clone(),
            error_code: error.as_ref().map(|e| e.code.clone()),
            error_message: error.as_ref().map(|e| e.message.clone()),
            messages,
            steps,
            follow_ups: follow_ups.clone(),
            finished_at: now_ms(),
        };
        let store = self.store_of_run(&run.run_id);
        let incognito = !Arc::ptr_eq(&store, &self.inner.store);
        if incognito {
            // Follow-ups are made in the same store; know them before they exist.
            for f in &finish.follow_ups {
                self.inner.incognito.add_run(&f.run_id);
            }
        }
        let stored = store.finish_run(finish).await;
        if incognito && let Ok(true) = stored {
            self.count_incognito_usage(&store, &run.run_id).await;
        }
        if let Ok(true) = stored {
            self.schedule_follow_ups(&run.thread_key, follow_ups).await;
        }
        if let Err(e) = stored {
            // The run stays unfinished in the store and is recovered later;
            // followers are told now rather than left hanging.
            warn!(run_id = %run.run_id, error = %e, "could not store the end of a run");
            log.push(
                RunEventKind::Failed,
                json!({ "run_id": run.run_id, "error": { "code": "store_error", "message": e.to_string() } }),
                Some(RunStatus::Failed),
            );
            self.inner.bus.finished(&run.run_id);
            return;
        }
        let (kind, data) = match status {
            RunStatus::Succeeded => (
                RunEventKind::Succeeded,
                json!({ "run_id": run.run_id, "output": { "text": output.unwrap_or_default() } }),
            ),
            RunStatus::Failed => (
                RunEventKind::Failed,
                json!({ "run_id": run.run_id, "error": error }),
            ),
            _ => (RunEventKind::Cancelled, json!({ "run_id": run.run_id })),
        };
        log.push(kind, data, Some(status));
        self.inner.bus.finished(&run.run_id);
        metrics::counter!("hearth_runs_total", "status" => status.as_str()).increment(1);
        self.check_spend().await;
        let secs = (now_ms() - run.created_at).max(0) as f64 / 1000.0;
        metrics::histogram!("hearth_run_duration_seconds").record(secs);
    }

    /// Queues runs that `finish_run` created, in their commit order, holding
    /// the thread's ingest lock as ingest does.
    async fn schedule_follow_ups(&self, thread_key: &str, follow_ups: Vec<NewRun>) {
        if follow_ups.is_empty() {
            return;
        }
        let lock = self.inner.scheduler.ingest_lock(thread_key);
        let _guard = lock.lock().await;
        for new in follow_ups {
            match self.store_of_run(&new.run_id).get_run(&new.run_id).await {
                Ok(Some(run)) => {
                    let log = self.inner.bus.open(&run.run_id, RunStatus::Queued);
                    log.push(
                        RunEventKind::Queued,
                        json!({ "run_id": run.run_id, "thread_key": run.thread_key }),
                        None,
                    );
                    self.schedule(run);
                }
                // Stored but not readable now: the recovery sweep picks it up.
                Ok(None) | Err(_) => {
                    warn!(run_id = %new.run_id, "a follow-up run could not be queued now; recovery will");
                }
            }
        }
    }

    /// Counts an incognito run's model calls in the disk store's usage,
    /// without thread or user keys.
    async fn count_incognito_usage(&self, memory: &Arc<dyn Store>, run_id: &str) {
        // A fresh id, so the usage rows cannot be tied to the run.
        let anonymous = format!("incognito_{}", uuid::Uuid::now_v7().simple());
        let steps = match memory.steps(run_id).await {
            Ok(mut steps) => {
                for s in &mut steps {
                    s.run_id.clone_from(&anonymous);
                }
                steps
            }
            Err(e) => {
                warn!(error = %e, "could not read an incognito run's steps for usage");
                return;
            }
        };
        if let Err(e) = self.inner.store.record_anonymous_usage(steps).await {
            warn!(error = %e, "could not count an incognito run's usage");
        }
    }

    /// One run's envelope.
    pub async fn get_run(&self, run_id: &str) -> Result<RunEnvelope> {
        let run = self.run_record(run_id).await?;
        self.envelope_of(&run).await
    }

    async fn run_record(&self, run_id: &str) -> Result<RunRecord> {
        self.store_of_run(run_id)
            .get_run(run_id)
            .await?
            .ok_or_else(|| RuntimeError::RunNotFound(run_id.to_owned()))
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

    /// A run's journal.
    pub async fn trace(&self, run_id: &str) -> Result<Vec<StepRecord>> {
        self.run_record(run_id).await?;
        Ok(self.store_of_run(run_id).steps(run_id).await?)
    }

    /// Waits until the run is terminal or awaiting confirmation, at most `timeout`.
    pub async fn wait(&self, run_id: &str, timeout: Duration) -> Result<WaitOutcome> {
        if let Some(log) = self.inner.bus.get(run_id) {
            let mut rx = log.subscribe();
            let _ = tokio::time::timeout(
                timeout,
                rx.wait_for(|(_, st)| st.is_terminal() || *st == RunStatus::AwaitingConfirmation),
            )
            .await;
        }
        let env = self.get_run(run_id).await?;
        Ok(if env.status.is_terminal() {
            WaitOutcome::Finished(env)
        } else {
            WaitOutcome::Pending(env)
        })
    }

    /// Cancels a run; returns its envelope (the terminal status it already had,
    /// if it had one).
    pub async fn cancel(&self, run_id: &str) -> Result<RunEnvelope> {
        let run = self.run_record(run_id).await?;
        if run.status.is_terminal() {
            return Ok(envelope(&run));
        }
        match self.inner.scheduler.cancel(&run.thread_key, run_id) {
            CancelFound::Active => {
                if let Some(log) = self.inner.bus.get(run_id) {
                    let mut rx = log.subscribe();
                    let _ = rx.wait_for(|(_, st)| st.is_terminal()).await;
                }
            }
            CancelFound::Queued(r) => {
                let log = self.inner.bus.open(run_id, r.status);
                self.finish(
                    &r,
                    &log,
                    Outcome::Cancelled,
                    Vec::new(),
                    Vec::new(),
                    Vec::new(),
                )
                .await;
            }
            CancelFound::NotHere => {
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
        }
        self.get_run(run_id).await
    }

    /// Stops taking messages and waits up to `grace` for runs in flight; runs
    /// still going after it stay stored as running and are recovered at next start.
    pub async fn shutdown(&self, grace: Duration) -> usize {
        self.inner.shutting_down.store(true, Ordering::Relaxed);
        let deadline = Instant::now() + grace;
        let mut rx = self.inner.in_flight.subscribe();
        let _ = tokio::time::timeout_at(deadline.into(), rx.wait_for(|n| *n == 0)).await;
        *rx.borrow()
    }

    /// True once `shutdown` began.
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutting_down.load(Ordering::Relaxed)
    }
}

/// A model the engine may call, with the tool mode and thinking support its
/// capabilities give it.
fn candidate(
    catalog: &Catalog,
    model: ModelRef,
    provider: Arc<dyn hearth_llm::Provider>,
) -> Candidate {
    let caps = catalog.capabilities(&model);
    Candidate {
        tools: match caps.tools {
            ToolSupport::Yes => ToolMode::Send,
            ToolSupport::No => ToolMode::Omit,
            ToolSupport::ModelDependent => ToolMode::TryThenOmit,
        },
        thinking: caps.thinking,
        model,
        provider,
    }
}

fn lease_ms(o: &RuntimeOptions) -> i64 {
    i64::try_from(o.lease.as_millis()).unwrap_or(i64::MAX)
}
