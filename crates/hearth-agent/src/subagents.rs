//! Sub-agent threads: a run started by a `delegate` call runs in the thread
//! `<parent thread>/sub/<n>`. The engine knows a sub-agent by its thread
//! alone, so what it withholds from one holds also after a restart, when
//! nothing the parent passed in memory is left.
//!
//! A run and the sub-agents it starts (and theirs) share its `[agent]`
//! limits through a [`Family`]: one wall clock, and the steps, tool calls and
//! model calls of all of them count against the same caps.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::wall::WallClock;

/// What separates a parent's thread from its child's number.
pub const MARKER: &str = "/sub/";

/// How many delegations deep `thread_key` is (0 for an ordinary thread).
pub fn depth(thread_key: &str) -> u32 {
    u32::try_from(thread_key.matches(MARKER).count()).unwrap_or(u32::MAX)
}

/// True for the thread of a sub-agent.
pub fn is_subagent(thread_key: &str) -> bool {
    thread_key.contains(MARKER)
}

/// The thread the first ancestor ran in: a sub-agent's spending counts
/// against the pools of the conversation that started it.
pub fn root_thread(thread_key: &str) -> &str {
    thread_key
        .find(MARKER)
        .map_or(thread_key, |at| &thread_key[..at])
}

/// What a run has spent of the `[agent]` limits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    /// Model calls plus tool calls.
    pub steps: u32,
    /// Tool calls.
    pub tool_calls: u32,
    /// Model calls.
    pub llm_calls: u32,
}

impl Spent {
    fn add(self, o: Spent) -> Spent {
        Spent {
            steps: self.steps.saturating_add(o.steps),
            tool_calls: self.tool_calls.saturating_add(o.tool_calls),
            llm_calls: self.llm_calls.saturating_add(o.llm_calls),
        }
    }
}

/// The `[agent]` limits a run shares with the sub-agents it starts: one
/// wall clock (started with the first run, paused while any of them waits
/// for a person) and what each has spent. Kept in memory while they run.
pub struct Family {
    clock: WallClock,
    spent: Mutex<HashMap<String, Spent>>,
}

impl Family {
    /// A family whose first run starts now, with `max_wall` to spend.
    pub fn new(max_wall: Duration) -> Self {
        Self {
            clock: WallClock::new(max_wall),
            spent: Mutex::new(HashMap::new()),
        }
    }

    fn spent(&self) -> MutexGuard<'_, HashMap<String, Spent>> {
        self.spent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The shared clock.
    pub(crate) fn clock(&self) -> &WallClock {
        &self.clock
    }

    /// Records what `run_id` has spent so far (its own totals, so a run
    /// resumed from its journal reports what it had).
    pub fn report(&self, run_id: &str, spent: Spent) {
        let mut map = self.spent();
        match map.get_mut(run_id) {
            Some(s) => *s = spent,
            None => {
                map.insert(run_id.to_owned(), spent);
            }
        }
    }

    /// What the others of the family have spent.
    pub fn others(&self, run_id: &str) -> Spent {
        self.spent()
            .iter()
            .filter(|(id, _)| id.as_str() != run_id)
            .fold(Spent::default(), |acc, (_, s)| acc.add(*s))
    }

    /// What all of the family have spent.
    pub fn total(&self) -> Spent {
        self.spent()
            .values()
            .fold(Spent::default(), |acc, s| acc.add(*s))
    }

    /// Wall time left to the family.
    pub fn wall_left(&self) -> Duration {
        self.clock.left()
    }
}

/// Sub-agent `k` of its parent, from its thread (`<parent>/sub/<seq>.<k>`).
pub fn ordinal(thread_key: &str) -> Option<u32> {
    let last = &thread_key[thread_key.rfind(MARKER)? + MARKER.len()..];
    last.rsplit_once('.')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_and_root_follow_the_markers() {
        assert_eq!(depth("telegram:1"), 0);
        assert_eq!(depth("telegram:1/sub/3"), 1);
        assert_eq!(depth("telegram:1/sub/3/sub/1"), 2);
        assert_eq!(root_thread("telegram:1/sub/3/sub/1"), "telegram:1");
        assert_eq!(root_thread("api:x"), "api:x");
        assert!(is_subagent("api:x/sub/1") && !is_subagent("api:x"));
        assert_eq!(ordinal("api:x/sub/4.2"), Some(2));
        assert_eq!(ordinal("api:x/sub/4.2/sub/9.13"), Some(13));
        assert_eq!(ordinal("api:x"), None);
    }

    #[test]
    fn a_family_sums_what_each_spent_once() {
        let f = Family::new(Duration::from_secs(60));
        let spent = |steps| Spent {
            steps,
            tool_calls: steps / 2,
            llm_calls: steps - steps / 2,
        };
        f.report("p", spent(4));
        f.report("c", spent(2));
        f.report("c", spent(3));
        assert_eq!(f.total().steps, 7);
        assert_eq!(f.others("p").steps, 3);
        assert_eq!(f.others("c"), spent(4));
    }
}
