//! Sub-agent threads: a run started by a `delegate` call runs in the thread
//! `<parent thread>/sub/<n>`. The engine knows a sub-agent by its thread
//! alone, so what it withholds from one holds also after a restart, when
//! nothing the parent passed in memory is left.

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
    }
}
