//! A channel's long-lived connection (the Telegram poller, the Discord
//! gateway, Slack Socket Mode) among replicas sharing a store: it runs only
//! on the replica holding the channel's lease (named after the channel, so
//! `GET /v1/cluster` lists it in `holds`). The holder renews the lease every
//! third of it and stops the connection as soon as a renewal is refused, or
//! before the lease could lapse when the store does not answer; the others
//! try to take it every third of a lease, so a dead holder's connection is
//! taken over within a lease and a third of its last renewal. Alone with the
//! store (SQLite) the connection simply runs.

use std::sync::Arc;
use std::time::Duration;

use hearth_core::now_ms;
use hearth_runtime::Runtime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::channel::Ingress;
use crate::health::Health;

/// How often a standby replica that knows the holder asks again who it is
/// (it may have changed hands between two others).
const HOLDER_EVERY: Duration = Duration::from_secs(60);

/// Runs `ingress` (channel `name`) until `stop`, on a shared store only
/// while this replica holds its lease; releases the lease at a clean stop.
pub(crate) async fn run_held(
    name: &'static str,
    ingress: Arc<dyn Ingress>,
    health: Arc<Health>,
    runtime: Runtime,
    stop: CancellationToken,
) {
    if !runtime.shares_store() {
        return ingress.run(runtime, stop).await;
    }
    let lease = runtime.lease();
    let every = lease / 3;
    let mut holder_asked: Option<Instant> = None;
    loop {
        let asked = Instant::now();
        match runtime.take_duty(name, now_ms()).await {
            Ok(true) => {
                holder_asked = None;
                match hold(name, &ingress, &health, &runtime, &stop, asked + lease).await {
                    Held::Lost => {}
                    Held::Stopped => {
                        runtime.release_duty(name).await;
                        info!(channel = name, "channel connection released");
                        return;
                    }
                    Held::Ended => {
                        // It cannot connect from here (a token missing,
                        // shown in its health): a replica that can takes
                        // it; this one no longer competes.
                        runtime.release_duty(name).await;
                        warn!(
                            channel = name,
                            "the channel's connection cannot run on this replica; left to the others"
                        );
                        return;
                    }
                }
            }
            Ok(false) => {
                // Not a failure: the connection works elsewhere. Who holds
                // it is asked when this replica starts standing by, then
                // now and then (a query of its own).
                if holder_asked.is_none_or(|t| t.elapsed() >= HOLDER_EVERY) {
                    let holder = runtime.duty_holder(name).await.ok().flatten();
                    if health.held_by().as_deref() != Some(holder.as_deref().unwrap_or_default()) {
                        info!(
                            channel = name,
                            holder = holder.as_deref().unwrap_or("another replica"),
                            "channel connection held by another replica; standing by"
                        );
                    }
                    health.standby(holder.as_deref());
                    holder_asked = Some(Instant::now());
                }
            }
            Err(e) => {
                warn!(channel = name, error = %e, "cannot tell who holds the channel's connection; asking again");
            }
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// How holding a connection ended.
enum Held {
    /// Told to stop (shutdown, reload).
    Stopped,
    /// The lease went to another replica, or could not be renewed in time.
    Lost,
    /// The connection's loop gave up on its own (it cannot run here).
    Ended,
}

/// Runs the connection while the lease is held (taken, covering until
/// `covered`), until it is stopped, the lease lost or the loop gave up.
async fn hold(
    name: &'static str,
    ingress: &Arc<dyn Ingress>,
    health: &Health,
    runtime: &Runtime,
    stop: &CancellationToken,
    mut covered: Instant,
) -> Held {
    info!(
        channel = name,
        replica = runtime.replica(),
        "this replica holds the channel's connection"
    );
    health.holding();
    let lease = runtime.lease();
    let every = lease / 3;
    let connection = stop.child_token();
    let mut task = tokio::spawn(ingress.clone().run(runtime.clone(), connection.clone()));
    let mut running = true;
    let held = loop {
        tokio::select! {
            () = stop.cancelled() => break Held::Stopped,
            () = tokio::time::sleep(every) => {}
            _ = &mut task => {
                running = false;
                break if stop.is_cancelled() { Held::Stopped } else { Held::Ended };
            }
        }
        let asked = Instant::now();
        match runtime.take_duty(name, now_ms()).await {
            Ok(true) => covered = asked + lease,
            Ok(false) => {
                warn!(
                    channel = name,
                    "another replica took the channel's connection; stopping it here"
                );
                break Held::Lost;
            }
            Err(e) => {
                // The lease still covers this replica for a while; stop
                // before it could lapse, so two never connect at once.
                if Instant::now() + every >= covered {
                    warn!(channel = name, error = %e, "cannot renew the channel's lease before it lapses; stopping its connection");
                    break Held::Lost;
                }
                warn!(channel = name, error = %e, "cannot renew the channel's lease; trying again");
            }
        }
    };
    connection.cancel();
    if running {
        // The loop ends promptly once stopped (its call under way dropped).
        let _ = task.await;
    }
    held
}
