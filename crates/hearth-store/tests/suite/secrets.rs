//! Sealed secrets: round trip, authentication failures, key parsing, and
//! that nothing secret leaks through Debug or Display.

use data_encoding::{BASE64, BASE64_NOPAD};
use hearth_store::secrets::{Sealer, SecretError, SecretString, generate_key_base64};

const PLAINTEXT: &str = "provider-key-value-4f1d9c2b";

fn key_b64(byte: u8) -> String {
    BASE64.encode(&[byte; 32])
}

fn sealer(byte: u8) -> Sealer {
    Sealer::from_base64(&key_b64(byte)).expect("valid key")
}

#[test]
fn round_trip() {
    let s = sealer(7);
    let sealed = s.seal("openai", PLAINTEXT.as_bytes()).unwrap();
    assert_eq!(sealed[0], 1, "version byte");
    assert_eq!(sealed.len(), 1 + 24 + PLAINTEXT.len() + 16);
    assert!(
        !sealed
            .windows(PLAINTEXT.len())
            .any(|w| w == PLAINTEXT.as_bytes()),
        "plaintext must not appear in the sealed bytes"
    );
    let opened = s.open("openai", &sealed).unwrap();
    assert_eq!(opened.expose(), PLAINTEXT);
}

#[test]
fn round_trip_empty_and_unicode() {
    let s = sealer(9);
    for value in ["", "ключ-🔑-秘密", &"x".repeat(10_000)] {
        let sealed = s.seal("n", value.as_bytes()).unwrap();
        assert_eq!(s.open("n", &sealed).unwrap().expose(), value);
    }
}

#[test]
fn generated_key_works() {
    let k = generate_key_base64().unwrap();
    assert_eq!(BASE64.decode(k.as_bytes()).unwrap().len(), 32);
    assert_ne!(k, generate_key_base64().unwrap());
    let s = Sealer::from_base64(&k).unwrap();
    let sealed = s.seal("a", b"v").unwrap();
    assert_eq!(s.open("a", &sealed).unwrap().expose(), "v");
}

#[test]
fn key_with_or_without_padding_and_whitespace() {
    let raw = [42u8; 32];
    let padded = BASE64.encode(&raw);
    let unpadded = BASE64_NOPAD.encode(&raw);
    assert!(padded.ends_with('='));
    let a = Sealer::from_base64(&padded).unwrap();
    let b = Sealer::from_base64(&unpadded).unwrap();
    let c = Sealer::from_base64(&format!("  {padded}\n")).unwrap();
    let sealed = a.seal("x", b"same key").unwrap();
    assert_eq!(b.open("x", &sealed).unwrap().expose(), "same key");
    assert_eq!(c.open("x", &sealed).unwrap().expose(), "same key");
}

#[test]
fn wrong_key_fails_cleanly() {
    let sealed = sealer(1).seal("telegram", PLAINTEXT.as_bytes()).unwrap();
    let err = sealer(2).open("telegram", &sealed).unwrap_err();
    assert!(
        matches!(&err, SecretError::WrongKeyOrCorrupt { name } if name == "telegram"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("wrong HEARTH_SECRET_KEY"), "{msg}");
    assert!(!msg.contains(PLAINTEXT));
    assert!(!format!("{err:?}").contains(PLAINTEXT));
}

#[test]
fn wrong_name_fails() {
    let s = sealer(3);
    let sealed = s.seal("github", PLAINTEXT.as_bytes()).unwrap();
    let err = s.open("gitlab", &sealed).unwrap_err();
    assert!(
        matches!(err, SecretError::WrongKeyOrCorrupt { .. }),
        "{err:?}"
    );
    // A name differing only by a trailing byte must also fail.
    assert!(s.open("github ", &sealed).is_err());
}

#[test]
fn tampering_any_byte_is_detected() {
    let s = sealer(4);
    let sealed = s.seal("slack", PLAINTEXT.as_bytes()).unwrap();
    for pos in 0..sealed.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = sealed.clone();
            bad[pos] ^= flip;
            let err = s.open("slack", &bad).unwrap_err();
            if pos == 0 {
                // The version byte is checked before authentication.
                assert!(
                    matches!(err, SecretError::UnsupportedVersion { .. }),
                    "pos 0: {err:?}"
                );
            } else {
                assert!(
                    matches!(err, SecretError::WrongKeyOrCorrupt { .. }),
                    "pos {pos}: {err:?}"
                );
            }
            assert!(!err.to_string().contains(PLAINTEXT));
        }
    }
}

#[test]
fn truncated_and_extended_inputs_fail() {
    let s = sealer(5);
    let sealed = s.seal("discord", PLAINTEXT.as_bytes()).unwrap();
    for len in 0..sealed.len() {
        let err = s.open("discord", &sealed[..len]).unwrap_err();
        if len < 1 + 24 + 16 {
            assert!(
                matches!(err, SecretError::Truncated { .. }),
                "len {len}: {err:?}"
            );
        } else {
            assert!(
                matches!(err, SecretError::WrongKeyOrCorrupt { .. }),
                "len {len}: {err:?}"
            );
        }
    }
    let mut longer = sealed.clone();
    longer.push(0);
    assert!(s.open("discord", &longer).is_err());
}

#[test]
fn same_plaintext_seals_differently() {
    let s = sealer(6);
    let a = s.seal("k", PLAINTEXT.as_bytes()).unwrap();
    let b = s.seal("k", PLAINTEXT.as_bytes()).unwrap();
    assert_ne!(a, b);
    assert_ne!(a[1..25], b[1..25], "nonces must differ");
    assert_eq!(s.open("k", &a).unwrap().expose(), PLAINTEXT);
    assert_eq!(s.open("k", &b).unwrap().expose(), PLAINTEXT);
}

#[test]
fn non_utf8_plaintext_is_reported() {
    let s = sealer(8);
    let sealed = s.seal("bin", &[0xff, 0xfe, 0x00]).unwrap();
    let err = s.open("bin", &sealed).unwrap_err();
    assert!(matches!(err, SecretError::NotUtf8 { .. }), "{err:?}");
}

/// Which error a bad key must produce.
type ErrCheck = fn(&SecretError) -> bool;

#[test]
fn bad_keys_are_rejected_with_guidance() {
    let cases: Vec<(String, ErrCheck)> = vec![
        (String::new(), |e| matches!(e, SecretError::EmptyKey)),
        ("   \n".into(), |e| matches!(e, SecretError::EmptyKey)),
        ("not base64 at all!".into(), |e| {
            matches!(e, SecretError::KeyNotBase64 { .. })
        }),
        ("@@@@".into(), |e| {
            matches!(e, SecretError::KeyNotBase64 { .. })
        }),
        ("QUJD===".into(), |e| {
            matches!(e, SecretError::KeyNotBase64 { .. })
        }),
        (BASE64.encode(&[1u8; 31]), |e| {
            matches!(e, SecretError::KeyWrongLength { len: 31 })
        }),
        (BASE64.encode(&[1u8; 33]), |e| {
            matches!(e, SecretError::KeyWrongLength { len: 33 })
        }),
        (BASE64.encode(&[1u8; 16]), |e| {
            matches!(e, SecretError::KeyWrongLength { len: 16 })
        }),
    ];
    for (input, check) in cases {
        let err = Sealer::from_base64(&input).unwrap_err();
        assert!(check(&err), "{input:?}: {err:?}");
        let msg = err.to_string();
        assert!(msg.contains("HEARTH_SECRET_KEY"), "{msg}");
        assert!(msg.contains("openssl rand -base64 32"), "{msg}");
        assert!(msg.contains("hearth secrets keygen"), "{msg}");
    }
}

#[test]
fn debug_and_display_never_show_secrets() {
    let secret = SecretString::new(PLAINTEXT.to_owned());
    assert_eq!(format!("{secret:?}"), "[redacted]");
    assert_eq!(format!("{secret}"), "[redacted]");
    assert_eq!(
        format!("{:#?}", Some(secret.clone())),
        "Some(\n    [redacted],\n)"
    );
    assert_eq!(secret.expose(), PLAINTEXT);

    let key = key_b64(0x5a);
    let s = Sealer::from_base64(&key).unwrap();
    let dbg = format!("{s:?} {s:#?}");
    assert!(!dbg.contains(&key), "{dbg}");
    assert!(!dbg.contains("90, 90"), "raw key bytes leaked: {dbg}");
    assert!(!dbg.to_lowercase().contains("5a5a"), "{dbg}");

    let opened = s
        .open("n", &s.seal("n", PLAINTEXT.as_bytes()).unwrap())
        .unwrap();
    assert!(!format!("{opened:?} {opened}").contains(PLAINTEXT));
}
