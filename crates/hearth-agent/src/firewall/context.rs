//! Context rules: the secret is recognised by what precedes it (`Bearer `,
//! `Authorization: Basic `, `scheme://user:`, a key-like name and `=`/`:`).

use super::entropy::{Classes, shannon};
use super::patterns::{
    Hit, PLACEHOLDER_PREFIX, at, at_ci, find, hit, is_alnum, is_b64, is_b64url, is_hex, run,
};
use super::tokens::{discord_shape, known_token};

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
pub(super) fn bearer(b: &[u8], i: usize) -> Option<Hit> {
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
pub(super) fn basic_auth(b: &[u8], i: usize) -> Option<Hit> {
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
pub(super) fn discord_bot_header(b: &[u8], i: usize) -> Option<Hit> {
    if !at(b, i, b"Bot ") {
        return None;
    }
    let s = skip_blank(b, i + 4);
    let e = discord_shape(b, s)?;
    hit("discord_bot_token", s, e)
}

/// Credentials in a URL's userinfo (`scheme://user:password@host`): the
/// password is redacted (the user too when it is a known token), so the text
/// still shows which service and user. `i` is at the `:` of `://`.
pub(super) fn url_credentials(b: &[u8], i: usize) -> Option<(Option<Hit>, Hit)> {
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
    b"pass",
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
pub(super) fn key_context(b: &[u8], i: usize) -> Option<Hit> {
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
    if terminated && let Some(kind) = classify_value(ident, &b[vs..ve]) {
        return Some(Hit {
            kind,
            start: vs,
            end: ve,
        });
    }
    chosen_secret_at(b, ident, vs, quote)
}

/// A secret a person chose, under a password- or secret-like name
/// (`DB_PASSWORD=hunter22`, `SECRET_KEY = 'django-insecure-k2#(...'`). Such
/// values are short and full of punctuation, so the entropy rule misses them;
/// they are judged on shape instead (see [`is_chosen_secret`]).
fn chosen_secret_at(b: &[u8], ident: &[u8], vs: usize, quote: Option<u8>) -> Option<Hit> {
    let kind = chosen_secret_kind(ident)?;
    let stop = |c: u8| {
        !c.is_ascii_graphic()
            || is_quote(c)
            || c == b'\\'
            || (quote.is_none() && matches!(c, b',' | b';'))
    };
    let raw_end = run(b, vs, |c| !stop(c));
    let terminated = match b.get(raw_end) {
        None => true,
        Some(&c) => match quote {
            Some(q) => c == q || c == b'\\',
            None => c.is_ascii_whitespace() || matches!(c, b',' | b';'),
        },
    };
    let mut e = raw_end;
    if quote.is_none() {
        // A sentence's full stop is not part of the value.
        while e > vs && b[e - 1] == b'.' {
            e -= 1;
        }
    }
    (terminated && is_chosen_secret(&b[vs..e], quote.is_some())).then_some(Hit {
        kind,
        start: vs,
        end: e,
    })
}

/// The kind for a chosen secret under `ident`, when `ident` names one.
fn chosen_secret_kind(ident: &[u8]) -> Option<&'static str> {
    let n = ident.len();
    if n > 64 {
        return None;
    }
    let mut lower = [0u8; 64];
    let lower = &mut lower[..n];
    lower.copy_from_slice(ident);
    lower.make_ascii_lowercase();
    let ends = |words: &[&[u8]]| words.iter().any(|w| lower.ends_with(w));
    if ends(&[b"password", b"passwd", b"pwd", b"pass", b"passphrase"]) {
        Some("password")
    } else if ends(&[b"secret", b"secret_key", b"secretkey", b"secret-key"]) {
        Some("generic_secret")
    } else {
        None
    }
}

/// True when `v` looks like a password someone typed rather than code,
/// a template, a path or a word: 6+ characters with a letter and a digit or
/// symbol, no template or reference syntax. Outside quotes, brackets mean an
/// expression (`password: Optional[str]`, `getpass()`), so they rule it out.
fn is_chosen_secret(v: &[u8], quoted: bool) -> bool {
    if v.len() < 6 || v.len() > 256 || !v.iter().all(u8::is_ascii_graphic) {
        return false;
    }
    // Templates (`${X}`, `<password>`, `{{ x }}`, `%(pw)s`), YAML tags,
    // anchors and aliases, placeholders, comments, paths, masks.
    if matches!(
        v[0],
        b'$' | b'<' | b'{' | b'%' | b'!' | b'*' | b'&' | b'[' | b'#' | b'/' | b'.' | b'~'
    ) || find(v, 0, b"://").is_some()
    {
        return false;
    }
    let bracket = |c: &u8| matches!(c, b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>');
    if !quoted && v.iter().any(bracket) {
        return false;
    }
    // A call (`getpass()`, `os.getenv(...)`) or a dotted reference
    // (`config.db.password`, `req.body.pass2`).
    let ident_run = run(v, 0, |c| is_alnum(c) || c == b'_' || c == b'.');
    if v.get(ident_run) == Some(&b'(') {
        return false;
    }
    if ident_run == v.len()
        && v.contains(&b'.')
        && v.split(|&c| c == b'.')
            .all(|seg| seg.first().is_some_and(|c| !c.is_ascii_digit()))
    {
        return false;
    }
    let c = Classes::of(v);
    let symbol = v
        .iter()
        .any(|&x| !is_alnum(x) && !matches!(x, b'_' | b'-' | b'.'));
    (c.upper || c.lower) && (c.digit || symbol) && v.iter().any(|&x| x != v[0])
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
    // UUIDs are ids, except where the name says credential: Heroku,
    // Snyk and others issue UUID-shaped API keys (`HEROKU_API_KEY=<uuid>`).
    if is_uuid(value) {
        let credential = [
            &b"api"[..],
            b"secret",
            b"token",
            b"pass",
            b"auth",
            b"access",
            b"private",
        ]
        .iter()
        .any(|w| find(lower, 0, w).is_some());
        return if find(lower, 0, b"heroku").is_some() {
            Some("heroku_api_key")
        } else if credential {
            Some("generic_secret")
        } else {
            None
        };
    }
    high_entropy(value).then_some("generic_secret")
}

/// [`classify_value`], then the chosen-secret rule, for a whole string
/// value under `ident` (a JSON object's member).
pub(crate) fn classify_whole(ident: &[u8], value: &[u8]) -> Option<&'static str> {
    classify_value(ident, value)
        .or_else(|| chosen_secret_kind(ident).filter(|_| is_chosen_secret(value, true)))
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
