//! The scanner's public face: redaction of text and of JSON values.

use std::borrow::Cow;
use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use serde_json::Value;

use super::{context, patterns, unescape};

/// One redacted secret: its format and where it was in the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finding {
    /// The secret's format, e.g. `github_token`, `private_key`, `generic_secret`.
    pub kind: &'static str,
    /// Byte offset of the secret in the input text.
    pub start: usize,
    /// Byte offset just past the secret in the input text.
    pub end: usize,
}

/// The result of [`SecretScanner::redact`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<'a> {
    /// The text with every secret replaced; borrowed (no allocation) when
    /// nothing was found, which is the common case.
    pub text: Cow<'a, str>,
    /// What was replaced, in order, with offsets into the input.
    pub findings: Vec<Finding>,
}

impl Redacted<'_> {
    /// True when no secret was found (the text is the input unchanged).
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// The process-wide key of the placeholder hash. Shared by every scanner so
/// the same secret gets the same placeholder everywhere in the process.
fn placeholder_key() -> &'static RandomState {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new)
}

/// Finds secrets in text and replaces them with stable placeholders.
///
/// Placeholders are `[REDACTED:<kind>:<tag>]` where `tag` is 8 hex digits of
/// SipHash (std's `RandomState`, keyed with 128 random bits once per process)
/// over the secret. That is not a cryptographic commitment and need not be:
/// the tag only has to be stable within the process (so a model sees that two
/// mentions are the same secret) and reveal nothing about the secret. With a
/// random key unknown outside the process and only 32 bits kept, it gives no
/// way to test guesses offline. Tags differ between processes on purpose.
#[derive(Debug, Clone, Copy, Default)]
pub struct SecretScanner {
    _private: (),
}

impl SecretScanner {
    /// A scanner. Cheap: it holds no state of its own.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces every secret in `text`. Returns the input borrowed when it
    /// is clean. Redacting already redacted text changes nothing.
    pub fn redact<'a>(&self, text: &'a str) -> Redacted<'a> {
        let mut findings = find_all(text.as_bytes());
        if findings.is_empty() {
            return Redacted {
                text: Cow::Borrowed(text),
                findings,
            };
        }
        let (mut out, mut spans) = apply(text, &findings);
        // Rescan the output until it is clean. A placeholder ends character
        // runs where the secret did not (`AIza<34 chars>-ghp_...` is not a
        // GCP key, but `AIza<34 chars>-[REDACTED:...]` reads as one), so a
        // second pass can find what the first rejected. Folding those finds
        // back in here is what makes `redact` idempotent. Real text almost
        // never needs a second round; the cap bounds adversarial input.
        for _ in 0..MAX_ROUNDS {
            let more = find_all(out.as_bytes());
            if more.is_empty() {
                break;
            }
            for h in more {
                let start = to_original(&spans, h.start, false);
                let end = to_original(&spans, h.end, true);
                merge(
                    &mut findings,
                    Finding {
                        kind: h.kind,
                        start,
                        end,
                    },
                );
            }
            (out, spans) = apply(text, &findings);
        }
        Redacted {
            text: Cow::Owned(out),
            findings,
        }
    }

    /// The placeholder that replaces `secret` of format `kind`.
    pub fn placeholder(&self, kind: &str, secret: &str) -> String {
        let mut s = String::with_capacity(kind.len() + 21);
        push_placeholder(&mut s, kind, secret);
        s
    }

    /// Redacts every string in `value` in place (object keys too) and returns
    /// how many secrets were replaced. A string under a key-like object key
    /// (`{"api_key": "..."}`) is also judged as a whole by the key-context
    /// rule, since the key that gives it context is not in the string.
    pub fn redact_json(&self, value: &mut Value) -> usize {
        self.redact_value(value, None)
    }

    fn redact_value(&self, value: &mut Value, key: Option<&str>) -> usize {
        match value {
            Value::String(s) => self.redact_string(s, key),
            Value::Array(items) => items.iter_mut().map(|v| self.redact_value(v, None)).sum(),
            Value::Object(map) => {
                let mut n: usize = map
                    .iter_mut()
                    .map(|(k, v)| self.redact_value(v, Some(k)))
                    .sum();
                if map.keys().any(|k| !self.redact(k).is_clean()) {
                    // Rebuild only when a key holds a secret (rare), keeping order.
                    let old = std::mem::take(map);
                    for (k, v) in old {
                        let r = self.redact(&k);
                        n += r.findings.len();
                        map.insert(r.text.into_owned(), v);
                    }
                }
                n
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
        }
    }

    fn redact_string(&self, s: &mut String, key: Option<&str>) -> usize {
        let r = self.redact(s);
        if !r.is_clean() {
            let n = r.findings.len();
            let text = r.text.into_owned();
            *s = text;
            return n;
        }
        if let Some(k) = key
            && context::is_key_like(k.as_bytes())
            && let Some(kind) = context::classify_whole(k.as_bytes(), s.as_bytes())
        {
            *s = self.placeholder(kind, s);
            return 1;
        }
        0
    }
}

/// Rounds of rescanning after the first pass (see [`SecretScanner::redact`]).
const MAX_ROUNDS: usize = 8;

/// Levels of backslash escaping looked through: JSON in a string (one), and
/// that string serialized into a tool result that is itself wrapped as text
/// (two), with one to spare.
const MAX_UNESCAPE_LEVELS: usize = 3;

/// Every secret in `text`, sorted and disjoint: those in the text as it is,
/// and those seen once its backslash escapes are decoded (a private key
/// inside JSON inside a string has `\\n` where its newlines were), mapped
/// back to the escaped bytes.
fn find_all(text: &[u8]) -> Vec<Finding> {
    let mut findings: Vec<Finding> = patterns::scan(text)
        .into_iter()
        .map(|h| Finding {
            kind: h.kind,
            start: h.start,
            end: h.end,
        })
        .collect();
    let mut view: Vec<u8>;
    let mut current: &[u8] = text;
    // Offset in `text` of each byte of `current` (identity until decoded).
    let mut to_text: Option<Vec<usize>> = None;
    for _ in 0..MAX_UNESCAPE_LEVELS {
        let Some((decoded, map)) = unescape::unescape(current) else {
            break;
        };
        let map = match &to_text {
            Some(outer) => map.iter().map(|&p| outer[p]).collect(),
            None => map,
        };
        for h in patterns::scan(&decoded) {
            merge(
                &mut findings,
                Finding {
                    kind: h.kind,
                    start: map[h.start],
                    end: map[h.end],
                },
            );
        }
        to_text = Some(map);
        view = decoded;
        current = &view;
    }
    findings
}

/// Where a placeholder sits: its secret's range in the input and its own
/// range in the output.
struct Span {
    input: (usize, usize),
    output: (usize, usize),
}

/// `text` with each finding replaced by its placeholder, and where each went.
/// The placeholder hashes the input's bytes, so the output is a function of
/// the input and the findings alone.
fn apply(text: &str, findings: &[Finding]) -> (String, Vec<Span>) {
    let mut out = String::with_capacity(text.len() + findings.len() * 24);
    let mut spans = Vec::with_capacity(findings.len());
    let mut last = 0;
    for f in findings {
        // Findings start and end on ASCII bytes, so these are char
        // boundaries; `get` keeps a broken invariant from panicking.
        let (Some(before), Some(secret)) = (text.get(last..f.start), text.get(f.start..f.end))
        else {
            continue;
        };
        out.push_str(before);
        let at = out.len();
        push_placeholder(&mut out, f.kind, secret);
        spans.push(Span {
            input: (f.start, f.end),
            output: (at, out.len()),
        });
        last = f.end;
    }
    out.push_str(text.get(last..).unwrap_or_default());
    (out, spans)
}

/// Maps an output offset back to the input. An offset inside a placeholder
/// maps to its secret's start (for a range start) or end (for a range end),
/// so a range touching a placeholder covers its whole secret.
fn to_original(spans: &[Span], pos: usize, is_end: bool) -> usize {
    let mut shift_from = (0, 0);
    for s in spans {
        if pos <= s.output.0 {
            break;
        }
        if pos < s.output.1 {
            return if is_end { s.input.1 } else { s.input.0 };
        }
        shift_from = (s.output.1, s.input.1);
    }
    shift_from.1 + (pos - shift_from.0)
}

/// Adds `new` to the sorted, disjoint `findings`, absorbing any it overlaps.
fn merge(findings: &mut Vec<Finding>, mut new: Finding) {
    findings.retain(|f| {
        let overlaps = f.start < new.end && new.start < f.end;
        if overlaps {
            new.start = new.start.min(f.start);
            new.end = new.end.max(f.end);
        }
        !overlaps
    });
    let at = findings.partition_point(|f| f.start < new.start);
    findings.insert(at, new);
}

fn push_placeholder(out: &mut String, kind: &str, secret: &str) {
    use std::fmt::Write as _;
    let tag = placeholder_key().hash_one(secret) & 0xffff_ffff;
    // Writing to a String cannot fail.
    let _ = write!(out, "[REDACTED:{kind}:{tag:08x}]");
}
