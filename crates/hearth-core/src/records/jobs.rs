//! Scheduled jobs: what fires, when it fires next, and what its last firing
//! made. The schedule itself is only text here; parsing it and computing
//! instants belongs to the runtime.

use crate::Timestamp;

/// What a job does with the firings it missed while hearth was down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CatchUp {
    /// One run for the most recent missed instant, if within 24 hours.
    #[default]
    Latest,
    /// A run for every missed instant.
    All,
    /// Missed instants are skipped.
    None,
}

impl CatchUp {
    /// All policies.
    pub const ALL: [CatchUp; 3] = [Self::Latest, Self::All, Self::None];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::All => "all",
            Self::None => "none",
        }
    }

    /// Parses a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// A stored job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// `job_...`.
    pub id: String,
    /// A name for people.
    pub name: String,
    /// The schedule as given: a cron expression, `every <n><unit>` or an RFC 3339 instant.
    pub schedule: String,
    /// IANA time zone the schedule is read in.
    pub timezone: String,
    /// The thread each firing posts to.
    pub thread_key: String,
    /// The user each firing speaks as.
    pub user_key: String,
    /// The message each firing sends.
    pub text: String,
    /// Missed firings policy.
    pub catch_up: CatchUp,
    /// The next instant not yet fired; `None` once nothing is left to fire.
    pub next_run_at: Option<Timestamp>,
    /// The scheduled instant of the last firing.
    pub last_run_at: Option<Timestamp>,
    /// The run the last firing made.
    pub last_run_id: Option<String>,
    /// False once a one-shot job fired (or was skipped); disabled jobs never fire.
    pub enabled: bool,
    /// Creation time (`every` schedules are anchored here).
    pub created_at: Timestamp,
}

/// What one firing of a job changes on the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobFiring {
    /// The job.
    pub job_id: String,
    /// The scheduled instant fired, when a run was made for one.
    pub fired: Option<(Timestamp, String)>,
    /// The job's schedule after the firing, as the ticker planned it;
    /// `None` for a firing by hand, which leaves the stored schedule alone
    /// (what it read before firing may be stale by then).
    pub next: Option<NextFiring>,
}

/// Where a job's schedule stands after the ticker fired or skipped it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextFiring {
    /// The next instant not yet fired.
    pub next_run_at: Option<Timestamp>,
    /// Whether the job stays enabled.
    pub enabled: bool,
}
