//! Hand-written matchers for secret formats.
//!
//! No regex engine: the binary-size budget rules it out, and every format here
//! is a fixed prefix followed by a character-class run, which a byte loop
//! matches in one pass. [`scan`] walks the text once; at each byte it
//! dispatches on that byte to the few matchers whose prefix can start there,
//! so clean text costs one `match` per byte.
//!
//! Every matcher starts and ends on ASCII bytes, so each hit's range lies on
//! UTF-8 character boundaries and can slice the original `&str`.

use super::context::{basic_auth, bearer, discord_bot_header, key_context, url_credentials};
use super::tokens::known_token;

/// The start of a placeholder written by the scanner; skipped when scanning
/// so redacting redacted text changes nothing.
pub(crate) const PLACEHOLDER_PREFIX: &[u8] = b"[REDACTED:";

/// Longest placeholder: `[REDACTED:` + kind + `:` + 8 hex + `]`, with margin.
const PLACEHOLDER_MAX: usize = 64;

/// A secret found in the text: its kind and byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The secret's format.
    pub kind: &'static str,
    /// Byte offset of the first redacted byte.
    pub start: usize,
    /// Byte offset just past the last redacted byte.
    pub end: usize,
}

pub(super) const fn hit(kind: &'static str, start: usize, end: usize) -> Option<Hit> {
    Some(Hit { kind, start, end })
}

/// All secrets in `b`, in order, not overlapping.
pub(crate) fn scan(b: &[u8]) -> Vec<Hit> {
    let mut hits = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'['
            && let Some(end) = placeholder_end(b, i)
        {
            i = end;
            continue;
        }
        if b[i] == b':'
            && let Some((user, password)) = url_credentials(b, i)
        {
            // Both parts of `user:password` at once, so the user part (which
            // the password hit would otherwise jump over) is never missed.
            hits.extend(user);
            hits.push(password);
            i = password.end;
            continue;
        }
        if let Some(h) = match_at(b, i) {
            // Matchers only return ranges at or after `i`; guard anyway so a
            // bad range can never stall or reorder the scan.
            if h.start >= i && h.end > h.start && h.end <= b.len() {
                hits.push(h);
                i = h.end;
                continue;
            }
        }
        i += 1;
    }
    hits
}

/// End of a scanner placeholder starting at `i`, if one does.
fn placeholder_end(b: &[u8], i: usize) -> Option<usize> {
    if !b[i..].starts_with(PLACEHOLDER_PREFIX) {
        return None;
    }
    let limit = (i + PLACEHOLDER_MAX).min(b.len());
    b[i..limit]
        .iter()
        .position(|&c| c == b']')
        .map(|p| i + p + 1)
}

/// The secret that starts at (or, for context rules, right after) `i`.
fn match_at(b: &[u8], i: usize) -> Option<Hit> {
    match b[i] {
        b':' | b'=' => key_context(b, i),
        b'B' | b'b' => {
            if !boundary_before(b, i) {
                return None;
            }
            bearer(b, i)
                .or_else(|| basic_auth(b, i))
                .or_else(|| discord_bot_header(b, i))
                .or_else(|| known_token(b, i))
        }
        _ => known_token(b, i),
    }
}

// ---------------------------------------------------------------------------
// Byte helpers.

pub(super) fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

pub(super) fn is_b64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

pub(super) fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/'
}

pub(super) fn is_upper_digit(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}

pub(super) fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

/// End of the run of `class` bytes starting at `from`.
pub(super) fn run(b: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    let mut j = from;
    while j < b.len() && class(b[j]) {
        j += 1;
    }
    j
}

/// True when no letter or digit precedes `i`, so a prefix at `i` starts a
/// token instead of sitting inside a longer word (`task-...` is not `sk-`).
pub(super) fn boundary_before(b: &[u8], i: usize) -> bool {
    i == 0 || !is_alnum(b[i - 1])
}

pub(super) fn at(b: &[u8], i: usize, pat: &[u8]) -> bool {
    b.get(i..i + pat.len()) == Some(pat)
}

pub(super) fn at_ci(b: &[u8], i: usize, pat: &[u8]) -> bool {
    b.get(i..i + pat.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(pat))
}

pub(super) fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    if from >= b.len() {
        return None;
    }
    b[from..]
        .windows(pat.len())
        .position(|w| w == pat)
        .map(|p| from + p)
}

/// A token that is `prefix` plus `min..=max` bytes of `class`, ending where
/// no further letter or digit follows (trailing dots are sentence punctuation).
pub(super) fn prefixed(
    b: &[u8],
    i: usize,
    prefix: &[u8],
    class: impl Fn(u8) -> bool,
    min: usize,
    max: usize,
    kind: &'static str,
) -> Option<Hit> {
    if !at(b, i, prefix) {
        return None;
    }
    let s = i + prefix.len();
    let mut e = run(b, s, class);
    while e > s && b[e - 1] == b'.' {
        e -= 1;
    }
    let n = e - s;
    if n < min || n > max || b.get(e).copied().is_some_and(is_alnum) {
        return None;
    }
    hit(kind, i, e)
}

/// [`prefixed`] over several prefixes sharing one shape.
pub(super) fn any_prefixed(
    b: &[u8],
    i: usize,
    prefixes: &[&[u8]],
    class: impl Fn(u8) -> bool + Copy,
    min: usize,
    max: usize,
    kind: &'static str,
) -> Option<Hit> {
    prefixes
        .iter()
        .find_map(|p| prefixed(b, i, p, class, min, max, kind))
}
