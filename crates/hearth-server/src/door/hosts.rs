//! The names this server answers to, and what counts as its own origin.
//!
//! A `Host` names this server when it is a loopback name, the bind address,
//! or a host of `[server] allowed_hosts`. A page on another site that
//! rebinds its name to 127.0.0.1 still sends its own name, so it is refused.
//!
//! A browser `Origin` is this server's own when it is the origin the request
//! was sent to (scheme aside: the `Host`'s name and port), or a host of
//! `[server] allowed_hosts` (a reverse proxy that rewrites `Host` serves the
//! pages under that name). Another port of localhost is another origin: a
//! page served by some other local program is not hearth's.

use std::net::IpAddr;

use axum::http::Uri;
use axum::http::uri::Authority;

/// Names every hearth answers to: the loopback ones.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// A host name without brackets, lower case, with the one port it must come
/// with (`None`: any port).
type Entry = (String, Option<u16>);

/// The hosts this server accepts in `Host`, and the configured ones it also
/// accepts as an `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// The loopback names and the bind address.
    local: Vec<Entry>,
    /// `[server] allowed_hosts`.
    configured: Vec<Entry>,
}

impl Default for AllowedHosts {
    /// The loopback names only.
    fn default() -> Self {
        Self::new(None, &[])
    }
}

fn normalize(host: &str) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => host.to_ascii_lowercase(),
    }
}

/// `host` or `host:port` (IPv6 in brackets) as a host and maybe a port;
/// a bare IPv6 address (`::1`) is a host.
fn parse_authority(s: &str) -> Option<Entry> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some((ip.to_string(), None));
    }
    let a: Authority = s.parse().ok()?;
    if a.as_str().contains('@') || a.host().is_empty() {
        return None;
    }
    Some((normalize(a.host()), a.port_u16()))
}

/// A web origin: `http` or `https`, a host, and its port (the scheme's
/// default when not written).
struct Origin {
    host: String,
    port: u16,
}

fn parse_origin(value: &str) -> Option<Origin> {
    let uri: Uri = value.trim().parse().ok()?;
    let default = match uri.scheme_str()? {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return None;
    }
    let a = uri.authority()?;
    if a.as_str().contains('@') || a.host().is_empty() {
        return None;
    }
    Some(Origin {
        host: normalize(a.host()),
        port: a.port_u16().unwrap_or(default),
    })
}

fn matches(entries: &[Entry], host: &str, port: Option<u16>) -> bool {
    entries
        .iter()
        .any(|(h, p)| h == host && p.is_none_or(|p| Some(p) == port))
}

impl AllowedHosts {
    /// The loopback names, the bind address's IP and `extra` (host names or
    /// `host:port`; entries that are neither are ignored, which config
    /// validation reports).
    pub fn new(bind: Option<IpAddr>, extra: &[String]) -> Self {
        let mut local: Vec<Entry> = LOOPBACK.iter().map(|h| ((*h).to_owned(), None)).collect();
        if let Some(ip) = bind {
            local.push((ip.to_string(), None));
        }
        let configured = extra.iter().filter_map(|e| parse_authority(e)).collect();
        Self { local, configured }
    }

    /// Whether a `Host` header value names this server.
    pub fn allows_host(&self, value: &str) -> bool {
        parse_authority(value)
            .is_some_and(|(h, p)| matches(&self.local, &h, p) || matches(&self.configured, &h, p))
    }

    /// Whether an `Origin` header value is this server's own for a request
    /// whose `Host` is `host` (already allowed): the same name and port as
    /// `host` (a `Host` without a port matches the origin's default port),
    /// or a host of `[server] allowed_hosts`. `null` (a sandboxed or
    /// `file:` page, or a form under `Referrer-Policy: no-referrer`) is not
    /// an origin here; the caller decides it.
    pub fn allows_origin(&self, value: &str, host: &str) -> bool {
        let Some(origin) = parse_origin(value) else {
            return false;
        };
        let same = parse_authority(host)
            .is_some_and(|(h, p)| h == origin.host && p.unwrap_or(origin.port) == origin.port);
        same || matches(&self.configured, &origin.host, Some(origin.port))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn loopback_names_pass_on_any_port_and_others_do_not() {
        let a = AllowedHosts::default();
        for h in [
            "localhost",
            "LOCALHOST:7777",
            "127.0.0.1",
            "127.0.0.1:1",
            "[::1]:7777",
            "::1",
            "[0:0:0:0:0:0:0:1]:7777",
        ] {
            assert!(a.allows_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:7777",
            "localhost.evil.example",
            "127.0.0.2",
            "",
            ":7777",
            "user@localhost",
        ] {
            assert!(!a.allows_host(h), "{h}");
        }
    }

    #[test]
    fn the_bind_address_and_configured_hosts_pass() {
        let a = AllowedHosts::new(
            Some("192.168.1.5".parse().unwrap()),
            &[
                "Hearth.LAN".into(),
                "proxy.example:8443".into(),
                "not a host".into(),
            ],
        );
        assert!(a.allows_host("192.168.1.5:7777"));
        assert!(a.allows_host("hearth.lan:7777"));
        assert!(a.allows_host("proxy.example:8443"));
        assert!(!a.allows_host("proxy.example:8444"));
        assert!(!a.allows_host("proxy.example"));
        // A configured name is an origin whatever the Host (a proxy may
        // rewrite it), on its port when it names one.
        assert!(a.allows_origin("https://hearth.lan", "127.0.0.1:7777"));
        assert!(a.allows_origin("https://proxy.example:8443", "127.0.0.1:7777"));
        assert!(!a.allows_origin("https://proxy.example", "127.0.0.1:7777"));
        assert!(!a.allows_origin("https://other.lan", "hearth.lan"));
        // The bind address is only its own origin.
        assert!(a.allows_origin("http://192.168.1.5:7777", "192.168.1.5:7777"));
        assert!(!a.allows_origin("http://192.168.1.5:8080", "192.168.1.5:7777"));
    }

    #[test]
    fn an_origin_is_own_only_on_the_requests_host_and_port() {
        let a = AllowedHosts::default();
        for (o, host) in [
            ("http://localhost:7777", "localhost:7777"),
            ("https://127.0.0.1:7777", "127.0.0.1:7777"),
            ("http://[::1]:9", "[::1]:9"),
            ("http://localhost/", "localhost"),
            ("http://localhost", "localhost:80"),
            ("https://LOCALHOST", "localhost"),
        ] {
            assert!(a.allows_origin(o, host), "{o} for {host}");
        }
        for (o, host) in [
            ("null", "localhost:7777"),
            ("http://evil.example", "localhost:7777"),
            ("http://localhost:3000", "localhost:7777"),
            ("http://127.0.0.1:7777", "localhost:7777"),
            ("file://localhost", "localhost"),
            ("localhost:7777", "localhost:7777"),
            ("http://localhost:7777/x", "localhost:7777"),
            ("http://user@localhost:7777", "localhost:7777"),
            ("", "localhost"),
        ] {
            assert!(!a.allows_origin(o, host), "{o} for {host}");
        }
    }

    proptest! {
        /// Any header text is decided without panicking, and a value that
        /// passes names a loopback host.
        #[test]
        fn any_value_is_decided(v in any::<String>(), host in any::<String>()) {
            let a = AllowedHosts::default();
            if a.allows_host(&v) {
                let l = v.to_ascii_lowercase();
                prop_assert!(l.contains("localhost") || l.contains("127.0.0.1") || l.contains(':'));
            }
            if a.allows_origin(&v, &host) {
                prop_assert!(v.starts_with("http"));
            }
        }
    }
}
