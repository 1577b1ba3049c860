//! systemd's service notification protocol (sd_notify(3)), written on std's
//! `UnixDatagram` rather than a crate: it is one datagram of `KEY=value`
//! lines to the socket named by `NOTIFY_SOCKET` (a path, or `@name` for a
//! Linux abstract socket). Under `Type=notify` the unit is "started" when
//! `READY=1` arrives; with `WatchdogSec=` set systemd passes `WATCHDOG_USEC`
//! and restarts the service when `WATCHDOG=1` stops arriving.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use hearth_runtime::Runtime;
use tracing::{debug, info, warn};

/// Where the notifications go: the socket of the service manager.
#[derive(Debug)]
pub struct Notifier {
    socket: UnixDatagram,
    target: Target,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Path(std::path::PathBuf),
    Abstract(Vec<u8>),
}

impl Notifier {
    /// The notifier for `NOTIFY_SOCKET`'s value, or `None` when it is unset
    /// or empty (hearth was not started by systemd with `Type=notify`).
    pub fn from_value(value: Option<&std::ffi::OsStr>) -> io::Result<Option<Self>> {
        use std::os::unix::ffi::OsStrExt;
        let Some(raw) = value.map(OsStrExt::as_bytes).filter(|v| !v.is_empty()) else {
            return Ok(None);
        };
        let target = match raw {
            [b'@', name @ ..] => Target::Abstract(name.to_vec()),
            [b'/', ..] => Target::Path(std::path::PathBuf::from(std::ffi::OsStr::from_bytes(raw))),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "NOTIFY_SOCKET is neither an absolute path nor an @abstract name",
                ));
            }
        };
        let socket = UnixDatagram::unbound()?;
        // Never block the async runtime: a manager that does not read is
        // its problem, and a lost watchdog ping is retried at the next tick.
        socket.set_nonblocking(true)?;
        Ok(Some(Self { socket, target }))
    }

    /// Sends one notification, e.g. `"READY=1\nSTATUS=..."`.
    pub fn send(&self, state: &str) -> io::Result<()> {
        match &self.target {
            Target::Path(p) => self.socket.send_to(state.as_bytes(), p).map(|_| ()),
            Target::Abstract(name) => send_abstract(&self.socket, name, state),
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn send_abstract(socket: &UnixDatagram, name: &[u8], state: &str) -> io::Result<()> {
    #[cfg(target_os = "android")]
    use std::os::android::net::SocketAddrExt;
    #[cfg(target_os = "linux")]
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
    socket.send_to_addr(state.as_bytes(), &addr).map(|_| ())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn send_abstract(_: &UnixDatagram, _: &[u8], _: &str) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "abstract sockets (NOTIFY_SOCKET=@...) exist only on Linux",
    ))
}

/// The watchdog interval systemd asks for: `WATCHDOG_USEC`, when
/// `WATCHDOG_PID` is unset or names this process (sd_watchdog_enabled(3)).
pub fn watchdog_interval(usec: Option<&str>, pid: Option<&str>) -> Option<Duration> {
    if let Some(pid) = pid
        && pid.trim().parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    let usec: u64 = usec?.trim().parse().ok().filter(|u| *u > 0)?;
    Some(Duration::from_micros(usec))
}

/// Tells systemd hearth is ready once `/readyz` would answer 200 (the store
/// answers and hearth is not shutting down; the listener is bound, so a
/// request made now is answered), then pings the watchdog at half its
/// interval. Does nothing outside a `Type=notify` service. Call it once the
/// server is serving.
pub fn when_ready(runtime: Runtime) {
    let notifier = match Notifier::from_value(std::env::var_os("NOTIFY_SOCKET").as_deref()) {
        Ok(Some(n)) => n,
        Ok(None) => return,
        Err(e) => {
            warn!(error = %e, "cannot notify systemd (NOTIFY_SOCKET); the unit may time out starting");
            return;
        }
    };
    let watchdog = watchdog_interval(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
    );
    tokio::spawn(async move {
        // Readiness as /readyz decides it; a store that does not answer yet
        // is asked again rather than reported ready.
        let mut wait = Duration::from_millis(100);
        loop {
            if runtime.is_shutting_down() {
                return;
            }
            match runtime.store_ready().await {
                Ok(()) => break,
                Err(e) => {
                    warn!(error = %e, "not ready for systemd yet: the store does not answer");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
        match notifier.send("READY=1\nSTATUS=serving") {
            Ok(()) => info!("told systemd hearth is ready"),
            Err(e) => warn!(error = %e, "cannot send READY=1 to systemd"),
        }
        let Some(every) = watchdog else { return };
        // Half the interval, as sd_watchdog_enabled(3) advises.
        let mut tick = tokio::time::interval(every / 2);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if runtime.is_shutting_down() {
                let _ = notifier.send("STOPPING=1");
                return;
            }
            if let Err(e) = notifier.send("WATCHDOG=1") {
                debug!(error = %e, "watchdog ping to systemd failed; retried at the next tick");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn unset_or_empty_socket_means_no_notifier() {
        assert!(Notifier::from_value(None).unwrap().is_none());
        assert!(
            Notifier::from_value(Some(OsStr::new("")))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn a_relative_socket_is_refused() {
        assert!(Notifier::from_value(Some(OsStr::new("run/notify"))).is_err());
    }

    #[test]
    fn sends_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify");
        let rx = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::from_value(Some(path.as_os_str()))
            .unwrap()
            .unwrap();
        n.send("READY=1").unwrap();
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"READY=1");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn sends_to_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("hearth-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let rx = UnixDatagram::bind_addr(&addr).unwrap();
        let value = format!("@{name}");
        let n = Notifier::from_value(Some(OsStr::new(&value)))
            .unwrap()
            .unwrap();
        n.send("WATCHDOG=1").unwrap();
        let mut buf = [0u8; 64];
        let len = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"WATCHDOG=1");
    }

    #[test]
    fn watchdog_interval_follows_systemd_variables() {
        let me = std::process::id().to_string();
        assert_eq!(
            watchdog_interval(Some("30000000"), None),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            watchdog_interval(Some("200000"), Some(&me)),
            Some(Duration::from_millis(200))
        );
        // Meant for another process (a parent that forked us).
        assert_eq!(watchdog_interval(Some("200000"), Some("1")), None);
        assert_eq!(watchdog_interval(Some("0"), None), None);
        assert_eq!(watchdog_interval(Some("soon"), None), None);
        assert_eq!(watchdog_interval(None, None), None);
    }
}
