//! Keys and signatures of executable skills: ed25519 over the canonical
//! manifest (sorted keys, no whitespace, `signature` left out).

use std::fmt::Write as _;

use data_encoding::BASE64;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The prefix of a public key as written in `[skills] trusted_keys`.
pub const PUBLIC_PREFIX: &str = "ed25519:";

/// A public key trusted to sign skills.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedKey {
    /// First 16 hex characters of the SHA-256 of the key's 32 bytes.
    pub key_id: String,
    key: VerifyingKey,
}

impl TrustedKey {
    /// Parses `ed25519:<base64>`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = |why: &str| Error::Key(format!("{text:?}: {why}"));
        let b64 = text
            .trim()
            .strip_prefix(PUBLIC_PREFIX)
            .ok_or_else(|| bad("does not start with \"ed25519:\""))?;
        let bytes = BASE64
            .decode(b64.as_bytes())
            .map_err(|_| bad("is not base64"))?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad("is not 32 bytes long"))?;
        let key = VerifyingKey::from_bytes(&bytes).map_err(|_| bad("is not an ed25519 key"))?;
        Ok(Self {
            key_id: key_id(&bytes),
            key,
        })
    }

    /// Whether `signature` (base64) signs `message` with this key.
    pub fn verifies(&self, message: &[u8], signature: &str) -> bool {
        let Ok(bytes) = BASE64.decode(signature.trim().as_bytes()) else {
            return false;
        };
        let Ok(bytes) = <[u8; 64]>::try_from(bytes) else {
            return false;
        };
        self.key
            .verify_strict(message, &Signature::from_bytes(&bytes))
            .is_ok()
    }
}

/// `key_id`: the first 16 hex characters of the SHA-256 of a public key.
pub fn key_id(public: &[u8; 32]) -> String {
    hex(&Sha256::digest(public))[..16].to_owned()
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A private signing key, as `hearth skills keygen` writes it.
pub struct PrivateKey(SigningKey);

impl PrivateKey {
    /// A key from 32 random bytes.
    pub fn generate() -> Result<Self> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| Error::Key(format!("no randomness: {e}")))?;
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    /// Reads a key file's text: the base64 of the 32-byte seed.
    pub fn parse(text: &str) -> Result<Self> {
        let bytes = BASE64
            .decode(text.trim().as_bytes())
            .map_err(|_| Error::Key("the private key file is not base64".into()))?;
        let seed: [u8; 32] = bytes
            .try_into()
            .map_err(|_| Error::Key("the private key file does not hold 32 bytes".into()))?;
        Ok(Self(SigningKey::from_bytes(&seed)))
    }

    /// The key file's text.
    pub fn to_file_text(&self) -> String {
        format!("{}\n", BASE64.encode(self.0.as_bytes()))
    }

    /// `ed25519:<base64>`, for `[skills] trusted_keys`.
    pub fn public(&self) -> String {
        format!(
            "{PUBLIC_PREFIX}{}",
            BASE64.encode(self.0.verifying_key().as_bytes())
        )
    }

    /// This key's `key_id`.
    pub fn key_id(&self) -> String {
        key_id(self.0.verifying_key().as_bytes())
    }

    /// The base64 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> String {
        BASE64.encode(&self.0.sign(message).to_bytes())
    }
}

/// The bytes that are signed: `manifest` without `signature`, as JSON with
/// keys sorted and no whitespace. Sorted here rather than trusting
/// `serde_json::Map`'s order, which a workspace feature could change.
pub fn canonical(manifest: &Value) -> Vec<u8> {
    let mut out = String::new();
    match manifest {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().filter(|k| *k != "signature").collect();
            keys.sort();
            write_object(&mut out, keys.into_iter().map(|k| (k, &map[k])));
        }
        other => write_value(&mut out, other),
    }
    out.into_bytes()
}

fn write_object<'a>(out: &mut String, entries: impl Iterator<Item = (&'a String, &'a Value)>) {
    out.push('{');
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.clone()).to_string());
        out.push(':');
        write_value(out, v);
    }
    out.push('}');
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            write_object(out, keys.into_iter().map(|k| (k, &map[k])));
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, v);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_sorts_keys_drops_signature_and_has_no_whitespace() {
        let v = json!({
            "signature": "x", "b": [1, {"z": true, "a": null}], "a": "é \"q\"\n",
            "files": {"z.sh": "00", "a b.txt": "11"}
        });
        assert_eq!(
            String::from_utf8(canonical(&v)).unwrap(),
            r#"{"a":"é \"q\"\n","b":[1,{"a":null,"z":true}],"files":{"a b.txt":"11","z.sh":"00"}}"#
        );
    }

    #[test]
    fn sign_and_verify_round_trip() {
        let key = PrivateKey::generate().unwrap();
        let again = PrivateKey::parse(&key.to_file_text()).unwrap();
        assert_eq!(again.public(), key.public());
        let trusted = TrustedKey::parse(&key.public()).unwrap();
        assert_eq!(trusted.key_id, key.key_id());
        assert_eq!(trusted.key_id.len(), 16);
        let sig = key.sign(b"manifest");
        assert!(trusted.verifies(b"manifest", &sig));
        assert!(!trusted.verifies(b"manifest!", &sig));
        assert!(!trusted.verifies(b"manifest", "not base64"));
        assert!(!trusted.verifies(b"manifest", &BASE64.encode(&[0u8; 64])));
        let other = TrustedKey::parse(&PrivateKey::generate().unwrap().public()).unwrap();
        assert!(!other.verifies(b"manifest", &sig));
    }

    #[test]
    fn key_id_is_sha256_prefix() {
        // SHA-256 of 32 zero bytes starts with 66687aadf862bd77.
        assert_eq!(key_id(&[0u8; 32]), "66687aadf862bd77");
        for bad in ["ed25519:", "ed25519:AAAA", "rsa:AAAA", "ed25519:!!"] {
            assert!(TrustedKey::parse(bad).is_err(), "{bad}");
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// The canonical form is JSON that reads back as the same value
        /// (less `signature`), with no whitespace outside strings.
        #[test]
        fn canonical_form_round_trips(v in json_value()) {
            let text = String::from_utf8(canonical(&v)).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            let mut want = v.clone();
            if let Value::Object(m) = &mut want {
                m.remove("signature");
            }
            proptest::prop_assert_eq!(back, want);
            proptest::prop_assert_eq!(canonical(&serde_json::from_str(&text).unwrap()), text.into_bytes());
        }
    }
}
