//! Scheduled jobs: `POST/GET /v1/jobs`, `GET/PATCH/DELETE /v1/jobs/{id}`
//! and `POST /v1/jobs/{id}/run`. The schedule logic and the ticker are the
//! runtime's; these only translate.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use hearth_core::records::jobs::JobRecord;
use hearth_core::{RunEnvelope, rfc3339};
use hearth_runtime::{CatchUp, NewJob};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::AppState;
use crate::error::ApiError;
use crate::extract::{ApiJson, ApiPath};

/// The user a job speaks as when the request names none.
const DEFAULT_USER_KEY: &str = "api:user:anonymous";

/// What a job does with firings missed while hearth was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CatchUpPolicy {
    /// One run for the most recent missed instant within 24 hours (default).
    Latest,
    /// A run for every missed instant (at most 100, the most recent).
    All,
    /// Skip what was missed.
    None,
}

impl From<CatchUpPolicy> for CatchUp {
    fn from(c: CatchUpPolicy) -> Self {
        match c {
            CatchUpPolicy::Latest => Self::Latest,
            CatchUpPolicy::All => Self::All,
            CatchUpPolicy::None => Self::None,
        }
    }
}

impl From<CatchUp> for CatchUpPolicy {
    fn from(c: CatchUp) -> Self {
        match c {
            CatchUp::Latest => Self::Latest,
            CatchUp::All => Self::All,
            CatchUp::None => Self::None,
        }
    }
}

/// `POST /v1/jobs`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// A name for people: 1 to 200 characters, not blank.
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = r"[^\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
    )]
    pub name: String,
    /// A cron expression (5 or 6 fields, read in `timezone`), `every <n><s|m|h|d>`
    /// (anchored at creation), or an RFC 3339 instant (fires once). One that
    /// does not parse or never fires is 400 `invalid_schedule`.
    #[schema(min_length = 1)]
    pub schedule: String,
    /// IANA time zone; default `UTC`. An unknown one is 400 `invalid_schedule`.
    pub timezone: Option<String>,
    /// The thread each firing posts to; its answer goes where the thread lives.
    #[schema(value_type = crate::schemas::Key)]
    pub thread_key: String,
    /// The user each firing speaks as; default `api:user:anonymous`.
    #[schema(value_type = Option<crate::schemas::Key>)]
    pub user_key: Option<String>,
    /// The message each firing sends: 1 to 16384 characters, not blank.
    #[schema(
        min_length = 1,
        max_length = 16384,
        pattern = r"[^\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]"
    )]
    pub text: String,
    /// Default `latest`.
    pub catch_up: Option<CatchUpPolicy>,
}

/// A job.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Job {
    /// Opaque id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// The schedule as given.
    pub schedule: String,
    /// IANA time zone.
    pub timezone: String,
    /// The thread it posts to.
    pub thread_key: String,
    /// The user it speaks as.
    pub user_key: String,
    /// The message.
    pub text: String,
    /// Missed firings policy.
    pub catch_up: CatchUpPolicy,
    /// RFC 3339; `null` once nothing is left to fire.
    pub next_run_at: Option<String>,
    /// RFC 3339 scheduled instant of the last firing.
    pub last_run_at: Option<String>,
    /// The run of the last firing.
    pub last_run_id: Option<String>,
    /// False once a one-shot job has fired.
    pub enabled: bool,
}

impl From<JobRecord> for Job {
    fn from(j: JobRecord) -> Self {
        Self {
            id: j.id,
            name: j.name,
            schedule: j.schedule,
            timezone: j.timezone,
            thread_key: j.thread_key,
            user_key: j.user_key,
            text: j.text,
            catch_up: j.catch_up.into(),
            next_run_at: j.next_run_at.map(rfc3339),
            last_run_at: j.last_run_at.map(rfc3339),
            last_run_id: j.last_run_id,
            enabled: j.enabled,
        }
    }
}

/// `GET /v1/jobs`
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    /// Oldest first.
    pub jobs: Vec<Job>,
}

/// Creates a job.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", request_body = JobRequest,
    responses((status = 201, description = "The job", body = Job),
        (status = 400, description = "Bad input (`invalid_request`), or a schedule or time zone that is refused (`invalid_schedule`), or a thread on a chat channel that is not enabled (`channel_disabled`)", body = crate::dto::ErrorBody)))]
pub async fn create_job(
    State(st): State<AppState>,
    ApiJson(body): ApiJson<JobRequest>,
) -> Result<(StatusCode, Json<Job>), ApiError> {
    let job = st
        .runtime
        .create_job(NewJob {
            name: body.name,
            schedule: body.schedule,
            timezone: body.timezone,
            thread_key: body.thread_key,
            user_key: body.user_key.unwrap_or_else(|| DEFAULT_USER_KEY.to_owned()),
            text: body.text,
            catch_up: body.catch_up.map_or(CatchUp::Latest, CatchUp::from),
        })
        .await?;
    Ok((StatusCode::CREATED, Json(job.into())))
}

/// Every job, oldest first.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs",
    responses((status = 200, description = "The jobs", body = JobList)))]
pub async fn list_jobs(State(st): State<AppState>) -> Result<Json<JobList>, ApiError> {
    let jobs = st.runtime.list_jobs().await?;
    Ok(Json(JobList {
        jobs: jobs.into_iter().map(Job::from).collect(),
    }))
}

/// One job.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id", min_length = 1)),
    responses((status = 200, description = "The job", body = Job),
        (status = 404, body = crate::dto::ErrorBody)))]
pub async fn get_job(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(st.runtime.get_job(&id).await?.into()))
}

/// Deletes a job; its runs stay.
#[utoipa::path(delete, path = "/v1/jobs/{id}", tag = "jobs",
    params(("id" = String, Path, description = "Job id", min_length = 1)),
    responses((status = 200, description = "The deleted job", body = Job),
        (status = 404, body = crate::dto::ErrorBody)))]
pub async fn delete_job(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(st.runtime.delete_job(&id).await?.into()))
}

/// Fires a job now, outside its schedule.
#[utoipa::path(post, path = "/v1/jobs/{id}/run", tag = "jobs",
    params(("id" = String, Path, description = "Job id", min_length = 1)),
    responses((status = 202, description = "The run it started", body = RunEnvelope),
        (status = 404, body = crate::dto::ErrorBody),
        (status = 503, description = "Shutting down or saturated", body = crate::dto::ErrorBody)))]
pub async fn run_job(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<String>,
) -> Result<(StatusCode, Json<RunEnvelope>), ApiError> {
    let env = st.runtime.run_job_now(&id).await?;
    Ok((StatusCode::ACCEPTED, Json(env)))
}

/// `PATCH /v1/jobs/{id}`
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobPatch {
    /// False: the job stops firing (its schedule is kept). True: it fires
    /// again from its next instant after now (missed ones are not caught up).
    pub enabled: bool,
}

/// Enables or disables a job.
#[utoipa::path(patch, path = "/v1/jobs/{id}", tag = "jobs", request_body = JobPatch,
    params(("id" = String, Path, description = "Job id", min_length = 1)),
    responses((status = 200, description = "The job as it is now", body = Job),
        (status = 400, description = "Bad input (`invalid_request`), or enabling a one-shot job whose instant has passed (`invalid_schedule`)", body = crate::dto::ErrorBody),
        (status = 404, body = crate::dto::ErrorBody)))]
pub async fn patch_job(
    State(st): State<AppState>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<JobPatch>,
) -> Result<Json<Job>, ApiError> {
    Ok(Json(
        st.runtime.set_job_enabled(&id, body.enabled).await?.into(),
    ))
}
