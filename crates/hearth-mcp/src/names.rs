//! Tool names on the wire: `<server>__<tool>` within the providers' rule
//! `^[a-zA-Z0-9_-]{1,64}$`.
//!
//! Other characters become `_`. A name longer than 64 characters is cut to
//! 55 and suffixed with `_` and 8 hex digits of the SHA-256 of the full
//! unsanitized name, so two long names that share a prefix stay distinct;
//! the same suffix also separates two names that sanitize alike
//! (`a.b` and `a_b`).

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

/// The providers' limit on a tool name.
pub const MAX_NAME: usize = 64;

/// Characters kept before the hash suffix of a shortened name.
const KEEP: usize = MAX_NAME - 9;

/// The wire name of `server`'s `tool`, unique among `taken` (which it joins).
pub fn tool_name(server: &str, tool: &str, taken: &mut BTreeSet<String>) -> String {
    let full = format!("{server}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = if clean.len() <= MAX_NAME && !taken.contains(&clean) {
        clean
    } else {
        let digest = Sha256::digest(full.as_bytes());
        let hash: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        // `clean` is ASCII, so any byte index is a char boundary.
        let keep = &clean[..clean.len().min(KEEP)];
        format!("{keep}_{hash}")
    };
    taken.insert(name.clone());
    name
}

/// Whether `wire` can be a tool name of `server` (as [`tool_name`] makes
/// them): it starts with `<server>__`, or, for a name cut to fit, with as
/// much of that as was kept.
pub fn may_be_of(server: &str, wire: &str) -> bool {
    let prefix = format!("{server}__");
    wire.starts_with(&prefix)
        || (wire.len() == MAX_NAME
            && prefix.len() > KEEP
            && prefix.is_char_boundary(KEEP)
            && wire.starts_with(&prefix[..KEEP]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        (1..=MAX_NAME).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    }

    #[test]
    fn names_are_prefixed_sanitized_and_unique() {
        let mut taken = BTreeSet::new();
        assert_eq!(tool_name("fs", "read_file", &mut taken), "fs__read_file");
        assert_eq!(tool_name("ev", "get-sum", &mut taken), "ev__get-sum");
        assert_eq!(tool_name("ev", "a.b", &mut taken), "ev__a_b");
        let clash = tool_name("ev", "a_b", &mut taken);
        assert!(
            clash.starts_with("ev__a_b_") && clash.len() == 16,
            "{clash}"
        );
        let long = "x".repeat(100);
        let a = tool_name("srv", &format!("{long}1"), &mut taken);
        let b = tool_name("srv", &format!("{long}2"), &mut taken);
        assert_ne!(a, b);
        assert_eq!(a.len(), MAX_NAME);
        for n in [&a, &b, &clash] {
            assert!(valid(n), "{n}");
        }
        let unicode = tool_name("s", "héllo wörld", &mut taken);
        assert_eq!(unicode, "s__h_llo_w_rld");
        assert!(may_be_of("ev", "ev__a_b") && may_be_of("srv", &a));
        assert!(!may_be_of("e", "ev__a_b") && !may_be_of("ev", "eva__x"));
        let skill = "s".repeat(60);
        let cut = tool_name(&skill, "tool", &mut taken);
        assert!(may_be_of(&skill, &cut) && !may_be_of("s", &cut), "{cut}");
        // The same input gives the same name in a fresh set (stable across restarts).
        assert_eq!(
            tool_name("srv", &format!("{long}1"), &mut BTreeSet::new()),
            a
        );
    }
}
