//! The database file is created readable by its owner only: it holds
//! conversations, memories and sealed secrets.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::path::Path;

use crate::error::{Result, StoreError};

/// Creates an empty `path` with mode 0600 unless it exists. SQLite gives
/// the `-wal` and `-shm` files it makes beside a database the database
/// file's mode, so they are private too. An existing file keeps its mode:
/// the operator may have chosen it.
pub(super) fn create(path: &Path) -> Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(StoreError::Create {
            path: path.display().to_string(),
            source,
        }),
    }
}
