//! One `hearth serve` per home: an exclusive lock on `<home>/hearth.lock`.
//!
//! A second server on the same SQLite database would take the first one's
//! runs for dead and run them again (paying the provider twice). The lock is
//! an OS file lock (`flock`), so it goes away with the process, also on
//! SIGKILL: there is no stale lock to clean up. The file holds the holder's
//! PID, only to name it in the refusal.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

/// The lock file inside the home.
pub const LOCK_FILE: &str = "hearth.lock";

/// Why the home could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum HomeLockError {
    /// Another process holds the lock.
    #[error(
        "another hearth serve{} is using the home {home}: stop it first, or give this one \
         another home with --home or HEARTH_HOME",
        holder.map(|p| format!(" (PID {p})")).unwrap_or_default()
    )]
    Held {
        home: String,
        /// The PID written by the holder, when readable.
        holder: Option<u32>,
    },
    /// The lock file could not be opened or written.
    #[error("could not lock the hearth home {home} ({path}): {source}")]
    Io {
        home: String,
        /// The lock file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Held for as long as the server runs; the lock is released when dropped
/// (or when the process ends).
#[derive(Debug)]
pub struct HomeLock {
    _file: File,
}

/// Takes the home's exclusive lock, or says who holds it.
pub fn lock(home: &Path) -> Result<HomeLock, HomeLockError> {
    let path = home.join(LOCK_FILE);
    let io = |source| HomeLockError::Io {
        home: home.display().to_string(),
        path: path.display().to_string(),
        source,
    };
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&path).map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            let holder = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(HomeLockError::Held {
                home: home.display().to_string(),
                holder,
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    writeln!(file, "{}", std::process::id()).map_err(io)?;
    Ok(HomeLock { _file: file })
}

/// Whether a `hearth serve` holds the home's lock: `None` when none does,
/// `Some(pid)` when one does (`pid` when the file names it). Only looks:
/// the lock file is not created, and a shared lock taken to test it is
/// let go at once. A lock that cannot be tested counts as held, so the
/// caller asks the server rather than say that none runs.
pub fn holder(home: &Path) -> Option<Option<u32>> {
    let mut file = match File::open(home.join(LOCK_FILE)) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some(None),
    };
    match file.try_lock_shared() {
        Ok(()) => None,
        Err(TryLockError::WouldBlock) => {
            let mut text = String::new();
            Some(
                file.read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok()),
            )
        }
        Err(TryLockError::Error(_)) => Some(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_home_is_refused_with_the_holders_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path()).unwrap();
        let err = lock(dir.path()).unwrap_err();
        match &err {
            HomeLockError::Held { holder, .. } => {
                assert_eq!(*holder, Some(std::process::id()));
            }
            other => panic!("unexpected: {other}"),
        }
        assert!(
            err.to_string()
                .contains(&format!("PID {}", std::process::id()))
        );
        drop(first);
        lock(dir.path()).unwrap();
    }

    #[test]
    fn the_holder_is_seen_without_taking_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(holder(dir.path()), None, "no lock file: none runs");
        assert!(!dir.path().join(LOCK_FILE).exists(), "looking created it");
        let held = lock(dir.path()).unwrap();
        assert_eq!(holder(dir.path()), Some(Some(std::process::id())));
        drop(held);
        assert_eq!(holder(dir.path()), None);
        // Looking left it free.
        lock(dir.path()).unwrap();
    }
}
