//! Stored run records rendered as the API's run envelope.

use hearth_core::{
    JOB_SOURCE, RunEnvelope, RunError, RunOutput, RunStatus, parse_job_firing_key, rfc3339,
};
use hearth_store::RunRecord;

/// The envelope of a stored run.
pub fn envelope(r: &RunRecord) -> RunEnvelope {
    // A job's run carries its job and instant in its idempotency key.
    let fired = match (r.source.as_str(), &r.idempotency_key) {
        (JOB_SOURCE, Some(key)) => parse_job_firing_key(key),
        _ => None,
    };
    RunEnvelope {
        run_id: r.run_id.clone(),
        thread_key: r.thread_key.clone(),
        user_key: r.user_key.clone(),
        status: r.status,
        output: match (r.status, &r.output) {
            (RunStatus::Succeeded, Some(text)) => Some(RunOutput { text: text.clone() }),
            _ => None,
        },
        error: r.error_code.as_ref().map(|code| RunError {
            code: code.clone(),
            message: r.error_message.clone().unwrap_or_default(),
        }),
        confirmation: None,
        model: r.model.clone(),
        requested_model: r.requested_model.clone(),
        source: r.source.clone(),
        job_id: fired.map(|(id, _)| id.to_owned()),
        scheduled_at: fired.map(|(_, at)| at.to_owned()),
        created_at: rfc3339(r.created_at),
        updated_at: rfc3339(r.updated_at),
        parent_run_id: r.parent_run_id.clone(),
        children: Vec::new(),
    }
}
