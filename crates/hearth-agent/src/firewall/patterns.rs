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

use super::entropy::{Classes, shannon};

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

const fn hit(kind: &'static str, start: usize, end: usize) -> Option<Hit> {
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
        }
        _ => known_token(b, i),
    }
}

// ---------------------------------------------------------------------------
// Byte helpers.

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

fn is_b64url(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

fn is_b64(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'+' || c == b'/'
}

fn is_upper_digit(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

/// End of the run of `class` bytes starting at `from`.
fn run(b: &[u8], from: usize, class: impl Fn(u8) -> bool) -> usize {
    let mut j = from;
    while j < b.len() && class(b[j]) {
        j += 1;
    }
    j
}

/// True when no letter or digit precedes `i`, so a prefix at `i` starts a
/// token instead of sitting inside a longer word (`task-...` is not `sk-`).
fn boundary_before(b: &[u8], i: usize) -> bool {
    i == 0 || !is_alnum(b[i - 1])
}

fn at(b: &[u8], i: usize, pat: &[u8]) -> bool {
    b.get(i..i + pat.len()) == Some(pat)
}

fn at_ci(b: &[u8], i: usize, pat: &[u8]) -> bool {
    b.get(i..i + pat.len())
        .is_some_and(|s| s.eq_ignore_ascii_case(pat))
}

fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
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
fn prefixed(
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
fn any_prefixed(
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

// ---------------------------------------------------------------------------
// Known token formats (prefix + body).

/// A token of a known format starting exactly at `i`. Used by the scan and
/// by the context rules to name a value's kind precisely.
fn known_token(b: &[u8], i: usize) -> Option<Hit> {
    let c = b[i];
    if c.is_ascii_digit() {
        // Telegram checks its own boundary (it allows a leading `bot`).
        return telegram(b, i);
    }
    if c == b'-' {
        // `-----BEGIN` is marker enough; no boundary needed, which also keeps
        // redaction idempotent when a block directly follows another secret.
        return private_key(b, i);
    }
    if !boundary_before(b, i) {
        return None;
    }
    match c {
        b'A' => aws_access_key(b, i)
            .or_else(|| prefixed(b, i, b"AIza", is_b64url, 35, 35, "gcp_api_key"))
            .or_else(|| {
                prefixed(
                    b,
                    i,
                    b"AGE-SECRET-KEY-1",
                    is_upper_digit,
                    58,
                    58,
                    "age_secret_key",
                )
            }),
        b'g' => github(b, i)
            .or_else(|| {
                any_prefixed(
                    b,
                    i,
                    &[b"glpat-", b"glrt-", b"gldt-", b"glptt-", b"glsoat-"],
                    |c| is_b64url(c) || c == b'.',
                    20,
                    255,
                    "gitlab_token",
                )
            })
            .or_else(|| prefixed(b, i, b"gsk_", is_alnum, 48, 64, "groq_key")),
        b'x' => slack_token(b, i)
            .or_else(|| {
                prefixed(
                    b,
                    i,
                    b"xapp-",
                    |c| is_alnum(c) || c == b'-',
                    20,
                    255,
                    "slack_app_token",
                )
            })
            .or_else(|| prefixed(b, i, b"xai-", is_alnum, 60, 120, "xai_key")),
        b'h' => slack_webhook(b, i).or_else(|| huggingface(b, i)),
        b'd' => discord_webhook(b, i).or_else(|| {
            any_prefixed(
                b,
                i,
                &[b"dop_v1_", b"doo_v1_", b"dor_v1_"],
                is_hex,
                64,
                64,
                "digitalocean_token",
            )
        }),
        b's' => any_prefixed(
            b,
            i,
            &[b"sk_live_", b"sk_test_"],
            is_alnum,
            10,
            255,
            "stripe_key",
        )
        .or_else(|| {
            any_prefixed(
                b,
                i,
                &[b"shpat_", b"shpca_", b"shppa_", b"shpss_"],
                is_hex,
                32,
                32,
                "shopify_token",
            )
        })
        .or_else(|| sk_dash(b, i)),
        b'r' => any_prefixed(
            b,
            i,
            &[b"rk_live_", b"rk_test_"],
            is_alnum,
            10,
            255,
            "stripe_key",
        ),
        b'w' => prefixed(b, i, b"whsec_", is_b64, 24, 128, "stripe_webhook_secret"),
        b'y' => prefixed(
            b,
            i,
            b"ya29.",
            |c| is_b64url(c) || c == b'.',
            20,
            4096,
            "google_oauth_token",
        ),
        b'n' => prefixed(b, i, b"npm_", is_alnum, 36, 36, "npm_token"),
        b'p' => prefixed(b, i, b"pypi-AgEI", is_b64url, 50, 4096, "pypi_token"),
        b'S' => sendgrid(b, i).or_else(|| prefixed(b, i, b"SK", is_hex, 32, 32, "twilio_key")),
        b'e' => jwt(b, i),
        _ => None,
    }
}

fn aws_access_key(b: &[u8], i: usize) -> Option<Hit> {
    any_prefixed(
        b,
        i,
        &[b"AKIA", b"ASIA", b"ABIA", b"ACCA"],
        is_upper_digit,
        16,
        16,
        "aws_access_key",
    )
}

fn github(b: &[u8], i: usize) -> Option<Hit> {
    prefixed(
        b,
        i,
        b"github_pat_",
        |c| is_alnum(c) || c == b'_',
        70,
        255,
        "github_pat",
    )
    .or_else(|| {
        any_prefixed(
            b,
            i,
            &[b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_"],
            is_alnum,
            36,
            255,
            "github_token",
        )
    })
}

fn slack_token(b: &[u8], i: usize) -> Option<Hit> {
    let h = any_prefixed(
        b,
        i,
        &[b"xoxb-", b"xoxp-", b"xoxa-", b"xoxr-", b"xoxs-", b"xoxe-"],
        |c| is_alnum(c) || c == b'-',
        10,
        255,
        "slack_token",
    )?;
    // Real tokens embed numeric team/user ids; requiring a digit keeps
    // hyphenated words after `xoxb-` from matching.
    b[h.start + 5..h.end]
        .iter()
        .any(u8::is_ascii_digit)
        .then_some(h)
}

fn slack_webhook(b: &[u8], i: usize) -> Option<Hit> {
    for p in [
        &b"hooks.slack.com/services/"[..],
        b"hooks.slack.com/workflows/",
        b"hooks.slack.com/triggers/",
    ] {
        if at(b, i, p) {
            let s = i + p.len();
            let e = run(b, s, |c| is_alnum(c) || c == b'/' || c == b'_' || c == b'-');
            // Only the path is secret; keeping the host shows what leaked.
            return (e - s >= 20).then_some(Hit {
                kind: "slack_webhook",
                start: s,
                end: e,
            });
        }
    }
    None
}

fn huggingface(b: &[u8], i: usize) -> Option<Hit> {
    let h = prefixed(b, i, b"hf_", is_alnum, 30, 64, "huggingface_token")?;
    let c = Classes::of(&b[h.start + 3..h.end]);
    (c.upper && c.lower).then_some(h)
}

fn discord_webhook(b: &[u8], i: usize) -> Option<Hit> {
    for p in [
        &b"discord.com/api/webhooks/"[..],
        b"discordapp.com/api/webhooks/",
    ] {
        if at(b, i, p) {
            let s = i + p.len();
            let id_end = run(b, s, |c| c.is_ascii_digit());
            if id_end - s < 15 || b.get(id_end) != Some(&b'/') {
                return None;
            }
            let e = run(b, id_end + 1, is_b64url);
            return (e - (id_end + 1) >= 60).then_some(Hit {
                kind: "discord_webhook",
                start: s,
                end: e,
            });
        }
    }
    None
}

fn telegram(b: &[u8], i: usize) -> Option<Hit> {
    // Bot API URLs put the token right after `/bot`.
    let after_bot = i >= 3 && b[i - 3..i].eq_ignore_ascii_case(b"bot");
    if !(boundary_before(b, i) || after_bot) {
        return None;
    }
    let d = run(b, i, |c| c.is_ascii_digit());
    if !(8..=10).contains(&(d - i)) || b.get(d) != Some(&b':') {
        return None;
    }
    let e = run(b, d + 1, is_b64url);
    (e - (d + 1) == 35).then_some(Hit {
        kind: "telegram_bot_token",
        start: i,
        end: e,
    })
}

/// `sk-` keys: Anthropic, OpenRouter, then OpenAI (most general last).
fn sk_dash(b: &[u8], i: usize) -> Option<Hit> {
    if let Some(h) = prefixed(b, i, b"sk-ant-", is_b64url, 20, 255, "anthropic_key") {
        return Some(h);
    }
    if let Some(h) = prefixed(b, i, b"sk-or-v1-", is_hex, 64, 64, "openrouter_key") {
        return Some(h);
    }
    let h = prefixed(b, i, b"sk-", is_b64url, 20, 255, "openai_key")?;
    // Keys are random base62 with a long body: all three classes appear,
    // which hyphenated prose (`sk-learn-is-great-...`) never has.
    (Classes::of(&b[h.start + 3..h.end]).count() == 3).then_some(h)
}

fn sendgrid(b: &[u8], i: usize) -> Option<Hit> {
    if !at(b, i, b"SG.") {
        return None;
    }
    let a = i + 3;
    let a_end = run(b, a, is_b64url);
    if !(16..=32).contains(&(a_end - a)) || b.get(a_end) != Some(&b'.') {
        return None;
    }
    let e = run(b, a_end + 1, is_b64url);
    (30..=64).contains(&(e - (a_end + 1))).then_some(Hit {
        kind: "sendgrid_key",
        start: i,
        end: e,
    })
}

/// A PEM private key block, whole: header through footer. Without a footer
/// (truncated paste) it runs to the first blank line or the end of text,
/// since a partial key is still secret.
fn private_key(b: &[u8], i: usize) -> Option<Hit> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    if !at(b, i, BEGIN) {
        return None;
    }
    let label_class = |c: u8| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ';
    let ls = i + BEGIN.len();
    let le = run(b, ls, label_class);
    if le - ls > 64 || !at(b, le, b"-----") || find(&b[ls..le], 0, b"PRIVATE KEY").is_none() {
        return None;
    }
    let body = le + 5;
    // Docs mention the header alone; a real block has base64 (or PEM
    // headers) right after it, possibly behind JSON-escaped newlines.
    let mut k = body;
    while k < b.len() && (b[k].is_ascii_whitespace() || at(b, k, b"\\n") || at(b, k, b"\\r")) {
        k += if b[k] == b'\\' { 2 } else { 1 };
    }
    if !at(b, k, b"Proc-Type:") && run(b, k, |c| is_b64(c) || c == b'=') - k < 16 {
        return None;
    }
    let end = match find(b, body, b"-----END ") {
        Some(p) => {
            let fe = run(b, p + 9, label_class);
            if at(b, fe, b"-----") { fe + 5 } else { fe }
        }
        None => {
            // Truncated block: take what still looks like PEM body, up to a
            // blank line, so the rest of the text survives.
            let pem = |c: u8| {
                is_b64(c)
                    || c.is_ascii_whitespace()
                    || matches!(c, b'=' | b'\\' | b':' | b'-' | b',')
            };
            let mut e = run(b, body, pem);
            if let Some(blank) = find(&b[..e], body, b"\n\n") {
                e = blank;
            }
            while e > body && b[e - 1].is_ascii_whitespace() {
                e -= 1;
            }
            e
        }
    };
    hit("private_key", i, end)
}

fn jwt(b: &[u8], i: usize) -> Option<Hit> {
    if !at(b, i, b"eyJ") {
        return None;
    }
    let h = run(b, i, is_b64url);
    if h - i < 10 || b.get(h) != Some(&b'.') {
        return None;
    }
    let p = run(b, h + 1, is_b64url);
    if p - (h + 1) < 4 || b.get(p) != Some(&b'.') {
        return None;
    }
    let s = run(b, p + 1, is_b64url);
    (s - (p + 1) >= 16).then_some(Hit {
        kind: "jwt",
        start: i,
        end: s,
    })
}

// ---------------------------------------------------------------------------
// Context rules: the secret is recognised by what precedes it.

/// Characters of bearer/basic credentials (base64, base64url, JWT dots).
fn is_token_char(c: u8) -> bool {
    is_b64url(c) || matches!(c, b'.' | b'~' | b'+' | b'/' | b'=')
}

/// Skips spaces and tabs from `j`.
fn skip_blank(b: &[u8], j: usize) -> usize {
    run(b, j, |c| c == b' ' || c == b'\t')
}

/// `Bearer <token>` (case-insensitive scheme). The token's own format wins
/// when known (a JWT stays `jwt`).
fn bearer(b: &[u8], i: usize) -> Option<Hit> {
    if !at_ci(b, i, b"bearer") {
        return None;
    }
    let s = skip_blank(b, i + 6);
    if s == i + 6 || s >= b.len() {
        return None;
    }
    if let Some(h) = known_token(b, s) {
        return Some(h);
    }
    let mut e = run(b, s, is_token_char);
    while e > s && b[e - 1] == b'.' {
        e -= 1;
    }
    let tok = &b[s..e];
    let c = Classes::of(tok);
    let has_alpha = c.upper || c.lower;
    // Prose ("bearer of the letter") has short, digit-free words after it.
    let token_like =
        (tok.len() >= 12 && c.digit && has_alpha) || (tok.len() >= 24 && c.upper && c.lower);
    token_like.then_some(Hit {
        kind: "bearer_token",
        start: s,
        end: e,
    })
}

/// `Authorization: Basic <base64>`; only after an `Authorization` header or
/// key, since "basic" alone is an everyday word.
fn basic_auth(b: &[u8], i: usize) -> Option<Hit> {
    if !at_ci(b, i, b"basic") {
        return None;
    }
    let s = skip_blank(b, i + 5);
    if s == i + 5 {
        return None;
    }
    // Walk back over `Authorization: ` / `"authorization": "`.
    let mut k = i;
    while k > 0 && matches!(b[k - 1], b' ' | b'\t' | b'"' | b'\'') {
        k -= 1;
    }
    if k == 0 || !matches!(b[k - 1], b':' | b'=') {
        return None;
    }
    k -= 1;
    while k > 0 && matches!(b[k - 1], b' ' | b'\t' | b'"' | b'\'') {
        k -= 1;
    }
    if k < 13 || !b[k - 13..k].eq_ignore_ascii_case(b"authorization") {
        return None;
    }
    let e = run(b, s, |c| is_b64(c) || c == b'=');
    (e - s >= 8).then_some(Hit {
        kind: "basic_auth",
        start: s,
        end: e,
    })
}

/// `Bot <discord token>`, Discord's Authorization scheme.
fn discord_bot_header(b: &[u8], i: usize) -> Option<Hit> {
    if !at(b, i, b"Bot ") {
        return None;
    }
    let s = skip_blank(b, i + 4);
    let e = discord_shape(b, s)?;
    hit("discord_bot_token", s, e)
}

/// End of a Discord bot token (three base64url parts joined by dots) at `s`.
fn discord_shape(b: &[u8], s: usize) -> Option<usize> {
    let p1 = run(b, s, is_b64url);
    if !(23..=28).contains(&(p1 - s)) || b.get(p1) != Some(&b'.') {
        return None;
    }
    let p2 = run(b, p1 + 1, is_b64url);
    if !(6..=7).contains(&(p2 - (p1 + 1))) || b.get(p2) != Some(&b'.') {
        return None;
    }
    let p3 = run(b, p2 + 1, is_b64url);
    (27..=40).contains(&(p3 - (p2 + 1))).then_some(p3)
}

/// Credentials in a URL's userinfo (`scheme://user:password@host`): the
/// password is redacted (the user too when it is a known token), so the text
/// still shows which service and user. `i` is at the `:` of `://`.
fn url_credentials(b: &[u8], i: usize) -> Option<(Option<Hit>, Hit)> {
    if !at(b, i, b"://") {
        return None;
    }
    let mut s = i;
    while s > 0 && (is_alnum(b[s - 1]) || matches!(b[s - 1], b'+' | b'.' | b'-')) {
        s -= 1;
    }
    let scheme = &b[s..i];
    const DATABASES: &[&[u8]] = &[
        b"postgres",
        b"postgresql",
        b"mysql",
        b"mariadb",
        b"mongodb",
        b"mongodb+srv",
        b"redis",
        b"rediss",
        b"amqp",
        b"amqps",
        b"mssql",
        b"sqlserver",
        b"clickhouse",
        b"cockroachdb",
    ];
    const OTHERS: &[&[u8]] = &[
        b"http", b"https", b"ftp", b"ftps", b"sftp", b"ssh", b"git", b"smtp", b"smtps", b"imap",
        b"imaps", b"ldap", b"ldaps", b"nats", b"mqtt", b"ws", b"wss",
    ];
    let kind = if DATABASES.iter().any(|d| d.eq_ignore_ascii_case(scheme)) {
        "connection_string"
    } else if OTHERS.iter().any(|d| d.eq_ignore_ascii_case(scheme)) {
        "url_credentials"
    } else {
        return None;
    };
    let a = i + 3;
    let a_end = run(b, a, |c| {
        c.is_ascii_graphic()
            && !matches!(
                c,
                b'/' | b'?' | b'#' | b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\'
            )
    });
    let authority = &b[a..a_end];
    let at_sign = authority.iter().rposition(|&c| c == b'@')?;
    let userinfo = &authority[..at_sign];
    // Already redacted (our placeholders contain `:` and would be misread
    // as `user:password`), so nothing is left to do.
    if find(userinfo, 0, PLACEHOLDER_PREFIX).is_some() {
        return None;
    }
    let colon = userinfo.iter().position(|&c| c == b':')?;
    let pw = &authority[colon + 1..at_sign];
    // Skip empty passwords and template stand-ins (`${DB_PASSWORD}`,
    // `<password>`, `{{pass}}`, `****`).
    let template =
        pw.is_empty() || matches!(pw[0], b'$' | b'<' | b'{') || pw.iter().all(|&c| c == b'*');
    // Tokens used as the user name (`https://ghp_...:x-oauth-basic@github.com`).
    let user = known_token(b, a).filter(|h| h.end <= a + at_sign);
    match user {
        // The token spans the colon (a Telegram token): it is the whole secret.
        Some(u) if u.end > a + colon => Some((None, u)),
        _ if template => None,
        _ => Some((
            user,
            Hit {
                kind,
                start: a + colon + 1,
                end: a + at_sign,
            },
        )),
    }
}

/// Identifier words that mark the value after them as a credential.
const KEYWORDS: &[&[u8]] = &[
    b"key",
    b"token",
    b"secret",
    b"password",
    b"passwd",
    b"pwd",
    b"passphrase",
    b"auth",
    b"credential",
    b"credentials",
    b"apikey",
    b"secretkey",
    b"accesskey",
    b"privatekey",
    b"authtoken",
    b"accesstoken",
    b"apitoken",
    b"refreshtoken",
];

/// Identifier parts that name keys which are not credentials (database
/// keys, pagination cursors, public keys). Redacting those would break
/// tools that page through results while protecting nothing.
const NOT_SECRET: &[&[u8]] = &[
    b"public",
    b"idempoten",
    b"thread",
    b"partition",
    b"sort",
    b"primary",
    b"foreign",
    b"cache",
    b"page",
    b"next",
    b"continuation",
];

/// True when `ident` names a credential: it ends with a keyword that starts
/// a word (`OPENAI_API_KEY`, `apiKey`, `x-auth-token`; not `monkey`).
pub(crate) fn is_key_like(ident: &[u8]) -> bool {
    if ident.is_empty() || ident.len() > 64 {
        return false;
    }
    let mut lower = [0u8; 64];
    let lower = &mut lower[..ident.len()];
    lower.copy_from_slice(ident);
    lower.make_ascii_lowercase();
    if NOT_SECRET.iter().any(|n| find(lower, 0, n).is_some()) {
        return false;
    }
    KEYWORDS.iter().any(|kw| {
        if !lower.ends_with(kw) {
            return false;
        }
        let p = ident.len() - kw.len();
        p == 0
            || matches!(ident[p - 1], b'_' | b'-' | b'.' | b' ')
            || (ident[p].is_ascii_uppercase()
                && (ident[p - 1].is_ascii_lowercase() || ident[p - 1].is_ascii_digit()))
    })
}

fn is_ident_char(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'_' | b'-' | b'.')
}

fn is_value_char(c: u8) -> bool {
    is_b64url(c) || matches!(c, b'+' | b'/' | b'=' | b'.' | b'~')
}

fn is_quote(c: u8) -> bool {
    matches!(c, b'"' | b'\'' | b'`')
}

/// `ident = value`, `ident: value`, `"ident": "value"`, `ident := value`,
/// `'ident' => 'value'`, with `i` at the `:` or `=`.
fn key_context(b: &[u8], i: usize) -> Option<Hit> {
    let next = b.get(i + 1).copied();
    let prev = i.checked_sub(1).map(|p| b[p]);
    let (mut k, mut j) = if b[i] == b'=' {
        if next == Some(b'=') || matches!(prev, Some(b'=' | b'!' | b'<' | b'>')) {
            return None;
        }
        let j = if next == Some(b'>') { i + 2 } else { i + 1 };
        let k = if prev == Some(b':') { i - 1 } else { i };
        (k, j)
    } else {
        // `::` paths, `:=` (handled at the `=`) and `://` URLs are not it.
        if matches!(next, Some(b':' | b'=' | b'/')) || prev == Some(b':') {
            return None;
        }
        (i, i + 1)
    };
    // Back over blanks and a closing quote (maybe JSON-escaped) to the name.
    while k > 0 && matches!(b[k - 1], b' ' | b'\t') {
        k -= 1;
    }
    if k > 0 && is_quote(b[k - 1]) {
        k -= 1;
        if k > 0 && b[k - 1] == b'\\' {
            k -= 1;
        }
    }
    let id_end = k;
    while k > 0 && is_ident_char(b[k - 1]) && id_end - k < 64 {
        k -= 1;
    }
    if !is_key_like(&b[k..id_end]) {
        return None;
    }
    let ident = &b[k..id_end];
    // Forward over blanks and an opening quote to the value.
    j = skip_blank(b, j);
    if b.get(j) == Some(&b'\\') && b.get(j + 1).copied().is_some_and(is_quote) {
        j += 1;
    }
    let quote = b.get(j).copied().filter(|&c| is_quote(c));
    if quote.is_some() {
        j += 1;
    }
    let vs = j;
    if vs >= b.len() {
        return None;
    }
    if let Some(h) = known_token(b, vs) {
        return Some(h);
    }
    let raw_end = run(b, vs, is_value_char);
    let mut ve = raw_end;
    while ve > vs && b[ve - 1] == b'.' {
        ve -= 1;
    }
    // The value must be the whole value, not the head of something with
    // spaces or punctuation in it (prose, an e-mail address, a sentence).
    let terminated = match b.get(raw_end) {
        None => true,
        Some(&c) => match quote {
            Some(q) => c == q || c == b'\\',
            None => {
                c.is_ascii_whitespace()
                    || matches!(
                        c,
                        b',' | b';'
                            | b'}'
                            | b')'
                            | b']'
                            | b'&'
                            | b'"'
                            | b'\''
                            | b'`'
                            | b'\\'
                            | b'|'
                    )
            }
        },
    };
    if !terminated {
        return None;
    }
    classify_value(ident, &b[vs..ve]).map(|kind| Hit {
        kind,
        start: vs,
        end: ve,
    })
}

/// The kind of `value` when it is a credential under the key-like name
/// `ident`, judged on the whole value. Shared with JSON object redaction.
pub(crate) fn classify_value(ident: &[u8], value: &[u8]) -> Option<&'static str> {
    if value.is_empty() || !value.iter().all(|&c| is_value_char(c)) {
        return None;
    }
    if discord_shape(value, 0) == Some(value.len()) {
        return Some("discord_bot_token");
    }
    let mut lower = [0u8; 64];
    let n = ident.len().min(64);
    lower[..n].copy_from_slice(&ident[..n]);
    let lower = &mut lower[..n];
    lower.make_ascii_lowercase();
    let aws = find(lower, 0, b"aws").is_some() || find(lower, 0, b"secret_access").is_some();
    if aws && value.len() == 40 && value.iter().all(|&c| is_b64(c)) {
        return Some("aws_secret_key");
    }
    high_entropy(value).then_some("generic_secret")
}

/// Minimum length of a generic secret.
const MIN_SECRET_LEN: usize = 20;
/// Entropy floor for hex values (hex tops out at 4 bits per char).
const HEX_ENTROPY: f64 = 3.0;
/// Entropy floor for base64-like values with a digit.
const B64_ENTROPY: f64 = 3.5;
/// Entropy floor for base64-like values without a digit (closer to words).
const B64_NO_DIGIT_ENTROPY: f64 = 4.0;

/// True for random-looking tokens; false for words, identifiers, paths,
/// numbers and UUIDs.
fn high_entropy(v: &[u8]) -> bool {
    if v.len() < MIN_SECRET_LEN || v.len() > 4096 {
        return false;
    }
    if v.iter().all(u8::is_ascii_digit) || is_uuid(v) {
        return false;
    }
    // Paths and hostnames: base64 never mixes `/` and `.`, and a leading
    // `/`, `.` or `~` is a path.
    if matches!(v[0], b'/' | b'.' | b'~') || (v.contains(&b'/') && v.contains(&b'.')) {
        return false;
    }
    let c = Classes::of(v);
    let h = shannon(v);
    if v.iter().all(|&x| is_hex(x)) {
        return c.digit && (c.upper || c.lower) && h >= HEX_ENTROPY;
    }
    c.count() >= 2 && h >= B64_ENTROPY && (c.digit || h >= B64_NO_DIGIT_ENTROPY)
}

fn is_uuid(v: &[u8]) -> bool {
    v.len() == 36
        && v.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => is_hex(c),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_like_names() {
        for yes in [
            "api_key",
            "OPENAI_API_KEY",
            "apiKey",
            "x-auth-token",
            "password",
            "client_secret",
            "APIKEY",
            "token",
            "db.password",
        ] {
            assert!(is_key_like(yes.as_bytes()), "{yes}");
        }
        for no in [
            "monkey",
            "turkey",
            "author",
            "public_key",
            "idempotency_key",
            "next_page_token",
            "keyboard",
            "",
        ] {
            assert!(!is_key_like(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn entropy_rule() {
        assert!(high_entropy(b"Zx8kQ2mN5pR7tV9wB3cD6fG"));
        assert!(!high_entropy(b"ThisIsJustAnIdentifier"));
        assert!(!high_entropy(b"123456789012345678901234"));
        assert!(!high_entropy(b"550e8400-e29b-41d4-a716-446655440000"));
        assert!(!high_entropy(b"config/keys/server.pem"));
    }
}
