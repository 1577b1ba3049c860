//! The home directory: created with mode 0700 and seeded, never overwritten.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ConfigError;

/// What `prepare_home` found and did.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HomeReport {
    /// The home directory was created now.
    pub created_home: bool,
    /// Files written now (existing ones are never touched).
    pub created_files: Vec<PathBuf>,
    /// The existing home is readable by others (a warning, not an error).
    pub readable_by_others: bool,
}

/// The commented `hearth.toml` written on first start.
pub const DEFAULT_CONFIG: &str = include_str!("default_hearth.toml");

const DEFAULT_SYSTEM: &str = "You are hearth, a helpful personal assistant. Answer clearly and briefly.\n\
When a tool can give an exact answer (such as the current time), use it instead of guessing.\n";

const DEFAULT_AGENTS: &str = "# AGENTS.md\n\n\
Notes for the assistant about you and how you like to work. hearth appends this\n\
file to the system prompt. Edit it freely.\n";

/// Creates `home` (mode 0700) and the files that are missing in it:
/// `hearth.toml`, `SYSTEM.md`, `AGENTS.md`. Existing files are left as they are.
pub fn prepare_home(home: &Path) -> Result<HomeReport, ConfigError> {
    let mut report = HomeReport::default();
    let err = |path: &Path| {
        let path = path.to_owned();
        move |source| ConfigError::Home { path, source }
    };
    if !home.exists() {
        create_private_dir(home).map_err(err(home))?;
        report.created_home = true;
    } else {
        report.readable_by_others = readable_by_others(home).map_err(err(home))?;
    }
    for (name, contents) in [
        ("hearth.toml", DEFAULT_CONFIG),
        ("SYSTEM.md", DEFAULT_SYSTEM),
        ("AGENTS.md", DEFAULT_AGENTS),
    ] {
        let path = home.join(name);
        if write_new(&path, contents).map_err(err(&path))? {
            report.created_files.push(path);
        }
    }
    Ok(report)
}

/// Writes a file only if it does not exist; true when written.
fn write_new(path: &Path, contents: &str) -> std::io::Result<bool> {
    let mut opts = fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    match opts.open(path) {
        Ok(mut f) => {
            f.write_all(contents.as_bytes())?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

fn create_private_dir(path: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        b.mode(0o700);
    }
    b.create(path)
}

fn readable_by_others(path: &Path) -> std::io::Result<bool> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Ok(fs::metadata(path)?.permissions().mode() & 0o077 != 0)
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_private_home_and_never_overwrites() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("h");
        let r = prepare_home(&home).unwrap();
        assert!(r.created_home);
        assert_eq!(r.created_files.len(), 3);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&home).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
        fs::write(home.join("SYSTEM.md"), "mine").unwrap();
        let r2 = prepare_home(&home).unwrap();
        assert!(!r2.created_home);
        assert!(r2.created_files.is_empty());
        assert_eq!(fs::read_to_string(home.join("SYSTEM.md")).unwrap(), "mine");
    }

    /// Every commented example in the default file, uncommented in place,
    /// must still be a valid config: a user enabling one must not break it.
    #[test]
    fn every_commented_setting_works_when_uncommented() {
        let uncommented: String = DEFAULT_CONFIG
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest.starts_with('[')
                        || rest.split_once(" = ").is_some_and(|(k, _)| {
                            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        }) =>
                {
                    rest
                }
                _ => l,
            })
            .map(|l| format!("{l}\n"))
            .collect();
        let keys = uncommented
            .lines()
            .filter(|l| !l.starts_with('#') && l.contains(" = "))
            .count();
        assert!(keys > 25, "the heuristic should find the examples ({keys})");
        let c = crate::load_str(&uncommented, "uncommented default", Vec::new())
            .unwrap_or_else(|e| panic!("{e}\n{uncommented}"));
        assert!(c.llm.providers.contains_key("local"));
        assert_eq!(c.llm.daily_spend_alert_usd, Some(5.0));
    }

    /// The README's provider block, pasted at the end of the generated file as
    /// the README says, loads (the generated file's headers are comments, so
    /// the block's `[llm]` is not a duplicate).
    #[test]
    fn the_readme_provider_block_pastes_into_the_default_file() {
        let readme_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
        let readme = fs::read_to_string(readme_path).unwrap();
        let section = readme
            .split("## Configure a real provider")
            .nth(1)
            .expect("the README has a 'Configure a real provider' section");
        assert!(
            section.contains("can go at its end"),
            "the README says where the block goes"
        );
        let block = section
            .split("```toml\n")
            .nth(1)
            .and_then(|b| b.split("```").next())
            .expect("the section has a toml block");
        let pasted = format!("{DEFAULT_CONFIG}\n{block}");
        let c = crate::load_str(&pasted, "hearth.toml with the README block", Vec::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.llm.default_model.as_deref(), Some("local/llama3.2"));
        assert!(
            c.llm.providers.contains_key("local"),
            "{:?}",
            c.llm.providers
        );
        // Ollama needs no key; the README must not ask for one.
        assert_eq!(c.llm.providers["local"].api_key_env, None);
    }

    #[test]
    fn default_config_parses_to_defaults() {
        let c = crate::load_str(DEFAULT_CONFIG, "default", Vec::new()).unwrap();
        assert_eq!(c, crate::Config::default());
    }
}
