//! `hearth-skill.json`: an executable skill's manifest, and the checks a
//! folder must pass before its program may run.
//!
//! Every refusal is an [`Error::Refused`] whose text says why, so a refused
//! skill can be listed with the reason. Nothing here runs the program.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::signing::{PrivateKey, TrustedKey, canonical, hex};
use crate::{Error, Result};

/// The manifest's file name.
pub const MANIFEST: &str = "hearth-skill.json";

/// Most bytes a manifest may have (it is read whole).
const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;

/// The fields of `hearth-skill.json`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// The skill's name (`a-z0-9-`, 1 to 64).
    pub name: String,
    /// The skill's own version.
    pub version: String,
    /// What it does.
    pub description: String,
    /// The program speaking MCP over stdio, relative to the folder.
    pub entry: String,
    /// Arguments given to `entry`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Names of the environment variables it may receive.
    #[serde(default)]
    pub env: Vec<String>,
    /// Keys of `[skills.config.<name>]` it needs.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Relative path -> SHA-256 hex of every file but the manifest.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// Who published it.
    #[serde(default)]
    pub publisher: Option<String>,
    /// The signing key's id.
    #[serde(default)]
    pub key_id: Option<String>,
    /// base64 ed25519 signature over the canonical manifest.
    #[serde(default)]
    pub signature: Option<String>,
    /// The hearth versions it works with, a semver requirement.
    pub hearth: String,
}

/// What verification of a folder needs.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// Keys whose signatures are accepted.
    pub keys: Vec<TrustedKey>,
    /// Dev mode: folders (canonical) whose unsigned skills load.
    pub allowed_unsigned_dirs: Vec<PathBuf>,
    /// `[skills.config]`: settings per skill.
    pub config: BTreeMap<String, BTreeMap<String, String>>,
}

/// A folder that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub manifest: Manifest,
    /// The folder, canonical.
    pub dir: PathBuf,
    /// True when signed by a trusted key; false for a dev-mode unsigned skill.
    pub signed: bool,
    /// Every file of the folder but the manifest as verified (relative path
    /// -> SHA-256 hex): what [`check_unchanged`] compares against.
    pub files: BTreeMap<String, String>,
    /// SHA-256 hex of the manifest's bytes as verified.
    pub manifest_sha256: String,
}

fn refused(why: impl Into<String>) -> Error {
    Error::Refused(why.into())
}

/// The manifest's text (through the contained, capped reader; a link is
/// refused even inside the folder) and the SHA-256 hex of its bytes.
fn read_text(dir: &Path) -> Result<(String, String)> {
    let path = dir.join(MANIFEST);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| Error::io(&path, e))?;
    if !meta.is_file() {
        return Err(refused(format!("{MANIFEST} is not a regular file")));
    }
    let text = crate::read::read_text(dir, MANIFEST, MAX_MANIFEST_BYTES).map_err(|e| match e {
        crate::read::ReadError::Io { source, .. } => Error::io(&path, source),
        other => refused(other.to_string()),
    })?;
    let sha = hex(&Sha256::digest(text.as_bytes()));
    Ok((text, sha))
}

/// Reads the manifest as JSON (for signing) and as fields, with the
/// SHA-256 hex of its bytes.
fn read(dir: &Path) -> Result<(Value, Manifest, String)> {
    let (text, sha) = read_text(dir)?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| refused(format!("{MANIFEST} is not valid JSON: {e}")))?;
    let manifest =
        Manifest::deserialize(&value).map_err(|e| refused(format!("{MANIFEST}: {e}")))?;
    Ok((value, manifest, sha))
}

/// A relative path that stays inside the folder: no `..`, no root.
pub(crate) fn is_contained(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Every file in `dir` (relative path -> SHA-256 hex) but the manifest,
/// refusing symlinks that lead outside, world-writable entries and
/// anything but files and folders.
fn hash_files(dir: &Path) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        check_not_world_writable(dir, &d)?;
        let entries = std::fs::read_dir(&d).map_err(|e| Error::io(&d, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&d, e))?;
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .map_err(|_| refused(format!("{} is outside the folder", path.display())))?
                .to_string_lossy()
                .replace('\\', "/");
            let real = std::fs::canonicalize(&path).map_err(|e| Error::io(&path, e))?;
            if !real.starts_with(dir) {
                return Err(refused(format!(
                    "{rel} is a symlink leading outside the skill folder"
                )));
            }
            let meta = std::fs::metadata(&real).map_err(|e| Error::io(&real, e))?;
            if meta.is_dir() {
                if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                    stack.push(path);
                }
            } else if meta.is_file() {
                check_not_world_writable(dir, &real)?;
                if rel != MANIFEST {
                    out.insert(rel.clone(), hash_file(dir, &rel)?);
                }
            } else {
                return Err(refused(format!("{rel} is not a regular file")));
            }
        }
    }
    Ok(out)
}

/// SHA-256 hex of `rel` under `dir`, streamed (no size limit: the hash
/// must cover all of it) through the contained reader.
fn hash_file(dir: &Path, rel: &str) -> Result<String> {
    use std::io::Read as _;
    let (mut file, real) = crate::read::open(dir, rel).map_err(|e| match e {
        crate::read::ReadError::Io { source, .. } => Error::io(&dir.join(rel), source),
        other => refused(other.to_string()),
    })?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read(&mut buf).map_err(|e| Error::io(&real, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Checks that the folder `dir` verified with `files` and a manifest of
/// SHA-256 `manifest_sha256` is still exactly that: the same manifest, the
/// same files with the same hashes, none added, none world-writable. Run
/// before each start of an executable skill, so a program edited after
/// the load never runs, even when a crash restarts it; a reload verifies
/// the folder anew.
pub fn check_unchanged(
    dir: &Path,
    files: &BTreeMap<String, String>,
    manifest_sha256: &str,
) -> Result<()> {
    let again = "since the skill was verified; reload the skills to verify it again";
    let (_, sha) = read_text(dir)?;
    if sha != manifest_sha256 {
        return Err(refused(format!("{MANIFEST} changed {again}")));
    }
    let on_disk = hash_files(dir)?;
    for (rel, want) in files {
        match on_disk.get(rel) {
            None => return Err(refused(format!("{rel} was removed {again}"))),
            Some(got) if got != want => return Err(refused(format!("{rel} changed {again}"))),
            Some(_) => {}
        }
    }
    if let Some(added) = on_disk.keys().find(|k| !files.contains_key(*k)) {
        return Err(refused(format!("{added} was added {again}")));
    }
    Ok(())
}

fn check_not_world_writable(dir: &Path, path: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.permissions().mode() & 0o002 != 0 {
            let rel = path.strip_prefix(dir).unwrap_or(path);
            let shown = if rel.as_os_str().is_empty() {
                ".".into()
            } else {
                rel.display().to_string()
            };
            return Err(refused(format!(
                "{shown} is world-writable (anyone could change the program): chmod o-w it"
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = (dir, path);
    Ok(())
}

/// Checks the folder `dir` holding a `hearth-skill.json` against `trust`:
/// signature, version range, files and their hashes, config.
pub fn verify(dir: &Path, trust: &Trust) -> Result<Verified> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let (value, manifest, manifest_sha256) = read(&dir)?;
    crate::check_name(&manifest.name).map_err(|why| refused(format!("name: {why}")))?;
    let req = semver::VersionReq::parse(&manifest.hearth).map_err(|e| {
        refused(format!(
            "hearth: {:?} is not a semver range: {e}",
            manifest.hearth
        ))
    })?;
    let ours = semver::Version::parse(crate::HEARTH_VERSION)
        .map_err(|e| refused(format!("this hearth's version is not semver: {e}")))?;
    if !req.matches(&ours) {
        return Err(refused(format!(
            "needs hearth {}, this is {ours}",
            manifest.hearth
        )));
    }
    let signed = match &manifest.signature {
        Some(signature) => {
            let key_id = manifest
                .key_id
                .as_deref()
                .ok_or_else(|| refused("signed without a key_id"))?;
            let key = trust
                .keys
                .iter()
                .find(|k| k.key_id == key_id)
                .ok_or_else(|| {
                    refused(format!(
                        "signed by key {key_id}, which is not in [skills] trusted_keys"
                    ))
                })?;
            if !key.verifies(&canonical(&value), signature) {
                return Err(refused(format!(
                    "bad signature: the manifest was changed after it was signed, or not signed by key {key_id}"
                )));
            }
            true
        }
        None if trust
            .allowed_unsigned_dirs
            .iter()
            .any(|d| dir.starts_with(d)) =>
        {
            false
        }
        None => {
            return Err(refused(
                "unsigned: only skills signed by a key in [skills] trusted_keys load \
                 (for development, add its folder to [skills] allowed_unsigned_dirs)",
            ));
        }
    };
    if !is_contained(&manifest.entry) {
        return Err(refused(format!(
            "entry {:?} is outside the skill folder",
            manifest.entry
        )));
    }
    let on_disk = hash_files(&dir)?;
    for (rel, want) in &manifest.files {
        if !is_contained(rel) {
            return Err(refused(format!(
                "files: {rel:?} is outside the skill folder"
            )));
        }
        match on_disk.get(rel.trim_start_matches("./")) {
            None => return Err(refused(format!("files: {rel} is missing"))),
            Some(got) if !got.eq_ignore_ascii_case(want) => {
                return Err(refused(format!(
                    "hash mismatch: {rel} is not the file that was signed"
                )));
            }
            Some(_) => {}
        }
    }
    // An unsigned dev skill may leave `files` empty; once it lists any, or
    // is signed, every file must be listed.
    if signed || !manifest.files.is_empty() {
        let listed: Vec<&str> = manifest
            .files
            .keys()
            .map(|k| k.trim_start_matches("./"))
            .collect();
        if let Some(extra) = on_disk.keys().find(|k| !listed.contains(&k.as_str())) {
            return Err(refused(format!(
                "{extra} is not listed in files (an unlisted file is refused)"
            )));
        }
    }
    let entry = dir.join(&manifest.entry);
    if !entry.is_file() {
        return Err(refused(format!("entry {} does not exist", manifest.entry)));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&entry)
            .map_err(|e| Error::io(&entry, e))?
            .permissions()
            .mode();
        if mode & 0o111 == 0 {
            return Err(refused(format!(
                "entry {} is not executable (chmod +x it before signing)",
                manifest.entry
            )));
        }
    }
    let settings = trust.config.get(&manifest.name);
    if let Some(key) = manifest
        .requires
        .iter()
        .find(|k| !settings.is_some_and(|s| s.contains_key(*k)))
    {
        return Err(refused(format!(
            "missing config: set skills.config.{}.{key} in hearth.toml",
            manifest.name
        )));
    }
    Ok(Verified {
        manifest,
        dir,
        signed,
        files: on_disk,
        manifest_sha256,
    })
}

/// `hearth skills sign`: fills `files`, `key_id` and `signature` of the
/// manifest in `dir` and writes it back. Returns the key id.
pub fn sign(dir: &Path, key: &PrivateKey) -> Result<String> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    let (mut value, _, _) = read(&dir)?;
    let files = hash_files(&dir)?;
    let key_id = key.key_id();
    let Value::Object(map) = &mut value else {
        return Err(refused(format!("{MANIFEST} is not a JSON object")));
    };
    let files: serde_json::Map<String, Value> = files
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    map.insert("files".into(), Value::Object(files));
    map.insert("key_id".into(), Value::String(key_id.clone()));
    map.remove("signature");
    let signature = key.sign(&canonical(&value));
    if let Value::Object(map) = &mut value {
        map.insert("signature".into(), Value::String(signature));
    }
    let text = serde_json::to_string_pretty(&value).map_err(|e| refused(e.to_string()))?;
    let path = dir.join(MANIFEST);
    std::fs::write(&path, format!("{text}\n")).map_err(|e| Error::io(&path, e))?;
    Ok(key_id)
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
