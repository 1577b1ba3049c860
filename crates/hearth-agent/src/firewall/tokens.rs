//! Known token formats: a fixed prefix (or shape) followed by a body, found
//! wherever they stand in the text, bare or assigned.

use super::entropy::Classes;
use super::patterns::{
    Hit, any_prefixed, at, boundary_before, find, hit, is_alnum, is_b64, is_b64url, is_hex,
    is_upper_digit, prefixed, run,
};
use super::table;

/// A token of a known format starting exactly at `i`. Used by the scan and
/// by the context rules to name a value's kind precisely.
pub(super) fn known_token(b: &[u8], i: usize) -> Option<Hit> {
    let c = b[i];
    if c.is_ascii_digit() {
        // Telegram checks its own boundary (it allows a leading `bot`).
        return telegram(b, i).or_else(|| table::token_at_boundary(b, i));
    }
    if c == b'-' {
        // `-----BEGIN` is marker enough; no boundary needed, which also keeps
        // redaction idempotent when a block directly follows another secret.
        return private_key(b, i);
    }
    if !boundary_before(b, i) {
        return None;
    }
    let special = match c {
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
            &[b"sk_live_", b"sk_test_", b"sk_prod_"],
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
            &[b"rk_live_", b"rk_test_", b"rk_prod_"],
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
        // A Discord bot token's first part is a base64 user id.
        b'M' | b'N' | b'O' => discord_bare(b, i),
        _ => None,
    };
    special
        .or_else(|| table::token(b, i))
        .or_else(|| azure_client_secret(b, i))
        .or_else(|| terraform_token(b, i))
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
        &[
            b"xoxb-", b"xoxp-", b"xoxa-", b"xoxr-", b"xoxs-", b"xoxe-", b"xoxo-",
        ],
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

/// End of a Discord bot token (three base64url parts joined by dots) at `s`.
pub(super) fn discord_shape(b: &[u8], s: usize) -> Option<usize> {
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

/// A bare Discord bot token: the [`discord_shape`] whose first part decodes
/// (base64) to the bot's numeric user id. That decoding is what tells a
/// token in a sentence from any three dotted words.
fn discord_bare(b: &[u8], i: usize) -> Option<Hit> {
    let e = discord_shape(b, i)?;
    let first = run(b, i, is_b64url) - i;
    if b.get(e).copied().is_some_and(is_alnum) || !decodes_to_digits(&b[i..i + first]) {
        return None;
    }
    hit("discord_bot_token", i, e)
}

/// True when unpadded base64 `s` decodes to at least 17 ASCII digits (a
/// Discord snowflake id).
fn decodes_to_digits(s: &[u8]) -> bool {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        }))
    }
    let mut digits = 0;
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (k, &c) in chunk.iter().enumerate() {
            let Some(v) = sextet(c) else { return false };
            n |= v << (18 - 6 * k);
        }
        // 2 chars carry 1 byte, 3 carry 2, 4 carry 3.
        let bytes = chunk.len().saturating_sub(1);
        for k in 0..bytes {
            let byte = (n >> (16 - 8 * k)) & 0xff;
            if !(u32::from(b'0')..=u32::from(b'9')).contains(&byte) {
                return false;
            }
            digits += 1;
        }
    }
    digits >= 17
}

/// Azure AD client secrets: 3 characters, a digit, `Q~`, then 31 to 34 more.
fn azure_client_secret(b: &[u8], i: usize) -> Option<Hit> {
    let class = |c: u8| is_alnum(c) || matches!(c, b'_' | b'~' | b'.' | b'-');
    if !at(b, i + 4, b"Q~") || !b.get(i + 3).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    if !b[i..i + 3]
        .iter()
        .all(|&c| is_alnum(c) || matches!(c, b'_' | b'~' | b'.'))
    {
        return None;
    }
    let e = run(b, i + 6, class);
    ((31..=34).contains(&(e - (i + 6))) && Classes::of(&b[i + 6..e]).count() == 3).then_some(Hit {
        kind: "azure_client_secret",
        start: i,
        end: e,
    })
}

/// Terraform Cloud API tokens: 14 characters, `.atlasv1.`, 60 to 70 more.
fn terraform_token(b: &[u8], i: usize) -> Option<Hit> {
    if !at(b, i + 14, b".atlasv1.") || run(b, i, is_alnum) != i + 14 {
        return None;
    }
    let s = i + 23;
    let e = run(b, s, |c| is_b64url(c) || c == b'=');
    (60..=70).contains(&(e - s)).then_some(Hit {
        kind: "terraform_token",
        start: i,
        end: e,
    })
}
