//! The one way a skill's files are read: by a path relative to the skill's
//! folder, refused when its real location is outside that folder (`..`, an
//! absolute path, a symlink leading out, also one swapped in after the
//! skill was loaded), and never more than a cap. Discovery, `skill_read`,
//! `skill_file`, `/name` invocations and manifest checks all go through it.

use std::fs::File;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::manifest::is_contained;

/// Most bytes of a SKILL.md (a longer one is refused).
pub const MAX_SKILL_MD_BYTES: u64 = 256 * 1024;

/// Why a file of a skill was not read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The path is absolute or climbs out with `..`.
    #[error("path {0:?} must be relative to the skill's folder, without `..`")]
    NotRelative(String),
    /// Its real location is outside the folder (a symlink leading out).
    #[error("{0} leads outside the skill's folder; refused")]
    Outside(String),
    /// Nothing is there.
    #[error("the skill has no file {0}")]
    Missing(String),
    /// Something that is not a regular file is there.
    #[error("{0} is not a file")]
    NotFile(String),
    /// It is longer than the cap.
    #[error("{rel} is larger than {}", size(*.cap))]
    TooLarge {
        /// The path.
        rel: String,
        /// The cap, in bytes.
        cap: u64,
    },
    /// Reading failed.
    #[error("cannot read {rel}: {source}")]
    Io {
        /// The path.
        rel: String,
        /// Why.
        source: std::io::Error,
    },
}

/// `256 KiB`, `1 MiB`.
fn size(bytes: u64) -> String {
    if bytes >= 1024 * 1024 && bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else {
        format!("{} KiB", bytes / 1024)
    }
}

/// Opens `rel` under `dir` (the skill's folder, canonical) for reading,
/// checking the file that was actually opened, not only the path before:
/// a link swapped in between the check and the open is still refused.
/// Returns the file and its real path.
pub fn open(dir: &Path, rel: &str) -> Result<(File, PathBuf), ReadError> {
    if !is_contained(rel) {
        return Err(ReadError::NotRelative(rel.to_owned()));
    }
    let real =
        std::fs::canonicalize(dir.join(rel)).map_err(|_| ReadError::Missing(rel.to_owned()))?;
    if !real.starts_with(dir) {
        return Err(ReadError::Outside(rel.to_owned()));
    }
    let file = File::open(&real).map_err(|source| ReadError::Io {
        rel: rel.to_owned(),
        source,
    })?;
    if !opened_inside(&file, &real, dir) {
        return Err(ReadError::Outside(rel.to_owned()));
    }
    let meta = file.metadata().map_err(|source| ReadError::Io {
        rel: rel.to_owned(),
        source,
    })?;
    if !meta.is_file() {
        return Err(ReadError::NotFile(rel.to_owned()));
    }
    Ok((file, real))
}

/// Up to `cap` bytes of `rel` under `dir`, and whether there was more.
pub fn read_capped(dir: &Path, rel: &str, cap: u64) -> Result<(Vec<u8>, bool), ReadError> {
    let (file, _) = open(dir, rel)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| ReadError::Io {
            rel: rel.to_owned(),
            source,
        })?;
    let cut = bytes.len() as u64 > cap;
    bytes.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((bytes, cut))
}

/// The text of `rel` under `dir`, refused when longer than `cap` bytes or
/// not UTF-8.
pub fn read_text(dir: &Path, rel: &str, cap: u64) -> Result<String, ReadError> {
    let (bytes, cut) = read_capped(dir, rel, cap)?;
    if cut {
        return Err(ReadError::TooLarge {
            rel: rel.to_owned(),
            cap,
        });
    }
    String::from_utf8(bytes).map_err(|_| ReadError::Io {
        rel: rel.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "it is not UTF-8 text"),
    })
}

/// Whether the file that `file` is open on lies inside `dir`. On Linux the
/// kernel says where the descriptor points; elsewhere the opened file must
/// be the one `real` still names, and `real` must still be its own real
/// path (no link swapped in along it).
fn opened_inside(file: &File, real: &Path, dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(target) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            return target.starts_with(dir);
        }
    }
    same_file_still_there(file, real)
}

#[cfg(unix)]
fn same_file_still_there(file: &File, real: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(real)) {
        (Ok(opened), Ok(named)) => {
            opened.dev() == named.dev()
                && opened.ino() == named.ino()
                && std::fs::canonicalize(real).is_ok_and(|r| r == real)
        }
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file_still_there(_file: &File, real: &Path) -> bool {
    std::fs::canonicalize(real).is_ok_and(|r| r == real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_inside_and_refuses_the_rest() {
        let t = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = std::fs::canonicalize(t.path()).unwrap_or_else(|e| panic!("{e}"));
        let dir = root.join("skill");
        std::fs::create_dir_all(dir.join("refs")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.join("refs/a.md"), "alpha").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(root.join("secret"), "s3cret").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            read_text(&dir, "refs/a.md", 5).ok().as_deref(),
            Some("alpha")
        );
        let err = |rel: &str, cap| match read_text(&dir, rel, cap) {
            Ok(t) => panic!("{rel} was read: {t}"),
            Err(e) => e.to_string(),
        };
        assert_eq!(err("refs/a.md", 4), "refs/a.md is larger than 0 KiB");
        assert!(err("../secret", 100).contains("relative"));
        assert!(err("refs", 100).contains("not a file"));
        assert!(err("nope", 100).contains("no file nope"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(root.join("secret"), dir.join("link"))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(err("link", 100).contains("leads outside"));
        }
        assert_eq!(size(256 * 1024), "256 KiB");
        assert_eq!(size(1024 * 1024), "1 MiB");
    }
}
