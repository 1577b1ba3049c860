//! Executing runs: a per-thread worker takes the thread's next run, claims it
//! in the store (only one caller can), runs the engine and stores the end.

use std::sync::Arc;

use hearth_agent::{Candidate, Outcome, RunInput, ToolMode};
use hearth_core::{ModelRef, RunError, RunEventKind, RunStatus, ThinkingLevel, now_ms};
use hearth_store::{NewRun, RunEnd, RunFinish, RunRecord, StepRecord, Store};
use serde_json::{Value, json};
use tracing::{debug, warn};

use crate::bus::RunLog;
use crate::catalog::{Catalog, ToolSupport};
use crate::live::Live;
use crate::routing::{RouteFailure, Routed};
use crate::runtime::{Runtime, lease_ms};
use crate::scheduler::{Enqueued, NextRun};
use crate::subagents::Leftover;

/// Why a run could not start; it fails with the code and this message.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// The thread's settings could not be read.
    #[error("could not read the thread's settings: {0}")]
    Store(#[from] hearth_store::StoreError),
    /// The thread's model is not in the catalog.
    #[error("{0}")]
    UnknownModel(String),
    /// An incognito thread limited to local models has a remote one.
    #[error(
        "this thread is incognito and [llm] incognito_local_only is set, but {0} is not a local \
         model; pick one with `hearth model set <provider>/<model>` (a provider whose base_url \
         is on this machine or a private network)"
    )]
    NotLocal(ModelRef),
    /// The router found no arm for the run.
    #[error(transparent)]
    Route(#[from] RouteFailure),
}

impl PrepareError {
    fn into_run_error(self) -> RunError {
        let code = match &self {
            Self::Store(_) => "store_error",
            Self::UnknownModel(_) => "unknown_model",
            Self::NotLocal(_) => "not_local",
            Self::Route(f) => f.code(),
        };
        RunError {
            code: code.to_owned(),
            message: self.to_string(),
        }
    }
}

/// What a run executes with.
pub(crate) struct Prepared {
    pub(crate) model: ModelRef,
    provider: Arc<dyn hearth_llm::Provider>,
    thinking: ThinkingLevel,
    /// Set when the router chose the model.
    route: Option<Routed>,
    /// Chosen explicitly (for the run or the thread), not by default.
    pinned: bool,
    /// The thread's permission mode in force when it was prepared; a run
    /// claimed before keeps the one it was first claimed with.
    pub(crate) mode: hearth_core::PermissionMode,
}

/// How a run claimed here starts.
struct Start {
    /// Cancels it.
    cancel: tokio_util::sync::CancellationToken,
    /// Messages steered into it.
    steer: tokio::sync::mpsc::Receiver<(i64, String)>,
    /// Stored claimed by this process and never run: the engine reads no
    /// journal or stored steers for it (`RunInput::fresh`).
    fresh: bool,
    /// What its insert saw of its thread's stored history, for a run stored
    /// claimed (`RunInput::history_seen`).
    history_seen: Option<hearth_store::HistorySeen>,
}

/// Publishes the engine's events on a run's log, keeping its status.
pub(crate) struct LogSink<'a>(pub(crate) &'a RunLog);

impl hearth_agent::EventSink for LogSink<'_> {
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

impl Runtime {
    /// Queues a stored run on its thread, starting the thread's worker if
    /// it has none. A run already queued or running here is left alone.
    pub(crate) fn schedule(&self, thread_key: &str, run_id: &str) {
        if let Enqueued::StartWorker = self.inner.scheduler.enqueue(thread_key, run_id) {
            let rt = self.clone();
            let thread_key = thread_key.to_owned();
            tokio::spawn(async move { rt.worker(thread_key).await });
        }
    }

    /// Executes the thread's runs one after the other. Once shutting down it
    /// takes no new run: those stay queued in the store for the next start.
    async fn worker(self, thread_key: String) {
        loop {
            let stop = self.is_shutting_down();
            let Some(next) = self.inner.scheduler.next(&thread_key, stop) else {
                return;
            };
            self.inner.in_flight.send_modify(|n| *n += 1);
            self.execute(&thread_key, next).await;
            self.inner
                .in_flight
                .send_modify(|n| *n = n.saturating_sub(1));
        }
    }

    /// Claims the run and, if this process won it, runs it to its end.
    async fn execute(&self, thread_key: &str, next: NextRun) {
        let NextRun {
            run_id,
            cancel,
            steer,
        } = next;
        let inner = &self.inner;
        if let Some((live, run, prepared, history_seen)) = inner.preclaimed.take(&run_id) {
            // Claimed when it was stored (and in `executing` since), with
            // the configuration it was prepared with.
            let overrides = inner.supplied.take(&run_id);
            let start = Start {
                cancel,
                steer,
                fresh: true,
                history_seen,
            };
            self.run_claimed(&live, &Arc::new(run), Ok(prepared), start, overrides)
                .await;
            inner.executing_remove(&run_id);
            return;
        }
        let store = self.store_of_run(&run_id);
        let overrides = inner.supplied.take(&run_id);
        // The configuration this run keeps to its end, whatever a reload
        // puts in force meanwhile.
        let live = inner.live();
        // Prepared before the claim (it only reads), so the claim records
        // the model in the same write. A direct tool call uses no model.
        let prepared = if inner.direct.take(&run_id) {
            None
        } else {
            Some(self.prepare(&live, &run_id, thread_key, &overrides).await)
        };
        let now = now_ms();
        let until = now + lease_ms(&inner.options);
        let owner = &inner.options.owner;
        let claimed = match &prepared {
            Some(Ok(p)) => {
                let model = p.model.to_string();
                store
                    .claim_run_with_model(&run_id, owner, until, now, &model, Some(p.mode.as_str()))
                    .await
            }
            Some(Err(_)) | None => store.claim_run(&run_id, owner, until, now).await,
        };
        // Held here since its insert, whose lease no one else could claim
        // it under: it never ran (a third of a lease of margin for the
        // other replicas' clocks).
        let held = inner
            .held
            .take(&run_id)
            .filter(|h| h.unclaimed_since_insert(now, lease_ms(&inner.options) / 3));
        let run = match claimed {
            Ok(Some(run)) => run,
            Ok(None) => {
                // Finished already, or another process holds it: not ours to run.
                debug!(run_id, "run not claimed: finished or held elsewhere");
                self.settle_unclaimed(&store, &run_id).await;
                return;
            }
            Err(e) => {
                warn!(run_id, error = %e, "could not claim a run; the recovery sweep retries it");
                return;
            }
        };
        inner.executing_insert(&run_id);
        // A sub-agent's supplied overrides name its parent; recovered, it has none.
        let recovered =
            run.source == hearth_core::DELEGATE_SOURCE && overrides.parent_run_id.is_none();
        let overrides = self.with_delegated_tools(&live, &run, overrides).await;
        let prepared = match prepared {
            // A recovered sub-agent's model, read again from its parent's
            // call: prepared and recorded again when it is not the one its
            // (settings-less) thread gave it.
            Some(Ok(p))
                if recovered
                    && overrides
                        .model
                        .as_deref()
                        .is_some_and(|m| m != p.model.to_string()) =>
            {
                let again = self.prepare(&live, &run_id, thread_key, &overrides).await;
                if let Ok(p) = &again
                    && let Err(e) = store.set_run_model(&run_id, &p.model.to_string()).await
                {
                    warn!(run_id, error = %e, "could not record a recovered sub-agent's model");
                }
                Some(again)
            }
            other => other,
        };
        match prepared {
            Some(prepared) if run.source != crate::direct::DIRECT_SOURCE => {
                let start = Start {
                    cancel,
                    steer,
                    fresh: held.is_some(),
                    history_seen: held.and_then(|h| h.history_seen),
                };
                self.run_claimed(&live, &Arc::new(run), prepared, start, overrides)
                    .await;
            }
            _ => self.run_direct(&run, cancel).await,
        }
        inner.executing_remove(&run_id);
    }

    /// A run queued here that another caller finished (a sweep's list can be
    /// stale): a log opened for it must not keep followers waiting.
    async fn settle_unclaimed(&self, store: &Arc<dyn Store>, run_id: &str) {
        let Some(log) = self.inner.bus.get(run_id) else {
            return;
        };
        if log.status().is_terminal() {
            return;
        }
        if let Ok(Some(run)) = store.get_run(run_id).await
            && run.status.is_terminal()
        {
            log.set_status(run.status);
            self.inner.bus.finished(run_id);
        }
    }

    async fn run_claimed(
        &self,
        live: &Live,
        run: &Arc<RunRecord>,
        prepared: Result<Prepared, PrepareError>,
        start: Start,
        overrides: crate::supplied::RunOverrides,
    ) {
        let Start {
            cancel,
            steer,
            fresh,
            history_seen,
        } = start;
        let crate::supplied::RunOverrides {
            history,
            tools,
            max_steps,
            ..
        } = overrides;
        let inner = &self.inner;
        let log = inner.bus.reopen(&run.run_id, run.status);
        let Prepared {
            model,
            provider,
            thinking,
            route,
            pinned,
            mode,
        } = match prepared {
            Ok(p) => p,
            Err(e) => {
                let outcome = Outcome::Failed(e.into_run_error());
                self.finish(run, &log, outcome, Vec::new(), Vec::new(), Vec::new())
                    .await;
                return;
            }
        };
        log.push(
            RunEventKind::Started,
            json!({ "run_id": run.run_id, "model": model.to_string() }),
            Some(RunStatus::Running),
        );
        metrics::gauge!("hearth_runs_in_flight").increment(1.0);
        // What the run was asked to use (its own, its thread's, the default
        // or the router's first choice): the model it was started with.
        let requested = model.to_string();
        let journal = inner.incognito.store_of_run(&run.run_id);
        let local_only = live.incognito_local_only && journal.is_some();
        let mut fallbacks = live.catalog.fallbacks_for(&model);
        let routed_at = now_ms();
        if let Some(routed) = &route {
            // The router's other candidates first, best first, then the
            // configured fallbacks it did not already list.
            let mut order: Vec<_> = routed.resolved.iter().skip(1).cloned().collect();
            fallbacks.retain(|(m, _)| !order.iter().any(|(o, _)| o == m));
            order.append(&mut fallbacks);
            fallbacks = order;
        }
        // The space the run was asked in (a guild, a group), stored with
        // it; for runs stored before that, the thread's channel's answer.
        let scope = run
            .scope
            .clone()
            .or_else(|| {
                inner
                    .replies
                    .as_ref()
                    .and_then(|r| r.scope_of(&run.thread_key))
            })
            .unwrap_or_else(|| "global".into());
        let allowed = std::iter::once((model, provider))
            .chain(fallbacks)
            .filter(|(m, _)| !local_only || live.catalog.is_local(m))
            .collect();
        // A community that gave its own key pays for its runs.
        let allowed = match self.with_community_keys(live, &scope, allowed).await {
            Ok(allowed) => allowed,
            Err((code, message)) => {
                let outcome = Outcome::Failed(RunError {
                    code: code.into(),
                    message,
                });
                self.finish(run, &log, outcome, Vec::new(), Vec::new(), Vec::new())
                    .await;
                metrics::gauge!("hearth_runs_in_flight").decrement(1.0);
                return;
            }
        };
        let candidates = allowed
            .into_iter()
            .map(|(m, p)| candidate(&live.catalog, m, p))
            .collect();
        let input = RunInput {
            run_id: run.run_id.clone(),
            thread_key: run.thread_key.clone(),
            text: run.input.clone(),
            user_key: run.user_key.clone(),
            scope,
            roles: run.roles.clone(),
            candidates,
            thinking,
            cancel,
            steer: Some(steer),
            incognito: journal.is_some(),
            journal,
            // The engine asks its questions through it; a sub-agent's are
            // asked in its first ancestor's conversation (its answer goes to
            // its parent, never to a chat: see `finish`).
            replies: inner.replies.clone(),
            pinned,
            first_step: u32::from(route.is_some()),
            // The mode its first claim recorded: a run recovered after a
            // restart keeps it, whatever the thread says now.
            mode: run
                .mode
                .as_deref()
                .and_then(hearth_core::PermissionMode::parse)
                .unwrap_or(mode),
            tools,
            max_steps,
            asker: crate::subagents::asker(run, &requested),
            family: Some(inner.families.join(
                run,
                live.engine.limits().max_wall,
                self.spending_before(run).await,
            )),
            fresh,
            history_seen,
        };
        let result = live
            .engine
            .run_with_history(input, history, &LogSink(&log))
            .await;
        if let Some(routed) = &route {
            self.learn_from(
                &run.run_id,
                &routed.decision,
                &result.outcome,
                &result.model_calls,
            );
        }
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
                // A steer the run did not see is the same sender in the same place.
                scope: run.scope.clone(),
                roles: run.roles.clone(),
                parent_run_id: None,
            })
            .collect();
        let mut steps = result.steps;
        if let Some(routed) = &route {
            steps.insert(
                0,
                crate::routing::route_step(&run.run_id, &routed.decision, routed_at),
            );
        }
        let models = answered_by(&result.model_calls, requested);
        self.finish_answered(
            run,
            &log,
            result.outcome,
            (result.messages, steps, follow_ups),
            models,
        )
        .await;
        metrics::gauge!("hearth_runs_in_flight").decrement(1.0);
    }

    /// The model, provider and thinking level a run uses: `model` when the
    /// run was given one, else its thread's.
    pub(crate) async fn prepare(
        &self,
        live: &Live,
        run_id: &str,
        thread_key: &str,
        overrides: &crate::supplied::RunOverrides,
    ) -> Result<Prepared, PrepareError> {
        // A sub-agent's thread is new and has no settings of its own: it
        // runs with the model and the mode its parent's call gave it.
        let state = if overrides.parent_run_id.is_some() {
            hearth_store::ThreadState::default()
        } else {
            // Settings only: counting a long thread's messages is not needed here.
            self.inner.store.thread_settings(thread_key).await?
        };
        self.prepare_from(live, run_id, thread_key, overrides, &state)
            .await
    }

    /// [`Self::prepare`] from the defaults, as for a thread without
    /// settings of its own, without reading them: for a run the store
    /// stores claimed only if its thread has none
    /// (`Store::create_claimed_run_assuming_defaults`).
    pub(crate) async fn prepare_assuming_defaults(
        &self,
        live: &Live,
        run_id: &str,
        thread_key: &str,
        overrides: &crate::supplied::RunOverrides,
    ) -> Result<Prepared, PrepareError> {
        let state = hearth_store::ThreadState {
            thread_key: thread_key.to_owned(),
            thinking: "off".to_owned(),
            ..hearth_store::ThreadState::default()
        };
        debug_assert!(!state.has_own_settings());
        self.prepare_from(live, run_id, thread_key, overrides, &state)
            .await
    }

    /// What [`Self::prepare`] makes of the thread settings `state`.
    async fn prepare_from(
        &self,
        live: &Live,
        run_id: &str,
        thread_key: &str,
        overrides: &crate::supplied::RunOverrides,
        state: &hearth_store::ThreadState,
    ) -> Result<Prepared, PrepareError> {
        let thinking = ThinkingLevel::parse(&state.thinking).unwrap_or_default();
        let mode = match overrides
            .mode
            .as_deref()
            .and_then(hearth_core::PermissionMode::parse)
        {
            Some(mode) => mode,
            None => crate::modes::in_force(live, state, now_ms()).mode,
        };
        let model = overrides.model.as_deref();
        let pinned = model.is_some() || state.model.is_some();
        // A model named by the run or its thread always wins over the router.
        if !pinned
            && let Some(routed) = self.route_run(live, run_id, thread_key, thinking).await?
            && !routed.resolved.is_empty()
        {
            let (model, provider) = routed.resolved[0].clone();
            return Ok(Prepared {
                model,
                provider,
                thinking,
                route: Some(routed),
                pinned: false,
                mode,
            });
        }
        let model = model
            .map(str::to_owned)
            .or_else(|| state.model.clone())
            .unwrap_or_else(|| live.catalog.default_model().to_string());
        let (model, provider) = live
            .catalog
            .resolve(&model)
            .map_err(|e| PrepareError::UnknownModel(e.to_string()))?;
        if live.incognito_local_only
            && self.inner.incognito.store_of_run(run_id).is_some()
            && !live.catalog.is_local(&model)
        {
            return Err(PrepareError::NotLocal(model));
        }
        Ok(Prepared {
            model,
            provider,
            thinking,
            route: None,
            pinned,
            mode,
        })
    }

    /// Stores a run's end (with its messages, journal and follow-ups in one
    /// transaction) and tells its followers.
    pub(crate) async fn finish(
        &self,
        run: &RunRecord,
        log: &RunLog,
        outcome: Outcome,
        messages: Vec<hearth_core::Message>,
        steps: Vec<StepRecord>,
        follow_ups: Vec<NewRun>,
    ) {
        self.finish_answered(
            run,
            log,
            outcome,
            (messages, steps, follow_ups),
            EndDetails::default(),
        )
        .await;
    }

    /// [`Self::finish`] of a run cancelled by this process while another
    /// may execute it (it is not running here): on a shared store the
    /// executing replica's lease stays on the run until that replica has
    /// stopped it, so the thread's next run does not start beside it.
    pub(crate) async fn finish_cancelled_elsewhere(&self, run: &RunRecord, log: &RunLog) {
        self.finish_answered(
            run,
            log,
            Outcome::Cancelled,
            (Vec::new(), Vec::new(), Vec::new()),
            EndDetails {
                executed_elsewhere: true,
                ..EndDetails::default()
            },
        )
        .await;
    }

    /// [`Self::finish`] of a run whose model calls name the model that
    /// answered (and the one asked for, when that differs).
    async fn finish_answered(
        &self,
        run: &RunRecord,
        log: &RunLog,
        outcome: Outcome,
        (messages, steps, follow_ups): (Vec<hearth_core::Message>, Vec<StepRecord>, Vec<NewRun>),
        models: EndDetails,
    ) {
        // A run cancelled before it started leaves its overrides unused,
        // and its claim if it was stored claimed.
        self.inner.supplied.take(&run.run_id);
        self.inner.held.take(&run.run_id);
        if self.inner.preclaimed.take(&run.run_id).is_some() {
            self.inner.executing_remove(&run.run_id);
        }
        self.forget_route_input(&run.run_id);
        let leftover = self.inner.families.forget(&run.run_id);
        let (status, output, error) = match outcome {
            Outcome::Succeeded(text) => (RunStatus::Succeeded, Some(text), None),
            Outcome::Failed(e) => (RunStatus::Failed, None, Some(e)),
            Outcome::Cancelled => (RunStatus::Cancelled, None, None),
        };
        let follow_up_ids: Vec<String> = follow_ups.iter().map(|f| f.run_id.clone()).collect();
        let chat = !hearth_agent::subagents::is_subagent(&run.thread_key);
        let replies = self.inner.replies.as_ref().filter(|_| chat).map(|router| {
            let error = error
                .as_ref()
                .map(|e| (e.code.as_str(), e.message.as_str()));
            router.on_finish(RunEnd {
                run,
                status,
                output: output.as_deref(),
                error,
            })
        });
        let replies = replies.unwrap_or_default();
        let store = self.store_of_run(&run.run_id);
        let incognito = !Arc::ptr_eq(&store, &self.inner.store);
        // An incognito run's answer cannot commit with its end (that store is
        // in memory): it is queued on disk right after, and erased once sent.
        let (with_end, after_end) = if incognito {
            (Vec::new(), replies)
        } else {
            (replies, Vec::new())
        };
        let channels: Vec<String> = with_end
            .iter()
            .chain(&after_end)
            .map(|item| item.channel.clone())
            .collect();
        let finish = RunFinish {
            run_id: run.run_id.clone(),
            status,
            output: output.clone(),
            error_code: error.as_ref().map(|e| e.code.clone()),
            error_message: error.as_ref().map(|e| e.message.clone()),
            messages,
            steps,
            follow_ups,
            finished_at: now_ms(),
            // The terminal event is the next one this log pushes.
            last_event_seq: Some(log.last_seq() + 1),
            outbox: with_end,
            arm_observations: self.take_observations(&run.run_id),
            model: models.model,
            requested_model: models.requested_model,
            executed_elsewhere: models.executed_elsewhere,
        };
        let observed = finish.arm_observations.clone();
        if incognito {
            // Follow-ups are made in the same store; know them before they exist.
            for id in &follow_up_ids {
                self.inner.incognito.add_run(id);
            }
        }
        let (mut status, mut output, mut error) = (status, output, error);
        // Until its log is told, the run's end announced by the database is
        // this one (see `ended_elsewhere`).
        let _ending = self.inner.wakeups.ending_here(&run.run_id);
        let childless = matches!(leftover, Leftover::Nothing)
            || matches!(&leftover, Leftover::Known(children) if children.is_empty());
        match store.finish_run_returning(finish).await {
            Ok(hearth_store::Finished {
                ended: true,
                next_queued,
                run: stored,
            }) => {
                if let Some(stored) = stored.filter(|_| childless) {
                    log.set_ended(stored);
                }
                self.observed(&observed);
                if incognito {
                    self.count_incognito_usage(&store, &run.run_id).await;
                    if !after_end.is_empty()
                        && let Err(e) = self.inner.store.enqueue_outbox(after_end, now_ms()).await
                    {
                        warn!(run_id = %run.run_id, error = %e, "could not queue the answer of an incognito run for its channel");
                    }
                }
                if let Some(router) = self.inner.replies.as_ref() {
                    for channel in &channels {
                        router.committed(channel);
                    }
                }
                // A child's answer goes to its parent alone: one still
                // running (started without waiting, or past a wait's
                // timeout, perhaps asking a question) has nobody to answer
                // now, and would spend and ask for nothing.
                match leftover {
                    Leftover::Nothing => {}
                    Leftover::Known(children) => self.cancel_running(&children).await,
                    Leftover::Unknown => Box::pin(self.cancel_children(run)).await,
                }
                self.schedule_follow_ups(&run.thread_key, &follow_up_ids)
                    .await;
                if follow_up_ids.is_empty() && !incognito {
                    // Another replica may have queued the thread's next
                    // message: it starts here now, not at a wake-up.
                    self.take_next_of_thread(&run.thread_key, next_queued != Some(false))
                        .await;
                }
            }
            Ok(hearth_store::Finished { ended: false, .. }) => {
                // Ended by someone else first (a new session cancels in the
                // same transaction that clears the history): followers are
                // told what the store holds, not what this run would have said.
                if let Ok(Some(stored)) = store.get_run(&run.run_id).await
                    && stored.status != status
                {
                    status = stored.status;
                    output = stored.output;
                    error = stored.error_code.map(|code| RunError {
                        code,
                        message: stored.error_message.unwrap_or_default(),
                    });
                }
                if !incognito {
                    // That end kept this replica's lease, holding the thread
                    // until the run stopped here: it has.
                    self.let_go(&run.run_id, &run.thread_key).await;
                }
            }
            Err(e) => {
                // The run stays unfinished in the store. This process stops
                // renewing its lease (it is no longer executing), so the
                // recovery sweep runs it again; followers are told now rather
                // than left hanging.
                warn!(run_id = %run.run_id, error = %e, "could not store the end of a run; recovery will run it again");
                log.push(
                    RunEventKind::Failed,
                    json!({ "run_id": run.run_id, "error": { "code": "store_error", "message": e.to_string() } }),
                    Some(RunStatus::Failed),
                );
                self.inner.bus.finished(&run.run_id);
                return;
            }
        }
        let (kind, data) = match status {
            RunStatus::Succeeded => (
                RunEventKind::Succeeded,
                json!({ "run_id": run.run_id, "output": { "text": output.unwrap_or_default() } }),
            ),
            RunStatus::Failed => {
                if let Some(e) = &error {
                    // Once per failed run, so an operator sees provider and
                    // configuration failures in the server's log.
                    warn!(run_id = %run.run_id, thread_key = %run.thread_key, code = %e.code, error = %e.message, "run failed");
                }
                (
                    RunEventKind::Failed,
                    json!({ "run_id": run.run_id, "error": error }),
                )
            }
            _ => (RunEventKind::Cancelled, json!({ "run_id": run.run_id })),
        };
        if status == RunStatus::Failed {
            self.inner.notices.publish(crate::notices::Notice {
                event: crate::notices::RUN_FAILED.to_owned(),
                at: now_ms(),
                data: json!({
                    "run_id": run.run_id,
                    "thread_key": run.thread_key,
                    "source": run.source,
                    "code": error.as_ref().map_or("unknown", |e| e.code.as_str()),
                }),
            });
        }
        self.job_run_ended(run, status, error.as_ref());
        self.inner.scheduler.ended(&run.run_id);
        log.push(kind, data, Some(status));
        self.inner.bus.finished(&run.run_id);
        metrics::counter!("hearth_runs_total", "status" => status.as_str()).increment(1);
        self.check_spend().await;
        let secs = (now_ms() - run.created_at).max(0) as f64 / 1000.0;
        metrics::histogram!("hearth_run_duration_seconds").record(secs);
    }

    /// Queues runs that `finish_run` created, in their commit order, holding
    /// the thread's ingest lock as ingest does.
    async fn schedule_follow_ups(&self, thread_key: &str, follow_ups: &[String]) {
        if follow_ups.is_empty() {
            return;
        }
        let lock = self.inner.scheduler.ingest_lock(thread_key);
        let _guard = lock.lock().await;
        for run_id in follow_ups {
            let log = self.inner.bus.open(run_id, RunStatus::Queued);
            log.push(
                RunEventKind::Queued,
                json!({ "run_id": run_id, "thread_key": thread_key }),
                None,
            );
            self.schedule(thread_key, run_id);
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
        context_window: caps.context_window,
        model,
        provider,
    }
}

/// What a run's end records beyond its outcome: the model that produced its
/// answer and, when failover or the router made it differ, the one the run
/// was asked to use; and whether a process that is not executing the run
/// ends it (`RunFinish::executed_elsewhere`).
#[derive(Debug, Default, PartialEq, Eq)]
struct EndDetails {
    model: Option<String>,
    requested_model: Option<String>,
    executed_elsewhere: bool,
}

/// The last model call that answered names the model of the answer; none
/// answered (a failure, a direct call) leaves the run's model as claimed.
fn answered_by(calls: &[hearth_agent::ModelCall], requested: String) -> EndDetails {
    let Some(model) = calls
        .iter()
        .rev()
        .find(|c| c.answered)
        .map(|c| c.model.clone())
    else {
        return EndDetails::default();
    };
    let requested_model = (model != requested).then_some(requested);
    EndDetails {
        model: Some(model),
        requested_model,
        executed_elsewhere: false,
    }
}
