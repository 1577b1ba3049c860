//! Identifiers: run ids and `<provider>/<model>` references.

use std::fmt;

/// A new run id: `run_` followed by a UUIDv7, so ids sort by creation time.
pub fn new_run_id() -> String {
    format!("run_{}", uuid::Uuid::now_v7().simple())
}

/// A model reference `<provider>/<model>`, split at the first `/`.
///
/// `openrouter/anthropic/claude-sonnet-4.5` is provider `openrouter`,
/// model `anthropic/claude-sonnet-4.5`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// The provider's name in `[llm.providers.<name>]`.
    pub provider: String,
    /// The model name as the provider knows it.
    pub model: String,
}

/// A model reference that is not of the form `<provider>/<model>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("model reference {0:?} is not of the form <provider>/<model>")]
pub struct ModelRefError(pub String);

impl ModelRef {
    /// Parses `<provider>/<model>`; both parts must be non-empty.
    pub fn parse(s: &str) -> Result<Self, ModelRefError> {
        match s.split_once('/') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() && !p.contains(char::is_whitespace) => {
                Ok(Self {
                    provider: p.to_owned(),
                    model: m.to_owned(),
                })
            }
            _ => Err(ModelRefError(s.to_owned())),
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_first_slash() {
        let m = ModelRef::parse("openrouter/anthropic/claude-sonnet-4.5").unwrap();
        assert_eq!(m.provider, "openrouter");
        assert_eq!(m.model, "anthropic/claude-sonnet-4.5");
        assert_eq!(m.to_string(), "openrouter/anthropic/claude-sonnet-4.5");
    }

    #[test]
    fn rejects_malformed() {
        for bad in ["", "nomodel", "/m", "p/", "a b/c"] {
            assert!(ModelRef::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn run_ids_are_unique_and_prefixed() {
        let a = new_run_id();
        let b = new_run_id();
        assert!(a.starts_with("run_"));
        assert_ne!(a, b);
    }
}
