//! The start-up order as an LLD linker script whose names ignore what
//! changes from one build to the next (see build.rs). Used by build.rs and
//! tests/link_order.rs.

use std::fmt::Write as _;

/// An LLD script that puts the sections of the listed functions in one
/// output section before `.text`, each name with its build-specific parts
/// as wildcards.
pub fn linker_script(names: &str) -> String {
    let mut seen = std::collections::HashSet::new();
    let mut script = String::from("SECTIONS {\n  .text.hearth_startup : {\n    *(\n");
    for name in names.lines().map(str::trim).filter(|n| !n.is_empty()) {
        let pattern = pattern(name);
        // A name with characters a script cannot hold is left to the exact order.
        if pattern
            .chars()
            .any(|c| c.is_whitespace() || "()\"{};,".contains(c))
        {
            continue;
        }
        if seen.insert(pattern.clone()) {
            let _ = writeln!(script, "      .text.{pattern}");
        }
    }
    script.push_str("    )\n  }\n}\nINSERT BEFORE .text;\n");
    script
}

/// `name` with what changes from one build to the next replaced by `*`: the
/// hash of legacy mangling (`17h` + 16 hex digits + `E`), the crate
/// disambiguators (`Cs<base62>_`) and back-references (`B<base62>_`, byte
/// offsets that move with them) of v0 mangling, and LTO's numeric suffixes.
pub fn pattern(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let v0 = name.starts_with("_R");
    let b = name.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let rest = &name[i..];
        if let Some(len) = legacy_hash(rest) {
            out.push_str("17h*E");
            i += len;
        } else if v0 && let Some(len) = v0_base62(rest, "Cs") {
            out.push_str("Cs*_");
            i += len;
        } else if v0 && let Some(len) = v0_base62(rest, "B") {
            out.push_str("B*_");
            i += len;
        } else if b[i] == b'.' && lto_suffix(rest) {
            out.push('*');
            break;
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            i += c.len_utf8().max(1);
        }
    }
    out
}

/// Length of a legacy hash (`17h` + 16 hex digits + `E`) at the start of `s`.
fn legacy_hash(s: &str) -> Option<usize> {
    let hex = s.strip_prefix("17h")?.get(..17)?;
    let (digits, end) = hex.split_at(16);
    (end == "E" && digits.bytes().all(|c| c.is_ascii_hexdigit())).then_some(20)
}

/// Length of `tag` + base-62 digits + `_` at the start of `s`.
fn v0_base62(s: &str, tag: &str) -> Option<usize> {
    let rest = s.strip_prefix(tag)?;
    let digits = rest.bytes().take_while(u8::is_ascii_alphanumeric).count();
    (rest.as_bytes().get(digits) == Some(&b'_')).then_some(tag.len() + digits + 1)
}

/// True for `.123` or `.llvm.123` ending the name.
fn lto_suffix(s: &str) -> bool {
    let digits = s
        .strip_prefix(".llvm.")
        .or_else(|| s.strip_prefix('.'))
        .unwrap_or("");
    !digits.is_empty() && digits.bytes().all(|c| c.is_ascii_digit())
}
