//! Channel profiles: one registry, filtered per channel.
//!
//! A profile is a pair of glob lists over tool names (`*` any run, `?` one
//! character); a tool is offered when an `include` glob matches and no
//! `exclude` glob does. A channel without a profile offers every tool. The
//! globs were checked when the configuration loaded; here they only match.

use std::collections::BTreeMap;

/// The channel of a thread key: the part before the first `:` (thread keys
/// are `<channel>:<kind>:<id>`, e.g. `telegram:chat:42`, `api:default`).
pub fn channel_of(thread_key: &str) -> &str {
    thread_key
        .split_once(':')
        .map_or(thread_key, |(channel, _)| channel)
}

/// True when `glob` (`*` matches any run of characters, `?` exactly one)
/// matches the whole of `name`.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut gi, mut ni) = (0, 0);
    // Where the last `*` was, and the name position it currently absorbs to:
    // on a mismatch the star takes one more character. Only the last star
    // needs remembering, which keeps this linear-ish without recursion.
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some('*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    star = Some((sg, sn + 1));
                    gi = sg + 1;
                    ni = sn + 1;
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

/// One channel's include and exclude globs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolProfile {
    /// Tools offered.
    include: Vec<String>,
    /// Tools withheld even when included.
    exclude: Vec<String>,
}

impl ToolProfile {
    /// A profile from its globs.
    pub fn new(include: Vec<String>, exclude: Vec<String>) -> Self {
        Self { include, exclude }
    }

    /// True when the profile offers the tool `name`: exclude wins.
    pub fn allows(&self, name: &str) -> bool {
        self.include.iter().any(|g| glob_match(g, name))
            && !self.exclude.iter().any(|g| glob_match(g, name))
    }
}

impl Default for ToolProfile {
    /// Every tool.
    fn default() -> Self {
        Self::new(vec!["*".into()], Vec::new())
    }
}

/// The profile of each configured channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolProfiles {
    /// By channel name.
    by_channel: BTreeMap<String, ToolProfile>,
}

impl ToolProfiles {
    /// No profiles: every channel offers every tool.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets (or replaces) `channel`'s profile.
    pub fn insert(&mut self, channel: impl Into<String>, profile: ToolProfile) {
        self.by_channel.insert(channel.into(), profile);
    }

    /// `channel`'s profile, if it has one.
    pub fn get(&self, channel: &str) -> Option<&ToolProfile> {
        self.by_channel.get(channel)
    }

    /// True when `channel`'s profile (or the lack of one) offers `name`.
    pub fn allows(&self, channel: &str, name: &str) -> bool {
        self.get(channel).is_none_or(|p| p.allows(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        for (glob, name) in [
            ("*", "web_fetch"),
            ("*", ""),
            ("web_*", "web_fetch"),
            ("web_*", "web_"),
            ("*_fetch", "web_fetch"),
            ("w*b*h", "web_fetch"),
            ("web_fetc?", "web_fetch"),
            ("??b_*", "web_search"),
            ("memory_*e", "memory_save"),
            ("*a*a*a", "aaaa"),
            ("**", "x"),
            ("exact", "exact"),
        ] {
            assert!(glob_match(glob, name), "{glob} should match {name}");
        }
        for (glob, name) in [
            ("web_*", "web"),
            ("web_*", "xweb_fetch"),
            ("*_fetch", "web_fetch2"),
            ("web_fetc?", "web_fetc"),
            ("?", ""),
            ("exact", "exactly"),
            ("exact", "Exact"),
            ("*a*a*a", "aab"),
            ("", "x"),
        ] {
            assert!(!glob_match(glob, name), "{glob} should not match {name}");
        }
    }

    #[test]
    fn question_mark_is_one_character_not_one_byte() {
        assert!(glob_match("caf?", "café"));
    }

    #[test]
    fn channel_is_the_first_segment() {
        assert_eq!(channel_of("api:default"), "api");
        assert_eq!(channel_of("telegram:chat:42"), "telegram");
        assert_eq!(channel_of("discord:channel:1"), "discord");
        assert_eq!(channel_of("bare"), "bare");
        assert_eq!(channel_of(""), "");
    }

    #[test]
    fn exclude_wins_and_missing_profiles_allow_everything() {
        let mut p = ToolProfiles::new();
        p.insert(
            "api",
            ToolProfile::new(vec!["*".into()], vec!["web_*".into()]),
        );
        p.insert(
            "telegram",
            ToolProfile::new(vec!["memory_*".into(), "web_fetch".into()], vec![]),
        );
        assert!(p.allows("api", "current_time"));
        assert!(!p.allows("api", "web_fetch"));
        assert!(p.allows("telegram", "memory_save"));
        assert!(p.allows("telegram", "web_fetch"));
        assert!(!p.allows("telegram", "web_search"));
        assert!(p.allows("discord", "web_search"));
        assert!(ToolProfile::default().allows("anything"));
    }
}
