//! The idempotency key of a job's firing, `job:<id>:<scheduled instant>`:
//! one firing of one instant makes one run, also across restarts, and the
//! run envelope reads its job and instant back from it.

use crate::time::{Timestamp, rfc3339};

/// The `source` of runs fired by jobs.
pub const JOB_SOURCE: &str = "job";

/// The idempotency key of `job_id`'s firing of the instant `at`.
pub fn job_firing_key(job_id: &str, at: Timestamp) -> String {
    format!("job:{job_id}:{}", rfc3339(at))
}

/// The job id and scheduled instant (RFC 3339) of a job firing's key;
/// `None` for any other key.
pub fn parse_job_firing_key(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("job:")?;
    let (id, at) = rest.split_once(':')?;
    if id.is_empty() || at.is_empty() {
        return None;
    }
    Some((id, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_to_its_job_and_instant() {
        let key = job_firing_key("job_0199", 1_700_000_000_000);
        assert_eq!(key, "job:job_0199:2023-11-14T22:13:20.000Z");
        assert_eq!(
            parse_job_firing_key(&key),
            Some(("job_0199", "2023-11-14T22:13:20.000Z"))
        );
    }

    #[test]
    fn other_keys_are_not_job_keys() {
        for key in ["abc", "job:", "job:x", "job::2023", "jobs:a:b", "job:a:"] {
            assert_eq!(parse_job_firing_key(key), None, "{key}");
        }
    }
}
