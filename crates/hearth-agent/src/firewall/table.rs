//! Token formats that are a fixed prefix plus a body of one character class,
//! as a table: one line per format, found through an index by first byte so
//! a token start costs a look at the few formats sharing its first byte.
//!
//! Formats with structure beyond "prefix + body" (checksummed, dotted,
//! contextual) are hand-written in `tokens`.

use super::entropy::Classes;
use super::patterns::{Hit, at, boundary_before, is_alnum, is_b64, is_b64url, is_hex, run};

/// One format: `prefix` then `min..=max` bytes of `body`, with at least
/// `classes` of upper/lower/digit in the body (random tokens have all three;
/// prose after a look-alike prefix rarely does).
struct Format {
    prefix: &'static [u8],
    body: fn(u8) -> bool,
    min: usize,
    max: usize,
    classes: u8,
    kind: &'static str,
    /// Only the body is secret; the prefix (a host, a cookie name) stays so
    /// the text still says what leaked.
    keep_prefix: bool,
}

const fn f(
    prefix: &'static [u8],
    body: fn(u8) -> bool,
    min: usize,
    max: usize,
    classes: u8,
    kind: &'static str,
) -> Format {
    Format {
        prefix,
        body,
        min,
        max,
        classes,
        kind,
        keep_prefix: false,
    }
}

const fn kept(mut x: Format) -> Format {
    x.keep_prefix = true;
    x
}

fn alnum(c: u8) -> bool {
    is_alnum(c)
}
fn hex(c: u8) -> bool {
    is_hex(c)
}
fn b64url(c: u8) -> bool {
    is_b64url(c)
}
/// base64url with `=` padding and `.` separators.
fn b64url_dot(c: u8) -> bool {
    is_b64url(c) || c == b'.' || c == b'='
}
/// Standard base64 with padding.
fn b64_pad(c: u8) -> bool {
    is_b64(c) || c == b'='
}
fn alnum_underscore(c: u8) -> bool {
    is_alnum(c) || c == b'_'
}
fn alnum_dash(c: u8) -> bool {
    is_alnum(c) || c == b'-'
}
fn alnum_dot(c: u8) -> bool {
    is_alnum(c) || c == b'.'
}
fn upper_digit(c: u8) -> bool {
    c.is_ascii_uppercase() || c.is_ascii_digit()
}
fn upper_digit_dash(c: u8) -> bool {
    upper_digit(c) || c == b'-'
}
fn letters(c: u8) -> bool {
    c.is_ascii_alphabetic()
}
fn hex_dash(c: u8) -> bool {
    is_hex(c) || c == b'-'
}
/// A URL path with an `@` in it (Teams webhooks).
fn url_path(c: u8) -> bool {
    is_b64url(c) || c == b'/' || c == b'@'
}
/// Twitter bearer tokens are URL-encoded.
fn alnum_percent(c: u8) -> bool {
    is_alnum(c) || c == b'%'
}

/// The formats, sorted by first byte (the index below relies on it; a unit
/// test checks). Within one first byte, longer prefixes come first.
const FORMATS: &[Format] = &[
    f(b"4b1d", alnum, 38, 38, 2, "clickhouse_key"),
    f(
        b"A3-",
        upper_digit_dash,
        36,
        37,
        2,
        "onepassword_secret_key",
    ),
    f(b"A3T", upper_digit, 17, 17, 1, "aws_access_key"),
    f(
        b"AAAAAAAAAAAAAAAAAAAAAA",
        alnum_percent,
        80,
        100,
        3,
        "twitter_bearer_token",
    ),
    f(b"ABSK", b64_pad, 109, 272, 3, "aws_bedrock_key"),
    f(b"AKCp", alnum, 69, 69, 2, "artifactory_key"),
    f(b"API-", upper_digit, 26, 26, 2, "octopus_deploy_key"),
    f(b"AQVN", b64url, 35, 38, 3, "yandex_key"),
    f(b"ATATT3", b64url_dot, 180, 200, 3, "atlassian_token"),
    f(b"CLOJARS_", alnum, 60, 60, 2, "clojars_token"),
    f(b"EAAA", b64url, 22, 60, 3, "square_token"),
    f(b"EAAC", alnum, 100, 4096, 3, "facebook_token"),
    f(b"EAAM", alnum, 100, 4096, 3, "facebook_token"),
    f(b"EZAK", alnum, 54, 54, 2, "easypost_key"),
    f(b"EZTK", alnum, 54, 54, 2, "easypost_key"),
    f(b"FLWPUBK_TEST-", alnum_dash, 34, 34, 2, "flutterwave_key"),
    f(b"FLWSECK_TEST-", alnum_dash, 12, 34, 2, "flutterwave_key"),
    f(b"GR1348941", b64url, 20, 255, 2, "gitlab_token"),
    f(b"HRKU-", b64url, 40, 80, 3, "heroku_api_key"),
    f(b"LTAI", alnum, 20, 20, 2, "alibaba_access_key"),
    f(b"NRAK-", alnum, 27, 27, 2, "new_relic_key"),
    f(b"NRII-", alnum_dash, 32, 32, 2, "new_relic_key"),
    f(b"NRJS-", hex, 19, 19, 2, "new_relic_key"),
    f(b"PMAK-", hex_dash, 59, 59, 2, "postman_key"),
    f(b"YC", b64url, 38, 38, 3, "yandex_key"),
    f(b"ZXlK", b64_pad, 50, 8192, 3, "jwt"),
    kept(f(b"_gitlab_session=", alnum, 32, 32, 2, "gitlab_session")),
    f(b"api_org_", letters, 34, 34, 2, "huggingface_token"),
    f(b"b_", b64url_dot, 44, 44, 3, "beamer_token"),
    f(b"bedrock-api-key-", b64_pad, 20, 4096, 3, "aws_bedrock_key"),
    f(b"cmVmd", alnum, 59, 59, 2, "artifactory_key"),
    f(b"dnkey-", b64url_dot, 79, 79, 3, "defined_networking_token"),
    f(b"dp.audit.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dp.scim.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dp.ct.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dp.pt.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dp.sa.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dp.st.", alnum, 40, 64, 2, "doppler_token"),
    f(b"dt0c01.", alnum_dot, 89, 89, 3, "dynatrace_token"),
    f(b"duffel_live_", b64url_dot, 43, 43, 3, "duffel_token"),
    f(b"duffel_test_", b64url_dot, 43, 43, 3, "duffel_token"),
    f(b"dapi", hex, 32, 32, 2, "databricks_token"),
    f(b"eyJrIjoi", b64_pad, 70, 400, 3, "grafana_token"),
    f(b"fio-u-", b64url_dot, 64, 64, 3, "frameio_token"),
    f(b"fm1a_", b64_pad, 100, 4096, 3, "flyio_token"),
    f(b"fm1r_", b64_pad, 100, 4096, 3, "flyio_token"),
    f(b"fm2_", b64_pad, 100, 4096, 3, "flyio_token"),
    f(b"fo1_", b64url, 43, 43, 3, "flyio_token"),
    f(b"glagent-", b64url, 50, 50, 2, "gitlab_token"),
    f(b"glcbt-", b64url, 22, 30, 2, "gitlab_token"),
    f(b"glffct-", b64url, 20, 20, 2, "gitlab_token"),
    f(b"glimt-", b64url, 25, 25, 2, "gitlab_token"),
    f(b"gloas-", b64url, 64, 64, 2, "gitlab_token"),
    f(b"glsa_", alnum_underscore, 41, 41, 3, "grafana_token"),
    f(b"glft-", b64url, 20, 20, 2, "gitlab_token"),
    f(b"glc_", b64_pad, 32, 400, 3, "grafana_token"),
    f(b"hvb.", b64url, 100, 400, 3, "vault_token"),
    f(b"hvr.", b64url, 24, 400, 3, "vault_token"),
    f(b"hvs.", b64url, 24, 400, 3, "vault_token"),
    f(b"ico-", alnum, 32, 32, 3, "infracost_token"),
    f(b"key-", hex, 32, 32, 2, "mailgun_key"),
    f(b"lin_api_", alnum, 40, 40, 2, "linear_api_key"),
    f(b"live_pub_", hex, 31, 31, 2, "lob_key"),
    f(b"live_", hex, 35, 35, 2, "lob_key"),
    f(b"live_", b64url_dot, 40, 40, 3, "gocardless_token"),
    f(b"ntn_", alnum, 46, 46, 3, "notion_token"),
    f(b"ops_", b64_pad, 250, 8192, 3, "onepassword_token"),
    f(b"p8e-", alnum, 32, 32, 2, "adobe_client_secret"),
    f(b"pscale_oauth_", b64url_dot, 32, 64, 2, "planetscale_token"),
    f(b"pscale_tkn_", b64url_dot, 32, 64, 2, "planetscale_token"),
    f(b"pscale_pw_", b64url_dot, 32, 64, 2, "planetscale_token"),
    f(b"pplx-", alnum, 48, 48, 3, "perplexity_key"),
    f(b"pat.", b64url_dot, 68, 68, 3, "harness_key"),
    f(b"pat", alnum_dot, 79, 79, 3, "airtable_token"),
    f(b"pk.", alnum_dot, 83, 83, 3, "mapbox_token"),
    f(b"pnu_", alnum, 36, 36, 3, "prefect_token"),
    f(b"pubkey-", hex, 32, 32, 2, "mailgun_key"),
    f(b"pul-", hex, 40, 40, 2, "pulumi_token"),
    f(b"rdme_", alnum, 70, 70, 2, "readme_token"),
    f(b"rubygems_", hex, 48, 48, 2, "rubygems_token"),
    f(b"s-s4t2af-", hex, 64, 64, 2, "intra42_secret"),
    f(b"s-s4t2ud-", hex, 64, 64, 2, "intra42_secret"),
    f(b"sat.", b64url_dot, 68, 68, 3, "harness_key"),
    f(b"sha256~", b64url, 43, 43, 3, "openshift_token"),
    f(b"shippo_live_", hex, 40, 40, 2, "shippo_token"),
    f(b"shippo_test_", hex, 40, 40, 2, "shippo_token"),
    f(b"sl.", b64url_dot, 135, 135, 3, "dropbox_token"),
    f(b"sm_aat_", alnum, 16, 16, 2, "settlemint_token"),
    f(b"sm_pat_", alnum, 16, 16, 2, "settlemint_token"),
    f(b"sm_sat_", alnum, 16, 16, 2, "settlemint_token"),
    f(b"sntrys_", b64_pad_underscore, 100, 1024, 3, "sentry_token"),
    f(b"sntryu_", hex, 64, 64, 2, "sentry_token"),
    f(b"sq0atp-", b64url, 22, 60, 3, "square_token"),
    f(b"sq0csp-", b64url, 40, 50, 3, "square_token"),
    f(b"sgp_", alnum_underscore, 40, 62, 2, "sourcegraph_token"),
    f(b"test_pub_", hex, 31, 31, 2, "lob_key"),
    f(b"test_", hex, 35, 35, 2, "lob_key"),
    f(b"tfp_", b64url_dot, 59, 59, 3, "typeform_token"),
    f(b"tk-us-", b64url, 48, 48, 3, "scalingo_token"),
    f(b"v1.0-", hex_dash, 171, 171, 2, "cloudflare_origin_key"),
    kept(f(
        b"webhook.office.com/webhookb2/",
        url_path,
        100,
        400,
        2,
        "teams_webhook",
    )),
    f(b"xkeysib-", alnum_dash, 81, 81, 2, "sendinblue_key"),
    f(b"xoxe.xoxb-", alnum_dash, 150, 200, 2, "slack_token"),
    f(b"xoxe.xoxp-", alnum_dash, 150, 200, 2, "slack_token"),
];

/// Sentry org tokens: base64 JSON, `_`, then a base64 signature.
fn b64_pad_underscore(c: u8) -> bool {
    b64_pad(c) || c == b'_'
}

/// `INDEX[c]` is the range of [`FORMATS`] whose prefix starts with byte `c`.
static INDEX: [(u16, u16); 128] = index();

const fn index() -> [(u16, u16); 128] {
    let mut idx = [(0u16, 0u16); 128];
    let mut i = 0;
    while i < FORMATS.len() {
        let c = FORMATS[i].prefix[0] as usize;
        if idx[c].1 == 0 {
            idx[c] = (i as u16, i as u16 + 1);
        } else {
            idx[c].1 = i as u16 + 1;
        }
        i += 1;
    }
    idx
}

/// The table format whose token starts at `i`, if any. The caller has
/// checked that no letter or digit precedes `i`.
pub(super) fn token(b: &[u8], i: usize) -> Option<Hit> {
    let c = usize::from(b[i]);
    let (lo, hi) = *INDEX.get(c)?;
    FORMATS[usize::from(lo)..usize::from(hi)]
        .iter()
        .find_map(|fmt| matches(b, i, fmt))
}

fn matches(b: &[u8], i: usize, fmt: &Format) -> Option<Hit> {
    if !at(b, i, fmt.prefix) {
        return None;
    }
    let s = i + fmt.prefix.len();
    let mut e = run(b, s, fmt.body);
    // Trailing dots are sentence punctuation, not token.
    while e > s && b[e - 1] == b'.' {
        e -= 1;
    }
    let n = e - s;
    if n < fmt.min || n > fmt.max || b.get(e).copied().is_some_and(is_alnum) {
        return None;
    }
    if Classes::of(&b[s..e]).count() < fmt.classes {
        return None;
    }
    Some(Hit {
        kind: fmt.kind,
        start: if fmt.keep_prefix { s } else { i },
        end: e,
    })
}

/// [`token`] for a caller that has not checked the boundary yet (digit-led
/// formats, which `tokens` routes before its own boundary check).
pub(super) fn token_at_boundary(b: &[u8], i: usize) -> Option<Hit> {
    if boundary_before(b, i) {
        token(b, i)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_by_first_byte_and_ascii() {
        for w in FORMATS.windows(2) {
            assert!(w[0].prefix[0] <= w[1].prefix[0], "{:?}", w[1].prefix);
        }
        for fmt in FORMATS {
            assert!(fmt.prefix.is_ascii() && fmt.min <= fmt.max && fmt.min > 0);
        }
    }

    #[test]
    fn index_finds_every_format() {
        for (n, fmt) in FORMATS.iter().enumerate() {
            let (lo, hi) = INDEX[usize::from(fmt.prefix[0])];
            assert!((usize::from(lo)..usize::from(hi)).contains(&n));
        }
    }
}
