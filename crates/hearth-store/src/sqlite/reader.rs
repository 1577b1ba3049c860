//! Reader threads: each owns a read-only connection and takes queries from a
//! shared queue, so reads never block the async runtime nor wait on the writer.

use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use super::db::Db;

/// A query to run on some reader's connection; it sends its own reply.
pub(crate) type ReadJob = Box<dyn FnOnce(&mut Db<'_>) + Send>;

/// A reader thread's body: returns when every sender is gone.
pub(crate) fn run(conn: Connection, jobs: Arc<Mutex<Receiver<ReadJob>>>) {
    let mut db = Db::new(&conn);
    loop {
        // The lock is held while waiting so that idle readers queue on the
        // mutex and exactly one of them takes each job.
        let next = {
            let queue = match jobs.lock() {
                Ok(queue) => queue,
                Err(poisoned) => poisoned.into_inner(),
            };
            queue.recv()
        };
        match next {
            Ok(job) => job(&mut db),
            Err(_) => return,
        }
    }
}
