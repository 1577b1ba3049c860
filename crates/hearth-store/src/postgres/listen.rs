//! Wake-ups between replicas: one connection per replica, outside the pool,
//! that `LISTEN`s on the channels the triggers of migration 0002 notify.
//!
//! A pooled connection cannot listen: it is handed to other work and its
//! notifications would be read by nobody. This one is made again with
//! back-off (100 ms doubling to 5 s) whenever it drops, and says so
//! ([`Wake::Connected`]) each time it is (re)established, because what was
//! notified while it was down is lost. Logs name the server as
//! `host:port/database`, never the URL.
//!
//! It also hears `hearth_access` for the store itself: the tokens and grants
//! the store holds (`access_cache`) are used only while a listener is up,
//! and dropped on every change it hears.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;
use tracing::{debug, warn};

use super::access_cache::AccessCache;
use crate::cluster::Wake;

/// The channels, and what a notification on each means.
const CHANNELS: &str = "LISTEN hearth_work; LISTEN hearth_ended; LISTEN hearth_asks; \
                        LISTEN hearth_confirmation; LISTEN hearth_incognito; LISTEN hearth_jobs; \
                        LISTEN hearth_access";

/// Wake-ups not yet taken by the runtime before the listener waits; `Work`
/// notifications beyond that are dropped (one pending is as good as many).
const BUFFER: usize = 256;

/// The first and the longest pause before connecting again.
const BACKOFF_FIRST: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// Starts the listener; it ends when the receiver is dropped.
pub(crate) fn start(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    target: String,
    access: Arc<AccessCache>,
) -> mpsc::Receiver<Wake> {
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(async move {
        let mut backoff = BACKOFF_FIRST;
        loop {
            let outcome = tokio::select! {
                () = tx.closed() => return,
                r = listen_once(&config, &tls, &tx, &access) => r,
            };
            // Whatever ended the connection, nothing is heard until the next.
            let _ = tx.try_send(Wake::Lost);
            match outcome {
                // Connected and then dropped: try again at once.
                Ok(()) => backoff = BACKOFF_FIRST,
                Err(reason) => {
                    warn!(target = %target, reason = %reason, retry_in_ms = backoff.as_millis() as u64, "cannot listen for other replicas' wake-ups");
                }
            }
            if tx.is_closed() {
                return;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    });
    rx
}

/// One connection's life: connects, listens, forwards notifications until
/// the connection ends. `Ok` once it was established and then dropped.
async fn listen_once(
    config: &tokio_postgres::Config,
    tls: &MakeRustlsConnect,
    tx: &mpsc::Sender<Wake>,
    access: &Arc<AccessCache>,
) -> Result<(), String> {
    let (client, mut connection) = config.connect(tls.clone()).await.map_err(|e| reason(&e))?;
    let (found, mut notes) = mpsc::unbounded_channel();
    let heard = Arc::clone(access);
    // The connection delivers notifications only while it is polled.
    let mut driver = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                // Told here, not behind wake-ups the runtime has yet to take.
                Some(Ok(AsyncMessage::Notification(n))) if n.channel() == "hearth_access" => {
                    heard.changed();
                }
                Some(Ok(AsyncMessage::Notification(n))) => {
                    if found.send(n).is_err() {
                        return Ok(());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(reason(&e)),
                None => return Ok(()),
            }
        }
    });
    if let Err(e) = client.batch_execute(CHANNELS).await {
        driver.abort();
        return Err(reason(&e));
    }
    // Every change from now on is heard, until this is dropped with the
    // connection (or the listener).
    let _heard = access.listening();
    if tx.send(Wake::Connected).await.is_err() {
        driver.abort();
        return Ok(());
    }
    debug!("listening for other replicas' wake-ups");
    loop {
        tokio::select! {
            note = notes.recv() => {
                let Some(note) = note else { break };
                let wake = match note.channel() {
                    "hearth_work" => Wake::Work,
                    "hearth_jobs" => Wake::Jobs,
                    "hearth_ended" => Wake::Ended(note.payload().to_owned()),
                    "hearth_asks" => Wake::Asks(note.payload().to_owned()),
                    "hearth_confirmation" => Wake::Confirmation(note.payload().to_owned()),
                    "hearth_incognito" => match note.payload().split_once(':') {
                        Some((on, thread_key)) => Wake::Incognito {
                            thread_key: thread_key.to_owned(),
                            on: on == "1",
                        },
                        None => continue,
                    },
                    _ => continue,
                };
                if wake == Wake::Work {
                    // A full buffer already holds a reason to look again.
                    let _ = tx.try_send(wake);
                } else if tx.send(wake).await.is_err() {
                    break;
                }
            }
            ended = &mut driver => {
                drop(client);
                return match ended {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(reason)) => Err(reason),
                    Err(e) => Err(e.to_string()),
                };
            }
        }
    }
    driver.abort();
    Ok(())
}

/// What went wrong, in the server's or the network's words (no URL: the
/// client's errors do not carry it).
fn reason(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => db.message().to_owned(),
        None => match std::error::Error::source(e) {
            Some(source) => format!("{e}: {source}"),
            None => e.to_string(),
        },
    }
}
