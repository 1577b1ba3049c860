//! DNS-rebinding protection for `/mcp`: the `Host` and `Origin` a request
//! carries must name this server (a loopback name, the bind address, or a
//! host of `[server] allowed_hosts`). A page on another site that rebinds
//! its name to 127.0.0.1 still sends its own name, so it gets 403.

use std::net::IpAddr;

use axum::http::Uri;
use axum::http::uri::Authority;

/// Names every hearth answers to: the loopback ones.
const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// The hosts `/mcp` accepts in `Host` and `Origin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Lower-case host names without brackets, each with the one port it
    /// must come with (`None`: any port).
    hosts: Vec<(String, Option<u16>)>,
}

impl Default for AllowedHosts {
    /// The loopback names only.
    fn default() -> Self {
        Self::new(None, &[])
    }
}

fn normalize(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

/// `host` or `host:port` (IPv6 in brackets) as a host and maybe a port;
/// a bare IPv6 address (`::1`) is a host.
fn parse_authority(s: &str) -> Option<(String, Option<u16>)> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some((ip.to_string(), None));
    }
    let a: Authority = s.parse().ok()?;
    if a.as_str().contains('@') {
        return None;
    }
    Some((normalize(a.host()), a.port_u16()))
}

impl AllowedHosts {
    /// The loopback names, the bind address's IP and `extra` (host names or
    /// `host:port`; entries that are neither are ignored, which config
    /// validation reports).
    pub fn new(bind: Option<IpAddr>, extra: &[String]) -> Self {
        let mut hosts: Vec<(String, Option<u16>)> =
            LOOPBACK.iter().map(|h| ((*h).to_owned(), None)).collect();
        if let Some(ip) = bind {
            hosts.push((ip.to_string(), None));
        }
        hosts.extend(extra.iter().filter_map(|e| parse_authority(e)));
        Self { hosts }
    }

    fn allows(&self, host: &str, port: Option<u16>) -> bool {
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => normalize(host),
        };
        self.hosts
            .iter()
            .any(|(h, p)| *h == host && p.is_none_or(|p| Some(p) == port))
    }

    /// Whether a `Host` header value names this server.
    pub fn allows_host(&self, value: &str) -> bool {
        parse_authority(value).is_some_and(|(h, p)| self.allows(&h, p))
    }

    /// Whether an `Origin` header value names this server: `http` or
    /// `https` with an allowed host. `null` (a sandboxed or file page) is refused.
    pub fn allows_origin(&self, value: &str) -> bool {
        let Ok(uri) = value.trim().parse::<Uri>() else {
            return false;
        };
        let scheme_ok = matches!(uri.scheme_str(), Some("http" | "https"));
        let path_ok = matches!(uri.path(), "" | "/");
        match uri.authority() {
            Some(a) if scheme_ok && path_ok => self.allows(&normalize(a.host()), a.port_u16()),
            _ => false,
        }
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
        ] {
            assert!(a.allows_host(h), "{h}");
        }
        for h in [
            "evil.example",
            "evil.example:7777",
            "localhost.evil.example",
            "127.0.0.2",
            "",
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
        assert!(a.allows_origin("https://hearth.lan"));
        assert!(!a.allows_origin("https://other.lan"));
    }

    #[test]
    fn origins_need_a_web_scheme_and_an_allowed_host() {
        let a = AllowedHosts::default();
        for o in [
            "http://localhost:3000",
            "https://127.0.0.1",
            "http://[::1]:9",
            "http://localhost/",
        ] {
            assert!(a.allows_origin(o), "{o}");
        }
        for o in [
            "null",
            "http://evil.example",
            "file://localhost",
            "localhost",
            "http://localhost/x",
            "",
        ] {
            assert!(!a.allows_origin(o), "{o}");
        }
    }

    proptest! {
        /// Any header text is decided without panicking, and a value that
        /// passes names a loopback host.
        #[test]
        fn any_value_is_decided(v in any::<String>()) {
            let a = AllowedHosts::default();
            if a.allows_host(&v) || a.allows_origin(&v) {
                let l = v.to_ascii_lowercase();
                prop_assert!(l.contains("localhost") || l.contains("127.0.0.1") || l.contains("::1"));
            }
        }
    }
}
