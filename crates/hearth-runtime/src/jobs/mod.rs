//! Scheduled jobs: stored schedules that post a message to a thread when
//! they fire. A firing is an ordinary `Inbound` (source `job`) whose
//! idempotency key is `job:<id>:<scheduled instant>`, so the store's
//! idempotency makes each instant fire once, also across restarts: the
//! ticker ingests first and moves the job's `next_run_at` after, and an
//! instant ingested twice returns the run it made the first time.
//!
//! The ticker sleeps until the earliest `next_run_at` (or a change to the
//! jobs) and runs once at start, which is when missed firings are caught up
//! per the job's `catch_up`.

mod schedule;
mod tools;

use std::sync::Arc;
use std::time::Duration;

use hearth_core::{
    DeliveryMode, Inbound, JOB_SOURCE, RunEnvelope, RunError, RunStatus, ThreadKey, Timestamp,
    UserKey, job_firing_key, now_ms, rfc3339,
};
use hearth_store::{JobFiring, JobRecord, NextFiring, RunRecord};
use serde_json::json;
use tracing::{info, warn};

use crate::error::{Result, RuntimeError};
use crate::notices::{JOB_FAILED, Notice};
use crate::runtime::{Runtime, check_key};
use crate::supplied::RunOverrides;

pub use schedule::{
    ALL_MAX, CatchUp, DEFAULT_TIMEZONE, Due, LATEST_WINDOW_MS, ON_TIME_MS, Schedule, ScheduleError,
    due,
};
pub(crate) use tools::JobTools;
pub use tools::{CancelJob, ListJobs, ScheduleJob};

/// The ticker looks at the jobs at least this often, so a clock that jumps
/// (suspend, NTP) is noticed without a change to the jobs.
const MAX_SLEEP: Duration = Duration::from_secs(30);
/// Longest job name, in characters.
const MAX_NAME_LEN: usize = 200;
/// Longest job text, in characters.
const MAX_TEXT_LEN: usize = 16 * 1024;

/// A job to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJob {
    /// A name for people.
    pub name: String,
    /// Cron (5 or 6 fields), `every <n><unit>` or an RFC 3339 instant.
    pub schedule: String,
    /// IANA time zone; UTC when `None`.
    pub timezone: Option<String>,
    /// The thread each firing posts to.
    pub thread_key: String,
    /// The user each firing speaks as.
    pub user_key: String,
    /// The message.
    pub text: String,
    /// Missed firings policy (default `latest`).
    pub catch_up: CatchUp,
}

/// The chat channel (`telegram`, `discord`, `slack` or `sms`) a thread belongs to,
/// if it belongs to one.
pub fn thread_channel(thread_key: &str) -> Option<&'static str> {
    let prefix = thread_key.split(':').next()?;
    hearth_core::CHANNEL_NAMES
        .iter()
        .copied()
        .find(|c| *c == prefix)
}

/// Why a job on `thread_key` cannot be kept: its channel is not enabled, so
/// no firing would reach anyone. The words job creation refuses with and
/// `hearth doctor` flags.
pub fn disabled_channel(thread_key: &str, channel: &str) -> String {
    format!(
        "thread {thread_key:?} is on the {channel} channel, which is not enabled: enable it          ([channels.{channel}] enabled = true) or post the job to another thread"
    )
}

impl Runtime {
    /// Validates and stores a job; it fires from its first instant after now.
    pub async fn create_job(&self, new: NewJob) -> Result<JobRecord> {
        check_text("name", &new.name, MAX_NAME_LEN)?;
        check_text("text", &new.text, MAX_TEXT_LEN)?;
        check_key("thread_key", &new.thread_key)?;
        check_key("user_key", &new.user_key)?;
        if let Some(channel) = thread_channel(&new.thread_key) {
            let enabled = self
                .channel_readiness()
                .iter()
                .any(|(name, _)| name.strip_prefix("channel:") == Some(channel));
            if !enabled {
                return Err(RuntimeError::ChannelDisabled(disabled_channel(
                    &new.thread_key,
                    channel,
                )));
            }
        }
        let timezone = new.timezone.unwrap_or_else(|| DEFAULT_TIMEZONE.to_owned());
        let created_at = now_ms();
        let schedule = Schedule::parse(&new.schedule, &timezone, created_at)?;
        let next_run_at = schedule
            .next_after(created_at)
            .ok_or_else(|| ScheduleError::NeverFires(new.schedule.clone()))?;
        let job = JobRecord {
            id: format!("job_{}", uuid::Uuid::now_v7().simple()),
            name: new.name,
            schedule: new.schedule,
            timezone,
            thread_key: new.thread_key,
            user_key: new.user_key,
            text: new.text,
            catch_up: new.catch_up,
            next_run_at: Some(next_run_at),
            last_run_at: None,
            last_run_id: None,
            enabled: true,
            created_at,
        };
        self.inner.store.create_job(job.clone()).await?;
        info!(job_id = %job.id, thread_key = %job.thread_key, next_run_at = %rfc3339(next_run_at), "job created");
        self.inner.jobs_wake.notify_one();
        Ok(job)
    }

    /// Every job, oldest first.
    pub async fn list_jobs(&self) -> Result<Vec<JobRecord>> {
        Ok(self.inner.store.list_jobs().await?)
    }

    /// One job.
    pub async fn get_job(&self, id: &str) -> Result<JobRecord> {
        self.inner
            .store
            .get_job(id)
            .await?
            .ok_or_else(|| RuntimeError::JobNotFound(id.to_owned()))
    }

    /// Deletes a job (its runs stay); returns it as it was.
    pub async fn delete_job(&self, id: &str) -> Result<JobRecord> {
        let job = self
            .inner
            .store
            .delete_job(id)
            .await?
            .ok_or_else(|| RuntimeError::JobNotFound(id.to_owned()))?;
        info!(job_id = %id, "job deleted");
        self.inner.jobs_wake.notify_one();
        Ok(job)
    }

    /// Turns a job on or off. A disabled job keeps its schedule but does
    /// not fire (nor catch up once enabled again): enabling plans its next
    /// instant after now. A one-shot job that fired (or whose instant has
    /// passed) has nothing left to fire, so enabling it is refused
    /// (`InvalidSchedule`).
    pub async fn set_job_enabled(&self, id: &str, enabled: bool) -> Result<JobRecord> {
        let job = self.get_job(id).await?;
        let next_run_at = if enabled {
            let schedule = Schedule::parse(&job.schedule, &job.timezone, job.created_at)?;
            Some(
                schedule
                    // Not before an instant already fired: a one-shot job
                    // that fired has nothing left.
                    .next_after(now_ms().max(job.last_run_at.unwrap_or(i64::MIN)))
                    .ok_or_else(|| ScheduleError::NeverFires(job.schedule.clone()))?,
            )
        } else {
            None
        };
        let kept = self
            .inner
            .store
            .record_job_firing(JobFiring {
                job_id: job.id.clone(),
                fired: None,
                next: Some(NextFiring {
                    next_run_at,
                    enabled,
                }),
            })
            .await?;
        if !kept {
            return Err(RuntimeError::JobNotFound(id.to_owned()));
        }
        info!(job_id = %id, enabled, "job enabled or disabled");
        self.inner.jobs_wake.notify_one();
        self.get_job(id).await
    }

    /// Fires a job now, outside its schedule (the instant is now); its
    /// schedule is unchanged: only the ticker moves it, so a firing by hand
    /// records its run and nothing it read before firing.
    pub async fn run_job_now(&self, id: &str) -> Result<RunEnvelope> {
        let job = self.get_job(id).await?;
        let at = now_ms();
        let env = self.fire(&job, at).await?;
        self.inner
            .store
            .record_job_firing(JobFiring {
                job_id: job.id.clone(),
                fired: Some((at, env.run_id.clone())),
                next: None,
            })
            .await?;
        Ok(env)
    }

    /// Starts the ticker (called by `start`): a first pass at once, which
    /// catches up what was missed while hearth was down.
    pub(crate) fn start_jobs(&self) {
        let weak = Arc::downgrade(&self.inner);
        // Held apart from the runtime, so the sleeping ticker does not keep
        // a dropped runtime alive.
        let wake = Arc::clone(&self.inner.jobs_wake);
        tokio::spawn(async move {
            // The earliest instant a job is due, from the last look at the
            // jobs, and whether to look again (at first, after a wake-up,
            // and while another replica holds the duty).
            let mut next: Option<Timestamp> = None;
            let mut look = true;
            loop {
                let Some(inner) = weak.upgrade() else { return };
                let rt = Runtime { inner };
                if rt.is_shutting_down() {
                    return;
                }
                let now = now_ms();
                // On a shared store one replica at a time fires the jobs (a
                // firing's key would stop a second run anyway); the others
                // try for the duty each round, in case the holder died, and
                // the holder renews it each round, reading the jobs only
                // when one is due or a job changed.
                if rt.holds_duty(crate::cluster::JOBS, now).await {
                    if look || next.is_some_and(|at| at <= now) {
                        next = rt.tick_jobs(now).await;
                    }
                    look = false;
                } else {
                    next = None;
                    look = true;
                }
                let round = rt.inner.store.cluster().map(|_| {
                    Duration::from_millis(
                        u64::try_from(crate::runtime::lease_ms(&rt.inner.options) / 3)
                            .unwrap_or(1_000),
                    )
                });
                drop(rt);
                let mut sleep = next
                    .map(|at| Duration::from_millis(u64::try_from(at - now).unwrap_or(0)))
                    .unwrap_or(MAX_SLEEP)
                    .min(MAX_SLEEP);
                if let Some(round) = round {
                    sleep = sleep.min(round);
                }
                tokio::select! {
                    () = tokio::time::sleep(sleep) => {}
                    () = wake.notified() => look = true,
                }
            }
        });
    }

    /// Fires what is due at `now` and records each job's next instant;
    /// returns the earliest next instant of any enabled job. `now` is a
    /// parameter so tests can move the clock.
    pub async fn tick_jobs(&self, now: Timestamp) -> Option<Timestamp> {
        let jobs = match self.inner.store.list_jobs().await {
            Ok(jobs) => jobs,
            Err(e) => {
                warn!(error = %e, "could not read the jobs; retrying shortly");
                return Some(now + 1_000);
            }
        };
        let mut earliest: Option<Timestamp> = None;
        for job in jobs {
            if !job.enabled {
                continue;
            }
            let next = match job.next_run_at {
                Some(at) if at <= now => self.tick_job(&job, at, now).await,
                other => other,
            };
            if let Some(at) = next {
                earliest = Some(earliest.map_or(at, |e| e.min(at)));
            }
        }
        earliest
    }

    /// Fires one due job; returns its next instant while it stays enabled.
    async fn tick_job(
        &self,
        job: &JobRecord,
        next_run_at: Timestamp,
        now: Timestamp,
    ) -> Option<Timestamp> {
        let schedule = match Schedule::parse(&job.schedule, &job.timezone, job.created_at) {
            Ok(s) => s,
            Err(e) => {
                // Validated at creation; only a tz database change gets here.
                warn!(job_id = %job.id, error = %e, "a job's schedule no longer parses; disabling it");
                self.record(job, None, None, false).await;
                return None;
            }
        };
        let due = due(&schedule, job.catch_up, next_run_at, now);
        if due.skipped > 0 {
            info!(job_id = %job.id, skipped = due.skipped, catch_up = job.catch_up.as_str(), "job skipped missed firings");
        }
        let mut last = None;
        for at in due.fire {
            match self.fire(job, at).await {
                Ok(env) => last = Some((at, env.run_id)),
                Err(e) => {
                    // Not moved past: the next pass tries this instant again.
                    warn!(job_id = %job.id, scheduled_at = %rfc3339(at), error = %e, "could not fire a job; retrying");
                    self.record(job, last, Some(at), true).await;
                    return Some(now + 1_000);
                }
            }
        }
        let enabled = !(schedule.is_once() && due.next_run_at.is_none());
        let next = due.next_run_at.filter(|_| enabled);
        self.record(job, last, next, enabled).await;
        next
    }

    async fn record(
        &self,
        job: &JobRecord,
        fired: Option<(Timestamp, String)>,
        next_run_at: Option<Timestamp>,
        enabled: bool,
    ) {
        let firing = JobFiring {
            job_id: job.id.clone(),
            fired,
            next: Some(NextFiring {
                next_run_at,
                enabled,
            }),
        };
        if let Err(e) = self.inner.store.record_job_firing(firing).await {
            // The runs exist; the next pass re-plans from the old instant
            // and their idempotency keys keep them from repeating.
            warn!(job_id = %job.id, error = %e, "could not record a job's firing");
        }
    }

    /// Ingests one firing of `job` for the instant `at`.
    async fn fire(&self, job: &JobRecord, at: Timestamp) -> Result<RunEnvelope> {
        // A firing is not its owner's turn: it leaves the confirmations the
        // thread waits for alone (neither answers nor denies them).
        let background = RunOverrides {
            background: true,
            ..RunOverrides::default()
        };
        let env = self
            .ingest_inner(
                Inbound {
                    source: JOB_SOURCE.to_owned(),
                    // Checked when the job was created.
                    thread_key: ThreadKey::new(job.thread_key.as_str())?,
                    user_key: UserKey::new(job.user_key.as_str())?,
                    text: job.text.clone(),
                    delivery_mode: DeliveryMode::FollowUp,
                    idempotency_key: Some(job_firing_key(&job.id, at)),
                    // The channel that owns the thread reports its scope; a job
                    // carries no platform roles.
                    scope: None,
                    roles: Vec::new(),
                },
                background,
            )
            .await?;
        info!(job_id = %job.id, run_id = %env.run_id, scheduled_at = %rfc3339(at), "job fired");
        Ok(env)
    }

    /// Called with every run's end: a failed job run publishes `job.failed`.
    pub(crate) fn job_run_ended(
        &self,
        run: &RunRecord,
        status: RunStatus,
        error: Option<&RunError>,
    ) {
        if status != RunStatus::Failed || run.source != JOB_SOURCE {
            return;
        }
        let env = crate::envelope::envelope(run);
        let Some(job_id) = env.job_id else { return };
        let code = error.map_or("unknown", |e| e.code.as_str());
        self.inner.notices.publish(Notice {
            event: JOB_FAILED.to_owned(),
            at: now_ms(),
            data: json!({
                "job_id": job_id,
                "run_id": run.run_id,
                "thread_key": run.thread_key,
                "scheduled_at": env.scheduled_at,
                "code": code,
            }),
        });
    }
}

/// Characters are counted, as the OpenAPI document's `maxLength` counts them.
fn check_text(name: &str, value: &str, max: usize) -> Result<()> {
    if value.trim().is_empty() || value.chars().count() > max {
        return Err(RuntimeError::InvalidInput(format!(
            "{name} must be 1 to {max} characters and not blank"
        )));
    }
    Ok(())
}
