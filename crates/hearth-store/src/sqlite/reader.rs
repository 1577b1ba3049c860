//! Reader threads: each owns a read-only connection and takes queries from a
//! shared queue, so reads never block the async runtime nor wait on the writer.

use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::mpsc::Receiver;

use super::db::Db;

/// Reads that may wait for a reader; a caller beyond this waits (without
/// blocking its executor thread) until a reader takes one.
pub(crate) const QUEUE: usize = 256;

/// A query to run on some reader's connection; it sends its own reply.
pub(crate) type ReadJob = Box<dyn FnOnce(&mut Db<'_>) + Send>;

/// A reader thread's body: returns when every sender is gone.
pub(crate) fn run(conn: Connection, jobs: Arc<Mutex<Receiver<ReadJob>>>) {
    let mut db = Db::new(&conn);
    loop {
        // The lock is held while waiting so that idle readers queue on the
        // mutex and exactly one of them takes each job.
        let next = {
            let mut queue = match jobs.lock() {
                Ok(queue) => queue,
                Err(poisoned) => poisoned.into_inner(),
            };
            queue.blocking_recv()
        };
        match next {
            Some(job) => job(&mut db),
            None => return,
        }
    }
}
