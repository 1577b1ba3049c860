//! Thread and user keys: `<channel>:<kind>:<id>` strings a surface makes
//! from what it received, checked once at its edge. A [`ThreadKey`] or
//! [`UserKey`] that exists is valid (1 to 256 bytes, no control
//! characters), so the runtime takes them without checking again.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// Longest accepted key, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// Why a key was refused: it names the field, so the message can go back
/// to whoever sent it as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} must be 1 to {MAX_KEY_LEN} characters without control characters")]
pub struct KeyError {
    /// The field the key came in (`thread_key`, `user_key`, ...).
    pub field: &'static str,
}

/// Checks `value` as a key of `field`: 1 to [`MAX_KEY_LEN`] characters (as
/// JSON Schema's `maxLength` counts them, so a client generated from the API
/// document is not refused), no control characters.
pub fn check_key(field: &'static str, value: &str) -> Result<(), KeyError> {
    if value.is_empty()
        || value.chars().count() > MAX_KEY_LEN
        || value.chars().any(char::is_control)
    {
        return Err(KeyError { field });
    }
    Ok(())
}

macro_rules! key {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The field name keys of this kind come in, for messages.
            pub const FIELD: &'static str = $field;

            /// `value` as a key, when it is one.
            pub fn new(value: impl Into<String>) -> Result<Self, KeyError> {
                let value = value.into();
                check_key(Self::FIELD, &value)?;
                Ok(Self(value))
            }

            /// The key as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The key's text, owned.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = KeyError;

            fn from_str(s: &str) -> Result<Self, KeyError> {
                Self::new(s)
            }
        }

        impl TryFrom<String> for $name {
            type Error = KeyError;

            fn try_from(s: String) -> Result<Self, KeyError> {
                Self::new(s)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = KeyError;

            fn try_from(s: &str) -> Result<Self, KeyError> {
                Self::new(s)
            }
        }

        impl From<$name> for String {
            fn from(k: $name) -> String {
                k.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

key!(
    /// A conversation: one history, one run at a time
    /// (`telegram:chat:<id>`, `api:default`).
    ThreadKey,
    "thread_key"
);

key!(
    /// Who sent a message or answers a question (`telegram:user:<id>`).
    UserKey,
    "user_key"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_once_where_they_are_made() {
        assert_eq!(
            ThreadKey::new("telegram:chat:1").unwrap(),
            "telegram:chat:1"
        );
        for bad in [String::new(), "a\nb".into(), "x".repeat(MAX_KEY_LEN + 1)] {
            let e = ThreadKey::new(bad).unwrap_err();
            assert_eq!(
                e.to_string(),
                "thread_key must be 1 to 256 characters without control characters"
            );
        }
        assert_eq!(UserKey::new("").unwrap_err().field, "user_key");
        // Characters are counted, as the API document's maxLength counts them.
        assert!(UserKey::new("é".repeat(256)).is_ok());
        assert!(UserKey::new("é".repeat(257)).is_err());
    }

    #[test]
    fn keys_are_plain_strings_on_the_wire_and_checked_when_read() {
        let k = ThreadKey::new("api:default").unwrap();
        assert_eq!(serde_json::to_string(&k).unwrap(), "\"api:default\"");
        let back: ThreadKey = serde_json::from_str("\"api:default\"").unwrap();
        assert_eq!(back, k);
        assert!(serde_json::from_str::<ThreadKey>("\"\"").is_err());
        assert!(serde_json::from_str::<UserKey>("\"a\\u0000\"").is_err());
    }
}
