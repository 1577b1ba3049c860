//! Incognito threads: their runs, journal and new history live in a store in
//! memory, so nothing of what they say reaches the disk and it is gone when
//! the process ends. The flag itself is thread state and is stored.
//!
//! What stays on disk for them: the flag, the thread's settings, usage rows
//! without thread or user keys, and audit events (ids only).
//!
//! Several replicas on PostgreSQL: an incognito thread lives in the memory
//! of one replica, its holder, recorded as the lease `incognito:<thread>`
//! (taken when the thread is turned incognito or gets its first message
//! there, renewed at each upkeep round, given up when incognito is turned
//! off). A message for it that reaches another replica is refused with
//! [`RuntimeError::IncognitoElsewhere`] naming the holder (HTTP 409
//! `incognito_elsewhere`), rather than forwarded: forwarding would carry
//! the conversation over the network between replicas, and a load balancer
//! with sticky sessions (or a channel held by the holder) reaches the
//! holder anyway. When the holder dies, its lease lapses and the thread's
//! in-memory conversation is gone, as after a restart on one machine; the
//! next replica it reaches takes it. Every replica learns of a thread
//! turned incognito from the database's notification, so none stores its
//! messages on disk.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hearth_core::{ThreadKey, now_ms};
use hearth_store::{SqliteStore, Store};
use tracing::{info, warn};

use crate::error::{Result, RuntimeError};
use crate::runtime::Runtime;
use crate::threads::ThreadRuntime;

/// Which threads and runs are incognito, and the store that holds them.
#[derive(Default)]
pub(crate) struct Incognito {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    threads: HashSet<String>,
    /// Runs stored in memory: found there for the life of the process, also
    /// after their thread leaves incognito.
    runs: HashSet<String>,
    /// Opened on first use, so a hearth without incognito threads pays nothing.
    store: Option<Arc<dyn Store>>,
    /// On a shared store: the incognito threads whose holder lease this
    /// replica has.
    held: HashSet<String>,
}

impl Incognito {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Marks `keys` incognito (at start, from the stored flags).
    pub(crate) fn load(&self, keys: Vec<String>) {
        self.state().threads.extend(keys);
    }

    /// Replaces the incognito threads with the stored flags `keys`.
    pub(crate) fn replace_threads(&self, keys: Vec<String>) {
        self.state().threads = keys.into_iter().collect();
    }

    /// True when new runs of `thread_key` are incognito.
    pub(crate) fn is_thread(&self, thread_key: &str) -> bool {
        let s = self.state();
        !s.threads.is_empty() && s.threads.contains(thread_key)
    }

    pub(crate) fn set_thread(&self, thread_key: &str, on: bool) {
        let mut s = self.state();
        if on {
            s.threads.insert(thread_key.to_owned());
        } else {
            s.threads.remove(thread_key);
        }
    }

    /// The memory store holding `run_id`, if it is an incognito run.
    pub(crate) fn store_of_run(&self, run_id: &str) -> Option<Arc<dyn Store>> {
        let s = self.state();
        if s.runs.contains(run_id) {
            s.store.clone()
        } else {
            None
        }
    }

    /// Records that `run_id` lives in memory.
    pub(crate) fn add_run(&self, run_id: &str) {
        self.state().runs.insert(run_id.to_owned());
    }

    /// The memory store, opened now if needed. Opening runs SQLite and its
    /// migrations, so it happens off the executor and outside the lock.
    pub(crate) async fn store(&self) -> Result<Arc<dyn Store>> {
        if let Some(store) = self.opened() {
            return Ok(store);
        }
        let opened = tokio::task::spawn_blocking(SqliteStore::open_in_memory)
            .await
            .map_err(|e| {
                RuntimeError::Store(hearth_store::StoreError::Corrupt(format!(
                    "opening the incognito store failed: {e}"
                )))
            })??;
        let mut s = self.state();
        // Two first messages may race to open it: the first stored wins.
        Ok(s.store.get_or_insert_with(|| Arc::new(opened)).clone())
    }

    /// When no thread is incognito and no incognito run is queued or running
    /// (`busy`), forgets the incognito runs and hands back the memory store
    /// for the caller to close: what incognito threads said is gone once they
    /// are done, not at the end of the process.
    pub(crate) fn purge_if_idle(&self, busy: impl Fn(&str) -> bool) -> Option<Arc<dyn Store>> {
        let mut s = self.state();
        if !s.threads.is_empty() || s.store.is_none() || s.runs.iter().any(|r| busy(r)) {
            return None;
        }
        s.runs.clear();
        info!("incognito state purged: no incognito thread or run is left");
        s.store.take()
    }

    fn hold(&self, thread_key: &str) {
        self.state().held.insert(thread_key.to_owned());
    }

    fn let_go(&self, thread_key: &str) -> bool {
        self.state().held.remove(thread_key)
    }

    fn held(&self) -> Vec<String> {
        self.state().held.iter().cloned().collect()
    }

    /// The memory store if it was opened.
    pub(crate) fn opened(&self) -> Option<Arc<dyn Store>> {
        self.state().store.clone()
    }
}

impl Runtime {
    /// The store that holds `run_id`: memory for incognito runs, else disk.
    pub(crate) fn store_of_run(&self, run_id: &str) -> Arc<dyn Store> {
        self.inner
            .incognito
            .store_of_run(run_id)
            .unwrap_or_else(|| self.inner.store.clone())
    }

    /// Turns a thread's incognito mode on or off. While on, its new runs,
    /// steps and messages are kept in memory only, memory tools write
    /// nothing, and usage is counted without thread or user keys. Turning it
    /// on does not erase history already stored.
    pub async fn set_incognito(
        &self,
        thread_key: &ThreadKey,
        enabled: bool,
    ) -> Result<ThreadRuntime> {
        if enabled {
            self.hold_incognito(thread_key).await?;
        }
        self.inner
            .store
            .set_thread_incognito(thread_key, enabled)
            .await?;
        self.inner.incognito.set_thread(thread_key, enabled);
        if !enabled {
            self.let_go_incognito(thread_key).await;
        }
        info!(%thread_key, enabled, "incognito changed");
        self.thread_runtime(thread_key).await
    }
}

/// The lease that names an incognito thread's holder.
fn lease_name(thread_key: &str) -> String {
    format!("incognito:{thread_key}")
}

impl Runtime {
    /// On a shared store: takes or renews this replica's hold of an
    /// incognito thread, or refuses naming the replica that holds it.
    pub(crate) async fn hold_incognito(&self, thread_key: &str) -> Result<()> {
        let Some(cluster) = self.inner.store.cluster() else {
            return Ok(());
        };
        let name = lease_name(thread_key);
        let now = now_ms();
        let until = now + crate::runtime::lease_ms(&self.inner.options);
        if cluster
            .acquire_lease(&name, &self.inner.options.owner, until, now)
            .await?
        {
            self.inner.incognito.hold(thread_key);
            return Ok(());
        }
        let holder = cluster
            .lease_holder(&name, now)
            .await?
            .unwrap_or_else(|| "another replica".to_owned());
        Err(RuntimeError::IncognitoElsewhere {
            thread_key: thread_key.to_owned(),
            holder,
        })
    }

    /// Gives up this replica's hold of a thread that left incognito.
    pub(crate) async fn let_go_incognito(&self, thread_key: &str) {
        if !self.inner.incognito.let_go(thread_key) {
            return;
        }
        if let Some(cluster) = self.inner.store.cluster()
            && let Err(e) = cluster
                .release_lease(&lease_name(thread_key), &self.inner.options.owner)
                .await
        {
            warn!(error = %e, "could not give up an incognito thread's lease; it lapses on its own");
        }
    }

    /// At each upkeep round: renews the holds of the incognito threads this
    /// replica holds (no query when it holds none).
    pub(crate) async fn renew_incognito(&self) {
        for thread_key in self.inner.incognito.held() {
            if !self.inner.incognito.is_thread(&thread_key) {
                self.let_go_incognito(&thread_key).await;
                continue;
            }
            if let Err(e) = self.hold_incognito(&thread_key).await {
                warn!(error = %e, "could not renew the hold of an incognito thread");
                if matches!(e, RuntimeError::IncognitoElsewhere { .. }) {
                    self.inner.incognito.let_go(&thread_key);
                }
            }
        }
    }
}
