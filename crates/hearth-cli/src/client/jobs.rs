//! `hearth jobs list|add|rm|run`, over HTTP like the other client commands.

use hearth_core::RunEnvelope;
use hearth_server::routes::jobs::{Job, JobList};
use reqwest::Method;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::JobsCommand;
use crate::output::{print_json, table};

/// Lists, adds, removes and fires jobs.
pub(super) async fn jobs(api: &Api, command: JobsCommand, json_out: bool) -> Result<(), Exit> {
    match command {
        JobsCommand::List => {
            let list: JobList = api.get("/v1/jobs").await?;
            if json_out {
                print_json(&list);
            } else if list.jobs.is_empty() {
                println!("no jobs");
            } else {
                let rows: Vec<Vec<String>> = list.jobs.iter().map(row).collect();
                print!(
                    "{}",
                    table(
                        &["ID", "NAME", "SCHEDULE", "TZ", "THREAD", "NEXT", "ENABLED"],
                        &[false; 7],
                        &rows
                    )
                );
            }
        }
        JobsCommand::Add {
            name,
            schedule,
            timezone,
            thread,
            user,
            catch_up,
            text,
        } => {
            let body = json!({
                "name": name, "schedule": schedule, "timezone": timezone,
                "thread_key": thread, "user_key": user, "text": text, "catch_up": catch_up,
            });
            let job: Job = api.post("/v1/jobs", &body).await?;
            if json_out {
                print_json(&job);
            } else {
                println!(
                    "added job {} ({}), next run {}",
                    job.id,
                    job.name,
                    job.next_run_at.as_deref().unwrap_or("never")
                );
            }
        }
        JobsCommand::Rm { id } => {
            let path = format!("/v1/jobs/{}", enc(&id));
            let job: Job = api.call(api.request(Method::DELETE, &path)).await?;
            if json_out {
                print_json(&job);
            } else {
                println!("removed job {} ({})", job.id, job.name);
            }
        }
        JobsCommand::Run { id } => {
            let path = format!("/v1/jobs/{}/run", enc(&id));
            let env: RunEnvelope = api.call(api.request(Method::POST, &path)).await?;
            if json_out {
                print_json(&env);
            } else {
                println!("started run {} on {}", env.run_id, env.thread_key);
            }
        }
    }
    Ok(())
}

fn row(j: &Job) -> Vec<String> {
    vec![
        j.id.clone(),
        j.name.clone(),
        j.schedule.clone(),
        j.timezone.clone(),
        j.thread_key.clone(),
        j.next_run_at.clone().unwrap_or_else(|| "-".into()),
        j.enabled.to_string(),
    ]
}
