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
        // The same input gives the same name in a fresh set (stable across restarts).
        assert_eq!(
            tool_name("srv", &format!("{long}1"), &mut BTreeSet::new()),
            a
        );
    }
}
