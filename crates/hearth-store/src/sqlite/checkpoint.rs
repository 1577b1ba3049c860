//! The background checkpointer: copies the WAL into the database file off the
//! writer's path.
//!
//! SQLite's automatic checkpoint runs inside the committing connection, so
//! every thousand pages one commit also pays for writing and syncing the
//! database file; in strict durability that stalls every run waiting on the
//! batch. The writer has it turned off, and this thread runs a PASSIVE
//! checkpoint (which never blocks writers or readers) after commits happened.
//! A passive checkpoint never finishes while the writer keeps appending, so the
//! WAL would grow without bound under steady load; past `WAL_LIMIT_FRAMES` a
//! TRUNCATE checkpoint holds writers back briefly (the passive passes have
//! copied most frames already) and resets the file.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

use rusqlite::Connection;

/// How often the WAL is checkpointed while writes happen.
const INTERVAL: Duration = Duration::from_millis(500);

/// WAL size (in frames of one page, 4 KiB: 64 MiB) past which the WAL is truncated.
const WAL_LIMIT_FRAMES: i64 = 16_384;

/// Runs until `stop` is closed (the store was dropped).
pub(super) fn run(conn: Connection, stop: Receiver<()>, commits: Arc<AtomicU64>) {
    let mut seen = commits.load(Ordering::Relaxed);
    loop {
        match stop.recv_timeout(INTERVAL) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = commits.load(Ordering::Relaxed);
        if now == seen {
            continue;
        }
        seen = now;
        let result = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            Ok((row.get::<_, i64>(1)?, row.get::<_, i64>(2)?))
        });
        match result {
            Ok((wal_frames, copied)) if wal_frames > WAL_LIMIT_FRAMES => {
                tracing::debug!(wal_frames, copied, "truncating the WAL");
                if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
                    tracing::warn!(error = %e, "WAL truncation failed; will retry");
                }
            }
            Ok((wal_frames, copied)) => {
                tracing::trace!(wal_frames, copied, "checkpointed the WAL");
            }
            Err(e) => tracing::warn!(error = %e, "WAL checkpoint failed; will retry"),
        }
    }
}
