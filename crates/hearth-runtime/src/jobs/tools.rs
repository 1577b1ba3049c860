//! The model's job tools: `schedule_job`, `list_jobs` and `cancel_job`,
//! behind the `jobs.manage` capability. A job the model schedules posts to
//! the conversation it was scheduled from, as the user who asked; the model
//! sees and cancels only the jobs of that conversation and user.
//!
//! The tools are made with the runtime (the registry goes into the engine
//! the runtime is built from, in the same step), and hold it weakly: the
//! runtime owns the tools.

use std::sync::{Arc, Weak};

use hearth_core::{ToolSpec, rfc3339};
use hearth_store::{CatchUp, JobRecord};
use hearth_tools::{Tool, ToolClass, ToolContext, ToolError};
use serde_json::{Value, json};

use crate::jobs::NewJob;
use crate::runtime::{Inner, Runtime};

/// The capability every job tool needs.
const CAPABILITY: &str = "jobs.manage";

/// The runtime the job tools act on.
#[derive(Clone)]
pub(crate) struct JobTools {
    runtime: Weak<Inner>,
}

impl JobTools {
    /// The job tools of the runtime being made over `runtime`.
    pub(crate) fn new(runtime: Weak<Inner>) -> Self {
        Self { runtime }
    }

    /// The three tools.
    pub(crate) fn tools(&self) -> Vec<Arc<dyn Tool>> {
        vec![
            Arc::new(ScheduleJob::new(self.clone())),
            Arc::new(ListJobs::new(self.clone())),
            Arc::new(CancelJob::new(self.clone())),
        ]
    }

    fn runtime(&self) -> Result<Runtime, ToolError> {
        self.runtime
            .upgrade()
            .map(|inner| Runtime { inner })
            .ok_or_else(|| ToolError("scheduled jobs are not available in this process".into()))
    }
}

fn str_arg<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError(format!("`{key}` is required and must be a string")))
}

fn opt_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// A job as the model sees it.
fn shown(job: &JobRecord) -> Value {
    json!({
        "id": job.id,
        "name": job.name,
        "schedule": job.schedule,
        "timezone": job.timezone,
        "text": job.text,
        "catch_up": job.catch_up.as_str(),
        "next_run_at": job.next_run_at.map(rfc3339),
        "last_run_at": job.last_run_at.map(rfc3339),
        "enabled": job.enabled,
    })
}

/// Whether `job` belongs to the conversation and user of `ctx`.
fn owned(job: &JobRecord, ctx: &ToolContext) -> bool {
    job.thread_key == ctx.thread_key && job.user_key == ctx.user_key
}

/// `schedule_job`: a message posted to this conversation on a schedule.
pub struct ScheduleJob {
    spec: ToolSpec,
    jobs: JobTools,
}

impl ScheduleJob {
    fn new(jobs: JobTools) -> Self {
        Self {
            spec: ToolSpec {
                name: "schedule_job".into(),
                description: "Schedule a message to be sent to you in this conversation later \
                              or repeatedly, as if the user had sent it: a reminder, a daily \
                              briefing, a periodic check. You answer it when it fires. \
                              `schedule` is a cron expression (\"0 8 * * 1-5\": 08:00 on \
                              weekdays), `every <n><s|m|h|d>` (\"every 30m\"), or one RFC 3339 \
                              instant (\"2026-12-24T18:00:00+01:00\") for a one-off."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": 200,
                                 "description": "A short name, e.g. \"morning briefing\""},
                        "schedule": {"type": "string", "minLength": 1,
                                     "description": "Cron, `every <n><unit>` or an RFC 3339 instant"},
                        "timezone": {"type": "string",
                                     "description": "IANA time zone the schedule is read in, e.g. \"Europe/Paris\" (default UTC)"},
                        "text": {"type": "string", "minLength": 1, "maxLength": 16384,
                                 "description": "The message sent to you when it fires, e.g. \"Remind me to call Anna.\""},
                        "catch_up": {"type": "string", "enum": ["latest", "all", "none"],
                                     "description": "Firings missed while hearth was down: the latest (default), all, or none"}
                    },
                    "required": ["name", "schedule", "text"],
                    "additionalProperties": false
                }),
            },
            jobs,
        }
    }
}

#[async_trait::async_trait]
impl Tool for ScheduleJob {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Write
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    fn summary(&self, args: &Value) -> String {
        let tz = opt_str(args, "timezone")
            .map(|t| format!(" {t}"))
            .unwrap_or_default();
        let text: String = opt_str(args, "text")
            .unwrap_or("")
            .chars()
            .take(80)
            .collect();
        format!(
            "schedule job {:?} ({}{tz}): {text:?}",
            opt_str(args, "name").unwrap_or(""),
            opt_str(args, "schedule").unwrap_or("")
        )
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        if ctx.incognito {
            return Err(ToolError(
                "jobs cannot be scheduled from an incognito conversation: a job is stored".into(),
            ));
        }
        let catch_up = match opt_str(&args, "catch_up") {
            None => CatchUp::Latest,
            Some(c) => CatchUp::parse(c).ok_or_else(|| {
                ToolError(format!("catch_up {c:?} is not one of latest, all, none"))
            })?,
        };
        let job = self
            .jobs
            .runtime()?
            .create_job(NewJob {
                name: str_arg(&args, "name")?.to_owned(),
                schedule: str_arg(&args, "schedule")?.to_owned(),
                timezone: opt_str(&args, "timezone").map(str::to_owned),
                thread_key: ctx.thread_key.clone(),
                user_key: ctx.user_key.clone(),
                text: str_arg(&args, "text")?.to_owned(),
                catch_up,
            })
            .await
            .map_err(|e| ToolError(e.to_string()))?;
        Ok(json!({ "scheduled": shown(&job) }))
    }
}

/// `list_jobs`: the jobs of this conversation.
pub struct ListJobs {
    spec: ToolSpec,
    jobs: JobTools,
}

impl ListJobs {
    fn new(jobs: JobTools) -> Self {
        Self {
            spec: ToolSpec {
                name: "list_jobs".into(),
                description: "List the scheduled jobs of this conversation (reminders and \
                              recurring messages scheduled with schedule_job): their ids, \
                              schedules and next firing."
                    .into(),
                parameters: json!({"type": "object", "properties": {}, "additionalProperties": false}),
            },
            jobs,
        }
    }
}

#[async_trait::async_trait]
impl Tool for ListJobs {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    async fn call(&self, ctx: &ToolContext, _args: Value) -> Result<Value, ToolError> {
        let jobs = self
            .jobs
            .runtime()?
            .list_jobs()
            .await
            .map_err(|e| ToolError(e.to_string()))?;
        let mine: Vec<Value> = jobs.iter().filter(|j| owned(j, ctx)).map(shown).collect();
        Ok(json!({ "jobs": mine }))
    }
}

/// `cancel_job`: deletes one of this conversation's jobs.
pub struct CancelJob {
    spec: ToolSpec,
    jobs: JobTools,
}

impl CancelJob {
    fn new(jobs: JobTools) -> Self {
        Self {
            spec: ToolSpec {
                name: "cancel_job".into(),
                description: "Cancel a scheduled job of this conversation by its id (from \
                              list_jobs or schedule_job); it will not fire again."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {"id": {"type": "string", "minLength": 1,
                                          "description": "The job's id, job_..."}},
                    "required": ["id"],
                    "additionalProperties": false
                }),
            },
            jobs,
        }
    }
}

#[async_trait::async_trait]
impl Tool for CancelJob {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Write
    }

    fn capability(&self) -> Option<&'static str> {
        Some(CAPABILITY)
    }

    fn summary(&self, args: &Value) -> String {
        format!("cancel job {}", opt_str(args, "id").unwrap_or("?"))
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let id = str_arg(&args, "id")?;
        let rt = self.jobs.runtime()?;
        let not_here = || ToolError(format!("this conversation has no job {id}"));
        // Another conversation's job is as unknown as a job that never was.
        let job = rt.get_job(id).await.map_err(|e| match e {
            crate::RuntimeError::JobNotFound(_) => not_here(),
            other => ToolError(other.to_string()),
        })?;
        if !owned(&job, ctx) {
            return Err(not_here());
        }
        let job = rt
            .delete_job(id)
            .await
            .map_err(|e| ToolError(e.to_string()))?;
        Ok(json!({ "cancelled": shown(&job) }))
    }
}
