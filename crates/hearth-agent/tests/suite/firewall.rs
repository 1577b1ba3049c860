//! Secret scanner: every supported format is redacted with the right kind and
//! its surroundings kept; ordinary text is left byte-for-byte alone;
//! placeholders are stable; redaction is idempotent and never panics.
//! The data is in `corpus`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use hearth_agent::firewall::{Redacted, SecretScanner};
use serde_json::json;

use super::corpus::{DIGITS, Rng, UPPER, alnum, b64, b64url, corpus, ordinary_texts};

fn assert_idempotent(s: &SecretScanner, text: &str) {
    let once = s.redact(text).text.into_owned();
    let twice = s.redact(&once);
    assert!(
        twice.is_clean(),
        "second pass found {:?} in {once:?}",
        twice.findings
    );
    assert_eq!(twice.text, once);
}

#[test]
fn every_kind_is_redacted_with_context_kept() {
    let s = SecretScanner::new();
    let cases = corpus();
    let mut kinds: Vec<&str> = cases.iter().map(|c| c.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert!(kinds.len() >= 30, "only {} kinds: {kinds:?}", kinds.len());
    for c in &cases {
        let text = format!("{}{}{}", c.before, c.secret, c.after);
        let r = s.redact(&text);
        let want = format!(
            "{}{}{}",
            c.before,
            s.placeholder(c.kind, &c.secret),
            c.after
        );
        assert_eq!(r.text, want, "kind {}", c.kind);
        assert_eq!(r.findings.len(), 1, "{}: {:?}", c.kind, r.findings);
        let f = r.findings[0];
        assert_eq!(f.kind, c.kind);
        assert_eq!(&text[f.start..f.end], c.secret);
        assert!(!r.text.contains(&c.secret));
        assert_idempotent(&s, &text);
    }
}

#[test]
fn all_kinds_in_one_document() {
    let s = SecretScanner::new();
    let cases = corpus();
    let doc: String = cases
        .iter()
        .map(|c| format!("{}{}{}\n\n", c.before, c.secret, c.after))
        .collect();
    let r = s.redact(&doc);
    let got: Vec<&str> = r.findings.iter().map(|f| f.kind).collect();
    let want: Vec<&str> = cases.iter().map(|c| c.kind).collect();
    assert_eq!(got, want);
    for c in &cases {
        assert!(!r.text.contains(&c.secret), "{} leaked", c.kind);
    }
    assert_idempotent(&s, &doc);
}

#[test]
fn placeholders_are_stable_and_distinct() {
    let s = SecretScanner::new();
    let mut r = Rng(42);
    let a = format!("{}{}", "gh", "p_") + &r.string(&alnum(), 36, "aZ9");
    let b = format!("{}{}", "gh", "p_") + &r.string(&alnum(), 36, "aZ9");
    let text = format!("first {a}, again {a}, other {b}");
    let out = s.redact(&text);
    let pa = s.placeholder("github_token", &a);
    let pb = s.placeholder("github_token", &b);
    assert_ne!(pa, pb);
    assert_eq!(out.text, format!("first {pa}, again {pa}, other {pb}"));
    // Shape: [REDACTED:<kind>:<8 lowercase hex>]
    let tag = pa
        .strip_prefix("[REDACTED:github_token:")
        .and_then(|t| t.strip_suffix(']'))
        .unwrap();
    assert_eq!(tag.len(), 8);
    assert!(
        tag.bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    // Another scanner in the same process gives the same placeholder.
    assert_eq!(SecretScanner::new().redact(&text).text, out.text);
    assert!(!pa.contains(&a[4..]));
}

#[test]
fn ordinary_text_is_untouched() {
    let s = SecretScanner::new();
    let texts = ordinary_texts();
    assert!(texts.len() >= 30);
    for t in &texts {
        let r = s.redact(t);
        assert!(
            r.is_clean(),
            "false positive in {t:?}: {:?} -> {}",
            r.findings,
            r.text
        );
        assert!(
            matches!(r.text, std::borrow::Cow::Borrowed(_)),
            "clean text must not allocate"
        );
        assert_eq!(r.text, t.as_str());
    }
}

#[test]
fn redacting_redacted_text_changes_nothing() {
    let s = SecretScanner::new();
    for c in corpus() {
        let placeholder = s.placeholder(c.kind, &c.secret);
        let text = format!("{}{}{}", c.before, placeholder, c.after);
        let r: Redacted<'_> = s.redact(&text);
        assert!(r.is_clean(), "{}: {:?}", c.kind, r.findings);
    }
}

#[test]
fn token_as_url_user_and_password_both_redacted() {
    let s = SecretScanner::new();
    let mut r = Rng(3);
    let tok = format!("{}{}", "gh", "p_") + &r.string(&alnum(), 36, "aZ9");
    let text = format!("https://{tok}:x-oauth-basic@github.com/org/repo.git");
    let out = s.redact(&text);
    let kinds: Vec<_> = out.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["github_token", "url_credentials"]);
    assert!(out.text.ends_with("@github.com/org/repo.git"));
    assert_idempotent(&s, &text);
}

#[test]
fn truncated_private_key_is_redacted_up_to_blank_line() {
    let s = SecretScanner::new();
    let mut r = Rng(5);
    let body = r.string(&b64(), 64, "MIIE");
    let text = format!(
        "{}{}\n{body}\n{body}\n\nThe rest stays.",
        "-----BEGIN OPENSSH ", "PRIVATE KEY-----"
    );
    let out = s.redact(&text);
    assert_eq!(out.findings.len(), 1);
    assert_eq!(out.findings[0].kind, "private_key");
    assert!(out.text.ends_with("]\n\nThe rest stays."), "{}", out.text);
    assert!(!out.text.contains(&body));
}

#[test]
fn json_values_are_redacted_in_place() {
    let s = SecretScanner::new();
    let mut r = Rng(11);
    let gh = format!("{}{}", "gh", "p_") + &r.string(&alnum(), 36, "aZ9");
    let opaque = r.string(&alnum(), 32, "Xy7");
    let aws = format!("{}{}", "AK", "IA") + &r.string(&format!("{UPPER}{DIGITS}"), 16, "Z7");
    let mut v = json!({
        "messages": [
            {"role": "user", "content": format!("my token is {gh}, keep it safe")},
            {"role": "tool", "content": {"password": opaque.clone(), "user": "admin"}}
        ],
        "count": 3,
        "ok": true,
        "note": null,
        "thread_key": "telegram:42",
        aws.clone(): "key in an object key",
    });
    let n = s.redact_json(&mut v);
    assert_eq!(n, 3);
    let text = v.to_string();
    assert!(!text.contains(&gh) && !text.contains(&opaque) && !text.contains(&aws));
    assert_eq!(
        v["messages"][0]["content"],
        format!(
            "my token is {}, keep it safe",
            s.placeholder("github_token", &gh)
        )
    );
    assert_eq!(
        v["messages"][1]["content"]["password"],
        s.placeholder("generic_secret", &opaque)
    );
    assert_eq!(v["messages"][1]["content"]["user"], "admin");
    assert_eq!(v["thread_key"], "telegram:42");
    assert_eq!(v["count"], 3);
    assert!(v.get(s.placeholder("aws_access_key", &aws)).is_some());
    // Idempotent on JSON too.
    assert_eq!(s.redact_json(&mut v), 0);
}

#[test]
fn random_ascii_never_panics_and_stays_consistent() {
    let s = SecretScanner::new();
    let mut r = Rng(0xdead_beef_cafe_f00d);
    let fragments = [
        "AKIA",
        "ASIA",
        "AIza",
        "ghp_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xapp-",
        "sk-",
        "sk-ant-",
        "sk_live_",
        "ya29.",
        "hf_",
        "npm_",
        "pypi-AgEI",
        "SG.",
        "SK",
        "eyJ",
        "://",
        "@",
        ":",
        "=",
        "\"",
        "'",
        "Bearer ",
        "Authorization: Basic ",
        "Bot ",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "[REDACTED:",
        "]",
        "api_key=",
        "\"token\": \"",
        "postgres://",
        "https://hooks.slack.com/services/",
        "discord.com/api/webhooks/",
        "/bot",
        "\n\n",
        "\\n",
        "\\\\n",
        "\\\"",
        "\\u003d",
        "hvs.",
        "HRKU-AA",
        "dapi",
        "dp.pt.",
        "EAAA",
        "glsa_",
        "MTIzNDU2Nzg5MDEyMzQ1Njc4",
        "password=",
        "SECRET_KEY='",
        "1aB0Q~",
        "é",
        "東",
        "🎉",
    ];
    let printable: String = (0x20u8..0x7f).map(char::from).collect::<String>() + "\n\t";
    for round in 0..4000 {
        let mut text = String::new();
        let len = r.below(200);
        while text.len() < len {
            if r.below(4) == 0 {
                text.push_str(fragments[r.below(fragments.len())]);
            } else {
                let n = 1 + r.below(30);
                let alphabet = if r.below(2) == 0 {
                    alnum()
                } else {
                    printable.clone()
                };
                text.push_str(&r.string(&alphabet, n, ""));
            }
        }
        let out = s.redact(&text);
        let mut last = 0;
        for f in &out.findings {
            assert!(
                f.start >= last && f.start < f.end && f.end <= text.len(),
                "round {round}"
            );
            assert!(text.is_char_boundary(f.start) && text.is_char_boundary(f.end));
            last = f.end;
        }
        if out.is_clean() {
            assert_eq!(out.text, text);
        }
        assert_idempotent(&s, &text);
    }
}

#[test]
fn second_round_finds_are_folded_in() {
    // The GCP key is 35 chars only once the private key after it is a
    // placeholder: the rescan inside `redact` must catch it in one call.
    let s = SecretScanner::new();
    let mut r = Rng(17);
    let gcp = format!("{}{}", "AI", "za") + &r.string(&b64url(), 34, "Sy") + "-";
    let pem = format!(
        "{}{}\n{}\n{}{}",
        "-----BEGIN ",
        "PRIVATE KEY-----",
        r.string(&b64(), 64, "MIIE"),
        "-----END ",
        "PRIVATE KEY-----"
    );
    let text = format!("x {gcp}{pem} y");
    let out = s.redact(&text);
    let kinds: Vec<_> = out.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["gcp_api_key", "private_key"], "{}", out.text);
    assert_eq!(&text[out.findings[0].start..out.findings[0].end], gcp);
    assert_eq!(&text[out.findings[1].start..out.findings[1].end], pem);
    assert!(out.text.starts_with("x [REDACTED:gcp_api_key:") && out.text.ends_with("] y"));
    assert_idempotent(&s, &text);
}

/// A service-account file's text (its key's newlines JSON-escaped), as a
/// fetch tool returns it: inside a JSON result that is serialized again into
/// the untrusted-content string. The key must go at every nesting (issue 8
/// item 16).
fn service_account_in_tool_result(body: &str) -> serde_json::Value {
    let pem = format!(
        "{}{}\n{body}\n{body}\n{}{}\n",
        "-----BEGIN ", "PRIVATE KEY-----", "-----END ", "PRIVATE KEY-----"
    );
    let page = serde_json::to_string_pretty(&json!({
        "type": "service_account",
        "private_key_id": "0123abcd",
        "private_key": pem,
        "client_email": "svc@example.iam.gserviceaccount.com",
    }))
    .unwrap();
    let inner = json!({ "url": "https://example.com/sa.json", "content": page }).to_string();
    json!({ "untrusted_content": format!("<untrusted-content>\n{inner}\n</untrusted-content>") })
}

#[test]
fn private_key_in_json_inside_a_string_is_redacted() {
    let s = SecretScanner::new();
    let body = Rng(23).string(&b64(), 64, "MIIE");
    let mut v = service_account_in_tool_result(&body);
    let flat = v.to_string();
    assert_eq!(s.redact_json(&mut v), 1);
    let text = v.to_string();
    assert!(!text.contains(&body), "{text}");
    assert!(text.contains("[REDACTED:private_key:"), "{text}");
    assert!(text.contains("client_email") && text.contains("private_key_id"));
    assert_eq!(s.redact_json(&mut v), 0, "idempotent");
    // The same as flat text (a tool result that is not JSON): three levels
    // of escaping.
    let out = s.redact(&flat);
    let kinds: Vec<_> = out.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["private_key"], "{}", out.text);
    assert!(!out.text.contains(&body));
    assert!(
        serde_json::from_str::<serde_json::Value>(&out.text).is_ok(),
        "still JSON"
    );
    assert_idempotent(&s, &flat);
}

#[test]
fn escapes_do_not_hide_tokens_or_create_false_positives() {
    let s = SecretScanner::new();
    let mut r = Rng(29);
    let gh = format!("{}{}", "gh", "p_") + &r.string(&alnum(), 36, "aZ9");
    // A token split from its key-like name only by escaped quotes.
    let text = format!(r#"{{\"config\": \"{{\\\"api_token\\\": \\\"{gh}\\\"}}\"}}"#);
    let out = s.redact(&text);
    assert_eq!(out.findings.len(), 1, "{}", out.text);
    assert!(!out.text.contains(&gh));
    // Escaped ordinary text stays as it is.
    let escaped = serde_json::to_string(&ordinary_texts().join("\n")).unwrap();
    let out = s.redact(&escaped);
    assert!(out.is_clean(), "{:?} -> {}", out.findings, out.text);
}
