//! Ingest: a message is validated, stored, and only then acknowledged and
//! queued.

use hearth_agent::firewall::SecretScanner;
use hearth_agent::policy::{parse_subject, validate_scope};
use hearth_agent::subagents::MARKER;
use hearth_core::{DeliveryMode, Inbound, RunEnvelope, RunEventKind, RunStatus, now_ms};
use hearth_store::{CreateRunOutcome, NewRun, RunClaim};
use serde_json::json;
use tracing::info;

use crate::confirmations::Sender;
use crate::envelope::envelope;
use crate::error::{Result, RuntimeError};
use crate::runtime::{Runtime, check_key, lease_ms};
use crate::supplied::RunOverrides;

/// How long a steer whose run stopped taking steers waits for that run's end
/// to learn whether the run saw it.
const STEER_SETTLE: std::time::Duration = std::time::Duration::from_secs(30);

/// What an overloaded hearth suggests as the wait before a retry.
const OVERLOADED_RETRY_AFTER_SECS: u64 = 1;

/// The most role ids a message may carry (Discord allows 250 roles per
/// guild), so a run's stored context stays small.
const MAX_ROLES: usize = 250;

/// Refuses a permission context a surface built wrong: a scope grants cannot
/// be looked up in, or role ids that cannot be grant subjects.
fn check_context(inbound: &Inbound) -> Result<()> {
    if let Some(scope) = &inbound.scope {
        validate_scope(scope).map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
    }
    if inbound.roles.len() > MAX_ROLES {
        return Err(RuntimeError::InvalidInput(format!(
            "roles holds {} ids; at most {MAX_ROLES} are accepted",
            inbound.roles.len()
        )));
    }
    for role in &inbound.roles {
        parse_subject(&format!("role:{role}"))
            .map_err(|e| RuntimeError::InvalidInput(e.to_string()))?;
    }
    Ok(())
}

/// Refuses a message from outside that claims to be a sub-agent's task:
/// only a `delegate` call starts those (a false one would be listed among a
/// run's children), and only it writes to a sub-agent's thread
/// (`<thread>/sub/<n>`), whose runs spend from the root thread's budget
/// pools: a message sent there from outside could charge another thread.
pub(crate) fn refuse_delegate_source(inbound: &Inbound) -> Result<()> {
    if inbound.source == hearth_core::DELEGATE_SOURCE {
        return Err(RuntimeError::InvalidInput(format!(
            "source {:?} is reserved for sub-agents started by the delegate tool; name another \
             source",
            inbound.source
        )));
    }
    if inbound.thread_key.as_str().contains(MARKER) {
        return Err(RuntimeError::InvalidInput(format!(
            "thread key {:?} names a sub-agent's thread (it contains {MARKER:?}); only the \
             delegate tool sends there: pick a key without it",
            inbound.thread_key.as_str()
        )));
    }
    Ok(())
}

impl Runtime {
    /// Accepts a message: stored before this returns; a duplicate idempotency
    /// key returns the run it made before.
    pub async fn ingest(&self, inbound: Inbound) -> Result<RunEnvelope> {
        refuse_delegate_source(&inbound)?;
        self.ingest_inner(inbound, RunOverrides::default()).await
    }

    /// `ingest`, with the overrides (if any) kept for the new run.
    pub(crate) async fn ingest_inner(
        &self,
        mut inbound: Inbound,
        overrides: RunOverrides,
    ) -> Result<RunEnvelope> {
        if self.is_shutting_down() {
            return Err(RuntimeError::ShuttingDown);
        }
        if inbound.text.trim().is_empty() {
            return Err(RuntimeError::InvalidInput("text must not be empty".into()));
        }
        // The thread and user keys were checked where they were made.
        check_key("source", &inbound.source)?;
        if inbound.source == crate::direct::DIRECT_SOURCE {
            return Err(RuntimeError::InvalidInput(format!(
                "source {:?} is reserved for direct tool calls (POST /v1/mcp/servers/{{name}}/call); \
                 name another source",
                inbound.source
            )));
        }
        if let Some(k) = &inbound.idempotency_key {
            check_key("idempotency_key", k)?;
        }
        check_context(&inbound)?;
        // Only the sender's own turn answers or denies what the thread waits
        // for: not a job firing, not a client's background task.
        let turn = (!overrides.background).then(|| Sender {
            user_key: inbound.user_key.to_string(),
            roles: inbound.roles.clone(),
        });
        // Read before redaction: a token is random enough to look like a secret.
        if turn.is_some()
            && let Some(env) = self.confirmation_command(&inbound).await?
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
            if let Some(sender) = &turn {
                self.deny_pending_on_thread(&inbound.thread_key, sender, None)
                    .await;
            }
            if self.inner.scheduler.send_steer(
                &inbound.thread_key,
                &run_id,
                steer.id,
                &inbound.text,
            ) || self.steer_answered_by(&run_id, steer.id).await
            {
                return self.get_run(&run_id).await;
            }
        }
        let queued = self.inner.scheduler.len();
        if queued >= self.inner.options.max_queued {
            metrics::counter!("hearth_runs_refused_total", "reason" => "overloaded").increment(1);
            return Err(RuntimeError::Overloaded {
                queued,
                retry_after_secs: OVERLOADED_RETRY_AFTER_SECS,
            });
        }
        let thread_key = inbound.thread_key.clone();
        let env = self.ingest_stored(inbound, overrides, false).await?;
        // Stored first: an ordinary message denies what the thread waits for
        // only once it is safe.
        if let Some(sender) = &turn {
            self.deny_pending_on_thread(&thread_key, sender, Some(&env.run_id))
                .await;
        }
        Ok(env)
    }

    /// Stores a validated message as a new run (or finds its idempotent twin) and queues it;
    /// `direct` marks it a direct tool call (`crate::direct`).
    pub(crate) async fn ingest_stored(
        &self,
        inbound: Inbound,
        overrides: RunOverrides,
        direct: bool,
    ) -> Result<RunEnvelope> {
        let lock = self.inner.scheduler.ingest_lock(&inbound.thread_key);
        let guard = lock.lock().await;
        let incognito = self.inner.incognito.is_thread(&inbound.thread_key);
        let store = if incognito {
            // Another replica's thread in its memory: refused, naming it.
            self.hold_incognito(&inbound.thread_key).await?;
            self.inner.incognito.store().await?
        } else {
            self.inner.store.clone()
        };
        let new_run = NewRun {
            run_id: hearth_core::new_run_id(),
            thread_key: inbound.thread_key.into_string(),
            user_key: inbound.user_key.into_string(),
            source: inbound.source,
            input: inbound.text,
            idempotency_key: inbound.idempotency_key,
            created_at: now_ms(),
            scope: inbound.scope,
            roles: inbound.roles,
            parent_run_id: overrides.parent_run_id.clone(),
        };
        // A thread with nothing else to run here runs this message next: it
        // is stored claimed, with its model, in one commit instead of a
        // store and then a claim. Not for a direct call (it has no model)
        // nor for the in-memory incognito store. A routed run is routed
        // now, from the message (kept for its worker too, should it have
        // to prepare it again).
        let live = self.inner.live();
        self.remember_route_input(&new_run.run_id, &new_run.input, &new_run.user_key);
        let new_id = new_run.run_id.clone();
        // On a shared store the thread's settings are not read first: the
        // run is prepared from the defaults, and the insert stores it
        // claimed only if its thread has no settings of its own, else held
        // for the worker to prepare (most threads have none, and the read
        // was a statement of every run). A sub-agent's thread has none.
        let assumed = self.inner.store.cluster().is_some() && overrides.parent_run_id.is_none();
        let prepared = if !direct
            && !incognito
            && !self.is_shutting_down()
            && self.inner.scheduler.is_idle(&new_run.thread_key)
        {
            // A failure here is left to the worker, which prepares again and
            // fails the run with the reason.
            let (run_id, thread_key) = (&new_run.run_id, &new_run.thread_key);
            if assumed {
                self.prepare_assuming_defaults(&live, run_id, thread_key, &overrides)
                    .await
            } else {
                self.prepare(&live, run_id, thread_key, &overrides).await
            }
            .ok()
        } else {
            None
        };
        let owner = &self.inner.options.owner;
        let until = new_run.created_at + lease_ms(&self.inner.options);
        // On a shared store a run this replica starts next is stored claimed
        // also when it is not prepared here (a direct call, a routed run, a
        // preparation that failed): stored queued, its insert would offer it
        // to every replica, and another could take it without what this one
        // holds for it (its overrides). Its worker claims it again and
        // records its model.
        // A sub-agent is held so too, on any store: its mode is recorded
        // with it (a child recovered after a restart has nothing else to
        // keep it by).
        let hold = prepared.is_none()
            && !incognito
            && !self.is_shutting_down()
            && (self.inner.store.cluster().is_some() || overrides.parent_run_id.is_some())
            && self.inner.scheduler.is_idle(&new_run.thread_key);
        // What the insert saw of the thread's stored history, when the
        // store says.
        let mut history_seen = None;
        // A run stored queued on a shared store may be claimed by another
        // replica: what the client supplied goes with it, or that replica
        // would run it with the thread's model and history.
        let carried = if self.inner.store.cluster().is_some() && !incognito {
            overrides.carried()
        } else {
            None
        };
        let outcome = match (&prepared, carried) {
            (prepared, Some(carried)) => {
                let model = prepared.as_ref().map(|p| p.model.to_string());
                let claim = match (prepared, &model) {
                    (Some(p), Some(model)) => Some(RunClaim {
                        owner,
                        lease_until: until,
                        model,
                        mode: Some(p.mode.as_str()),
                        assumes_defaults: assumed,
                    }),
                    _ => hold.then(|| RunClaim {
                        owner,
                        lease_until: until,
                        model: "",
                        mode: overrides.mode.as_deref(),
                        assumes_defaults: false,
                    }),
                };
                store
                    .create_run_supplied(new_run, claim, &carried)
                    .await
                    .map(|(outcome, seen)| {
                        history_seen = seen;
                        outcome
                    })
            }
            (Some(p), None) => {
                let model = p.model.to_string();
                let mode = Some(p.mode.as_str());
                if assumed {
                    store
                        .create_claimed_run_assuming_defaults(new_run, owner, until, &model, mode)
                        .await
                } else {
                    store
                        .create_claimed_run_seeing_history(new_run, owner, until, &model, mode)
                        .await
                }
                .map(|(outcome, seen)| {
                    history_seen = seen;
                    outcome
                })
            }
            // No model yet: the store keeps none.
            (None, None) if hold => store
                .create_claimed_run_seeing_history(
                    new_run,
                    owner,
                    until,
                    "",
                    overrides.mode.as_deref(),
                )
                .await
                .map(|(outcome, seen)| {
                    history_seen = seen;
                    outcome
                }),
            (None, None) => store.create_run(new_run).await,
        };
        let run = match outcome {
            Ok(CreateRunOutcome::Existing(run)) => {
                // Its twin was routed (or is) as its own run.
                self.forget_route_input(&new_id);
                return Ok(envelope(&run));
            }
            Ok(CreateRunOutcome::Created(run)) => run,
            Err(e) => {
                self.forget_route_input(&new_id);
                return Err(e.into());
            }
        };
        if incognito {
            self.inner.incognito.add_run(&run.run_id);
        }
        // Stored claimed with its model; one stored held (its thread had
        // settings the defaults did not match) has none, and its worker
        // prepares it from them and claims it again.
        let ours = run.lease_owner.as_deref() == Some(owner.as_str());
        let with_model = run.model.as_deref().is_some_and(|m| !m.is_empty());
        if ours && !with_model {
            self.inner.held.put(
                &run.run_id,
                crate::claimed_here::HeldRun {
                    lease_until: until,
                    history_seen,
                },
            );
        }
        if let Some(prepared) = prepared
            && ours
            && with_model
        {
            // Its lease is renewed from now on, as any claimed run's.
            self.inner.executing_insert(&run.run_id);
            // Stored claimed: nothing else writes its thread's history
            // before this run ends, so what the insert saw of it holds.
            self.inner
                .preclaimed
                .put(live, run.clone(), prepared, history_seen);
        }
        // Before it is scheduled: its worker takes them when it starts.
        self.inner.supplied.put(&run.run_id, overrides);
        if direct {
            self.inner.direct.put(&run.run_id);
        }
        metrics::counter!("hearth_runs_accepted_total").increment(1);
        let log = self.inner.bus.open(&run.run_id, RunStatus::Queued);
        log.push(
            RunEventKind::Queued,
            json!({ "run_id": run.run_id, "thread_key": run.thread_key }),
            None,
        );
        let env = envelope(&run);
        self.schedule(&run.thread_key, &run.run_id);
        drop(guard);
        drop(lock);
        Ok(env)
    }

    /// Whether `run_id`, whose inbox no longer takes steers (it ended or is
    /// ending), showed the stored steer `steer_id` to its model anyway: a run
    /// that starts reads its stored steers, so one stored just before can
    /// reach it that way. Then the run answered it, and it must not become a
    /// new run too.
    async fn steer_answered_by(&self, run_id: &str, steer_id: i64) -> bool {
        if let Some(log) = self.inner.bus.get(run_id) {
            let mut rx = log.subscribe();
            let ended = rx.wait_for(|(_, st)| st.is_terminal());
            if tokio::time::timeout(STEER_SETTLE, ended).await.is_err() {
                return false;
            }
        }
        let steps = match self.store_of_run(run_id).steps(run_id).await {
            Ok(steps) => steps,
            Err(_) => return false,
        };
        steps.iter().any(|s| {
            s.payload["steered"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x["id"].as_i64() == Some(steer_id)))
        })
    }
}
