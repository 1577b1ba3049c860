//! Sealed secrets at rest.
//!
//! Credentials hearth must keep (provider keys, channel tokens) are stored
//! sealed with XChaCha20-Poly1305 under a 32-byte master key that the operator
//! supplies as base64 in `HEARTH_SECRET_KEY`. The master key never touches the
//! database, so a copied database file alone reveals no credential.
//!
//! Sealed format (version 1): `0x01 || nonce (24 bytes) || ciphertext || tag (16 bytes)`.
//! The nonce is random per seal: XChaCha's 192-bit nonce makes random nonces
//! safe without a counter that would have to survive restarts. The secret's
//! name is the associated data, so a sealed value copied under another name
//! fails to open instead of silently becoming that other secret.
//!
//! Plaintext and key material live in zeroizing buffers and are wiped on drop.
//! One limit: `chacha20poly1305` is built without its `zeroize` feature here,
//! so the cipher's short-lived internal copy of the key (created per call) is
//! not wiped; enabling `features = ["zeroize"]` on that dependency closes it.

use std::fmt;

use chacha20poly1305::{AeadInOut, KeyInit, XChaCha20Poly1305};
use data_encoding::{BASE64, BASE64_NOPAD};
use zeroize::{Zeroize, Zeroizing};

/// Format version written as the first byte of every sealed value.
const VERSION: u8 = 1;
/// Length of the XChaCha20 nonce.
const NONCE_LEN: usize = 24;
/// Length of the Poly1305 tag.
const TAG_LEN: usize = 16;
/// Length of the master key.
const KEY_LEN: usize = 32;
/// Shortest possible sealed value: version, nonce, tag, empty ciphertext.
const MIN_SEALED_LEN: usize = 1 + NONCE_LEN + TAG_LEN;

/// A failure to load the master key or to seal or open a secret. No variant
/// ever carries key material or plaintext.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The key string was empty (or only whitespace).
    #[error(
        "HEARTH_SECRET_KEY is empty; generate one with `openssl rand -base64 32` or `hearth secrets keygen`"
    )]
    EmptyKey,
    /// The key string is not standard base64.
    #[error(
        "HEARTH_SECRET_KEY is not valid base64 (problem at character {position}); generate one with `openssl rand -base64 32` or `hearth secrets keygen`"
    )]
    KeyNotBase64 {
        /// Zero-based position of the offending character.
        position: usize,
    },
    /// The key decodes to a length other than 32 bytes.
    #[error(
        "HEARTH_SECRET_KEY decodes to {len} bytes but must be exactly 32; generate one with `openssl rand -base64 32` or `hearth secrets keygen`"
    )]
    KeyWrongLength {
        /// Decoded length in bytes.
        len: usize,
    },
    /// Authentication failed: the key differs from the one that sealed the
    /// value, the value was modified, or it was sealed under another name.
    #[error(
        "cannot open secret `{name}`: wrong HEARTH_SECRET_KEY, or the stored value is corrupt or belongs to another secret name; restore the key used to seal it or set the secret again"
    )]
    WrongKeyOrCorrupt {
        /// The secret's name.
        name: String,
    },
    /// The sealed value is shorter than any valid one.
    #[error(
        "cannot open secret `{name}`: stored value is {len} bytes, shorter than the minimum {MIN_SEALED_LEN} (truncated or corrupt); set the secret again"
    )]
    Truncated {
        /// The secret's name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The first byte names a format this build does not know.
    #[error(
        "cannot open secret `{name}`: unknown sealed format version {version} (sealed by a newer hearth, or corrupt)"
    )]
    UnsupportedVersion {
        /// The secret's name.
        name: String,
        /// The version byte found.
        version: u8,
    },
    /// The value opened but is not UTF-8 text.
    #[error("secret `{name}` opened but is not valid UTF-8 text; set it again")]
    NotUtf8 {
        /// The secret's name.
        name: String,
    },
    /// Encryption refused the input (only for absurdly large values).
    #[error("cannot seal secret `{name}`: value too large")]
    SealFailed {
        /// The secret's name.
        name: String,
    },
    /// The operating system's random source failed.
    #[error("cannot read random bytes from the operating system: {0}")]
    Random(String),
}

/// A secret's text, wiped from memory when dropped. `Debug` and `Display`
/// print `[redacted]` so it cannot leak through logs or error chains; read it
/// with [`SecretString::expose`].
#[derive(Clone, Default)]
pub struct SecretString(Zeroizing<String>);

impl SecretString {
    /// Wraps `value`; its buffer is wiped when the `SecretString` drops.
    pub fn new(value: String) -> Self {
        Self(Zeroizing::new(value))
    }

    /// The secret's text. Named so every use is easy to find in review.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }
}

impl From<String> for SecretString {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// Seals and opens secrets under the master key from `HEARTH_SECRET_KEY`.
/// The key is wiped when the `Sealer` drops; `Debug` never prints it.
pub struct Sealer {
    key: Zeroizing<[u8; KEY_LEN]>,
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer").finish_non_exhaustive()
    }
}

impl Sealer {
    /// Builds a sealer from base64 key material (standard alphabet, padding
    /// optional, surrounding whitespace ignored so `openssl rand -base64 32`
    /// output pasted with its newline works). It must decode to exactly 32 bytes.
    pub fn from_base64(key_b64: &str) -> Result<Self, SecretError> {
        let trimmed = key_b64.trim();
        if trimmed.is_empty() {
            return Err(SecretError::EmptyKey);
        }
        // Padding is optional, so strip it and decode strictly without it;
        // more than two `=` is never valid base64.
        let unpadded = trimmed.trim_end_matches('=');
        if trimmed.len() - unpadded.len() > 2 {
            return Err(SecretError::KeyNotBase64 {
                position: unpadded.len() + 2,
            });
        }
        let input = unpadded.as_bytes();
        let decoded_len =
            BASE64_NOPAD
                .decode_len(input.len())
                .map_err(|e| SecretError::KeyNotBase64 {
                    position: e.position,
                })?;
        // Decode into a zeroizing buffer so no stray copy of the key survives.
        let mut buf = Zeroizing::new(vec![0u8; decoded_len]);
        let len =
            BASE64_NOPAD
                .decode_mut(input, &mut buf)
                .map_err(|e| SecretError::KeyNotBase64 {
                    position: e.error.position,
                })?;
        if len != KEY_LEN {
            return Err(SecretError::KeyWrongLength { len });
        }
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        key.copy_from_slice(&buf[..KEY_LEN]);
        Ok(Self { key })
    }

    /// A fresh cipher per call: keeps the only long-lived key copy in the
    /// zeroizing field (see the module note on the cipher's own copy).
    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new((&*self.key).into())
    }

    /// Seals `plaintext` as the secret `name` (a random nonce each time, so
    /// sealing the same value twice gives different bytes).
    pub fn seal(&self, name: &str, plaintext: &[u8]) -> Result<Vec<u8>, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| SecretError::Random(e.to_string()))?;
        // Exact capacity: the plaintext is copied once and never reallocated,
        // so no unwiped copy is left behind in a freed buffer.
        let mut out = Vec::with_capacity(MIN_SEALED_LEN + plaintext.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(plaintext);
        let tag = match self.cipher().encrypt_inout_detached(
            (&nonce).into(),
            name.as_bytes(),
            (&mut out[1 + NONCE_LEN..]).into(),
        ) {
            Ok(tag) => tag,
            Err(_) => {
                out.zeroize();
                return Err(SecretError::SealFailed {
                    name: name.to_owned(),
                });
            }
        };
        out.extend_from_slice(&tag);
        Ok(out)
    }

    /// Opens a value sealed as the secret `name`. Any mismatch (key, name,
    /// modified bytes) is [`SecretError::WrongKeyOrCorrupt`].
    pub fn open(&self, name: &str, sealed: &[u8]) -> Result<SecretString, SecretError> {
        let Some((&version, body)) = sealed.split_first() else {
            return Err(SecretError::Truncated {
                name: name.to_owned(),
                len: 0,
            });
        };
        if version != VERSION {
            return Err(SecretError::UnsupportedVersion {
                name: name.to_owned(),
                version,
            });
        }
        let truncated = || SecretError::Truncated {
            name: name.to_owned(),
            len: sealed.len(),
        };
        let (nonce, rest) = body
            .split_first_chunk::<NONCE_LEN>()
            .ok_or_else(truncated)?;
        let (ciphertext, tag) = rest.split_last_chunk::<TAG_LEN>().ok_or_else(truncated)?;
        let mut buf = Zeroizing::new(ciphertext.to_vec());
        self.cipher()
            .decrypt_inout_detached(
                nonce.into(),
                name.as_bytes(),
                buf.as_mut_slice().into(),
                tag.into(),
            )
            .map_err(|_| SecretError::WrongKeyOrCorrupt {
                name: name.to_owned(),
            })?;
        // Move the buffer out (no copy) so the String owns the only plaintext.
        let bytes = std::mem::take(&mut *buf);
        match String::from_utf8(bytes) {
            Ok(text) => Ok(SecretString::new(text)),
            Err(e) => {
                e.into_bytes().zeroize();
                Err(SecretError::NotUtf8 {
                    name: name.to_owned(),
                })
            }
        }
    }
}

/// A new random 32-byte master key as padded standard base64, suitable for
/// `HEARTH_SECRET_KEY` (what `hearth secrets keygen` prints).
pub fn generate_key_base64() -> Result<String, SecretError> {
    let mut key = Zeroizing::new([0u8; KEY_LEN]);
    getrandom::fill(&mut *key).map_err(|e| SecretError::Random(e.to_string()))?;
    Ok(BASE64.encode(&*key))
}
