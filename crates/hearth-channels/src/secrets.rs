//! Where a channel's tokens come from: an environment variable or a sealed
//! secret (opened at start by the binary), never the config file.

use std::collections::BTreeMap;

use crate::error::ChannelError;

/// The environment and the sealed secrets opened for the channels.
#[derive(Default, Clone)]
pub struct TokenSources {
    /// The process environment.
    pub env: BTreeMap<String, String>,
    /// Opened sealed secrets by name.
    pub sealed: BTreeMap<String, String>,
}

impl std::fmt::Debug for TokenSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Values are secrets: only the names.
        f.debug_struct("TokenSources")
            .field("sealed", &self.sealed.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl TokenSources {
    /// The token named by `env_var` or `secret` (the secret wins when both
    /// are set). Errors say where it was looked for, never a value.
    pub fn token(
        &self,
        channel: &'static str,
        what: &str,
        env_var: Option<&str>,
        secret: Option<&str>,
    ) -> Result<String, ChannelError> {
        if let Some(name) = secret {
            return self
                .sealed
                .get(name)
                .filter(|v| !v.trim().is_empty())
                .cloned()
                .ok_or_else(|| ChannelError::NoToken {
                    channel,
                    detail: format!(
                        "the sealed secret `{name}` ({what}) is not available; store it with `hearth secrets set {name}`"
                    ),
                });
        }
        let Some(var) = env_var else {
            return Err(ChannelError::NoToken {
                channel,
                detail: format!("no {what} source is configured"),
            });
        };
        match self.env.get(var) {
            Some(v) if !v.trim().is_empty() => Ok(v.trim().to_owned()),
            Some(_) => Err(ChannelError::NoToken {
                channel,
                detail: format!("the environment variable {var} ({what}) is empty"),
            }),
            None => Err(ChannelError::NoToken {
                channel,
                detail: format!("the environment variable {var} ({what}) is not set; export it"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_or_secret_never_showing_values() {
        let mut s = TokenSources::default();
        s.env.insert("TG".into(), " 123:abc ".into());
        s.env.insert("EMPTY".into(), " ".into());
        s.sealed.insert("tg".into(), "456:def".into());
        assert_eq!(
            s.token("telegram", "bot token", Some("TG"), None).unwrap(),
            "123:abc"
        );
        assert_eq!(
            s.token("telegram", "bot token", Some("TG"), Some("tg"))
                .unwrap(),
            "456:def"
        );
        let e = s
            .token("telegram", "bot token", Some("EMPTY"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("EMPTY") && e.contains("empty"), "{e}");
        let e = s
            .token("telegram", "bot token", Some("NOPE"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("NOPE") && e.contains("not set"), "{e}");
        let e = s
            .token("telegram", "bot token", None, Some("missing"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("hearth secrets set missing"), "{e}");
        assert!(!format!("{s:?}").contains("123:abc"));
    }
}
