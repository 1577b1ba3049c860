//! Opening the sealed secrets a runtime needs at start: providers'
//! `api_key_secret`s (for the catalog) and enabled chat channels'
//! `*_secret`s (for their tokens). The master key comes only from
//! `HEARTH_SECRET_KEY` in the environment the builder was given; values are
//! never logged or put in an error message.

use std::collections::BTreeMap;

use hearth_config::Config;
use hearth_store::SecretStore;
use hearth_store::secrets::{Sealer, SecretError, SecretString};

use super::BuildError;

/// The variable holding the base64 master key.
pub const KEY_VAR: &str = "HEARTH_SECRET_KEY";

/// The sealer for the key in `env`'s `HEARTH_SECRET_KEY`; a missing or
/// invalid key is a configuration error whose message says what to do (see
/// [`sealer_from`]).
pub async fn sealer_for(
    env: &BTreeMap<String, String>,
    store: &dyn SecretStore,
) -> Result<Sealer, BuildError> {
    let key = env.get(KEY_VAR).map(String::as_str);
    if let Some(k) = key
        && let Ok(sealer) = Sealer::from_base64(k)
    {
        return Ok(sealer);
    }
    sealer_from(key.map(Some), &sealed_names(store).await?)
}

/// The names of the secrets in `store`.
async fn sealed_names(store: &dyn SecretStore) -> Result<Vec<String>, BuildError> {
    Ok(store
        .list_secrets()
        .await?
        .into_iter()
        .map(|s| s.name)
        .collect())
}

/// The sealer for `key` (`None` when unset, `Some(None)` when set but not
/// Unicode), or a configuration error that says what to do: make a key when
/// nothing is sealed yet (`sealed` holds the names of the secrets already in
/// the store), else restore the one the secrets were sealed with.
pub fn sealer_from(key: Option<Option<&str>>, sealed: &[String]) -> Result<Sealer, BuildError> {
    let problem = match key {
        None => format!("{KEY_VAR} is not set"),
        Some(None) => format!("{KEY_VAR} is not valid base64 (not even UTF-8 text)"),
        Some(Some(k)) => match Sealer::from_base64(k) {
            Ok(sealer) => return Ok(sealer),
            // With nothing sealed yet, the store's own advice (make a key) fits.
            Err(e) if sealed.is_empty() => return Err(BuildError::Config(e.to_string())),
            Err(SecretError::EmptyKey) => format!("{KEY_VAR} is empty"),
            Err(SecretError::KeyNotBase64 { position }) => {
                format!("{KEY_VAR} is not valid base64 (problem at character {position})")
            }
            Err(SecretError::KeyWrongLength { len }) => {
                format!("{KEY_VAR} decodes to {len} bytes, not 32")
            }
            Err(e) => e.to_string(),
        },
    };
    if sealed.is_empty() {
        return Err(BuildError::Config(format!(
            "{problem}; generate one with `hearth secrets keygen` \
             (or `openssl rand -base64 32`) and export it"
        )));
    }
    // A new key cannot open what the old one sealed: never suggest one here.
    Err(BuildError::Config(format!(
        "{problem}, and this home holds {} sealed secret(s) ({}): export in {KEY_VAR} the \
         master key they were sealed with (a newly generated key cannot open them)",
        sealed.len(),
        sealed.join(", ")
    )))
}

/// Opens the secrets providers name by `api_key_secret` (for the catalog)
/// and enabled chat channels name by `*_secret` (for their tokens). A
/// missing or invalid master key (when something needs it), a secret not in
/// the store, or one that does not open is a configuration error naming the
/// provider and the secret.
pub async fn open_secrets(
    config: &Config,
    env: &BTreeMap<String, String>,
    store: &dyn SecretStore,
) -> Result<BTreeMap<String, SecretString>, BuildError> {
    let key = env.get(KEY_VAR).map(String::as_str);
    let ch = &config.channels;
    // The chat channels' tokens may be sealed secrets too (enabled channels only).
    let channel_secrets = [
        (
            ch.telegram.enabled,
            "channels.telegram",
            &ch.telegram.token_secret,
        ),
        (
            ch.discord.enabled,
            "channels.discord",
            &ch.discord.token_secret,
        ),
        (
            ch.slack.enabled,
            "channels.slack",
            &ch.slack.bot_token_secret,
        ),
        (
            ch.slack.enabled,
            "channels.slack",
            &ch.slack.app_token_secret,
        ),
    ];
    let wanted: Vec<(&str, &str)> = config
        .llm
        .providers
        .iter()
        .filter_map(|(provider, pc)| {
            pc.api_key_secret
                .as_deref()
                .map(|secret| (provider.as_str(), secret))
        })
        .chain(
            channel_secrets
                .iter()
                .filter(|(enabled, _, _)| *enabled)
                .filter_map(|(_, owner, secret)| secret.as_deref().map(|s| (*owner, s))),
        )
        .collect();
    let mut opened = BTreeMap::new();
    let Some(&(first_provider, first_secret)) = wanted.first() else {
        if let Some(Err(e)) = key.map(Sealer::from_base64) {
            tracing::warn!(error = %e, "{KEY_VAR} is set but unusable; no provider needs it");
        }
        return Ok(opened);
    };
    let sealed = sealed_names(store).await?;
    let sealer = sealer_from(key.map(Some), &sealed).map_err(|e| {
        BuildError::Config(format!(
            "provider {first_provider}: api_key_secret `{first_secret}` needs the master key: {e}"
        ))
    })?;
    for (provider, secret) in wanted {
        if opened.contains_key(secret) {
            continue;
        }
        let sealed = store.get_secret(secret).await?.ok_or_else(|| {
            BuildError::Config(format!(
                "provider {provider}: api_key_secret `{secret}` is not in the store; \
                 set it with `hearth secrets set {secret}`"
            ))
        })?;
        let value = sealer.open(secret, &sealed).map_err(|e| {
            BuildError::Config(format!(
                "provider {provider}: api_key_secret `{secret}`: {e}"
            ))
        })?;
        opened.insert(secret.to_owned(), value);
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use hearth_store::secrets::generate_key_base64;

    use super::*;

    #[test]
    fn key_errors_say_how_to_make_one() {
        for key in [None, Some(None), Some(Some("")), Some(Some("not base64!"))] {
            let Err(e) = sealer_from(key, &[]) else {
                panic!("{key:?} was accepted");
            };
            assert!(matches!(e, BuildError::Config(_)), "{e}");
            assert!(e.to_string().contains("hearth secrets keygen"), "{e}");
        }
        let key = generate_key_base64().unwrap();
        assert!(sealer_from(Some(Some(&key)), &[]).is_ok());
    }

    /// With secrets already sealed, a new key would open none of them: the
    /// advice is to restore the old key, never to make one.
    #[test]
    fn with_sealed_secrets_the_advice_is_the_old_key_not_a_new_one() {
        let sealed = ["openai.key".to_owned()];
        for key in [
            None,
            Some(None),
            Some(Some("")),
            Some(Some("not base64!")),
            Some(Some("c2hvcnQ=")),
        ] {
            let Err(e) = sealer_from(key, &sealed) else {
                panic!("{key:?} was accepted");
            };
            assert!(matches!(e, BuildError::Config(_)), "{e}");
            let msg = e.to_string();
            assert!(
                msg.contains("openai.key") && msg.contains("sealed with"),
                "{msg}"
            );
            for new_key in ["keygen", "openssl rand"] {
                assert!(!msg.contains(new_key), "{key:?} suggests a new key: {msg}");
            }
        }
    }
}
