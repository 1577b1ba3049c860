//! Address and URL policy: which targets `web_fetch` may reach.
//!
//! Everything here is pure (no I/O) so the policy can be tested as a table.
//! The same checks run on the first URL and on every redirect hop; the
//! resolver (see `resolve.rs`) applies [`non_public_reason`] to every address a
//! name resolves to.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

/// True when `ip` is a globally reachable unicast address that `web_fetch`
/// may connect to.
///
/// std's `IpAddr::is_global` is unstable, and it does not know the cloud
/// metadata addresses, so the policy is written out here.
pub fn is_public(ip: IpAddr) -> bool {
    non_public_reason(ip).is_none()
}

/// Why `ip` is not public (e.g. `"private"`, `"loopback"`), or `None` when it
/// is public. The words fit both "10.0.0.1 is a private address" and
/// "redirect to http://10.0.0.1/ (private)".
pub fn non_public_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

/// One IPv4 block: network, prefix length, reason.
type V4Block = (u32, u32, &'static str);

/// Searched in order; the first match names the reason. Specific addresses
/// come first so metadata endpoints are named as such rather than by the
/// range they sit in (169.254.169.254 is also link-local).
const V4_BLOCKS: &[V4Block] = &[
    (0xA9FE_A9FE, 32, "cloud metadata"), // 169.254.169.254 (AWS, GCP, Azure, ...)
    (0x6464_64C8, 32, "cloud metadata"), // 100.100.100.200 (Alibaba)
    (0xC000_00C0, 32, "cloud metadata"), // 192.0.0.192 (Oracle)
    (0xA83F_8110, 32, "cloud metadata"), // 168.63.129.16 (Azure wire server)
    (0xFFFF_FFFF, 32, "broadcast"),
    (0x0000_0000, 32, "unspecified"),
    (0x0000_0000, 8, "this-network (0/8)"),
    (0x0A00_0000, 8, "private"),
    (0x6440_0000, 10, "shared CGNAT (100.64/10)"),
    (0x7F00_0000, 8, "loopback"),
    (0xA9FE_0000, 16, "link-local"),
    (0xAC10_0000, 12, "private"),
    (0xC000_0000, 24, "IETF protocol assignment (192.0.0/24)"),
    (0xC000_0200, 24, "documentation"),
    (0xC058_6300, 24, "6to4 relay anycast (192.88.99/24)"),
    (0xC0A8_0000, 16, "private"),
    (0xC612_0000, 15, "benchmarking (198.18/15)"),
    (0xC633_6400, 24, "documentation"),
    (0xCB00_7100, 24, "documentation"),
    (0xE000_0000, 4, "multicast"),
    (0xF000_0000, 4, "reserved (240/4)"),
];

/// The first IPv4 block containing `ip`.
fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4_BLOCKS
        .iter()
        .find(|(net, len, _)| {
            let mask = if *len == 0 { 0 } else { u32::MAX << (32 - len) };
            bits & mask == *net
        })
        .map(|(_, _, why)| *why)
}

/// One IPv6 block: network, prefix length, reason.
type V6Block = (u128, u32, &'static str);

/// Specific addresses first, then Teredo before the /23 that contains it.
const V6_BLOCKS: &[V6Block] = &[
    (
        0xfd00_0ec2_0000_0000_0000_0000_0000_0254,
        128,
        "cloud metadata",
    ), // fd00:ec2::254 (AWS)
    (0, 128, "unspecified"),
    (1, 128, "loopback"),
    (
        0x0100_0000_0000_0000_0000_0000_0000_0000,
        64,
        "discard-only (100::/64)",
    ),
    (
        0x2001_0db8_0000_0000_0000_0000_0000_0000,
        32,
        "documentation",
    ),
    (
        0x3fff_0000_0000_0000_0000_0000_0000_0000,
        20,
        "documentation",
    ),
    // Teredo tunnels to an arbitrary IPv4 host; not a globally routed target.
    (
        0x2001_0000_0000_0000_0000_0000_0000_0000,
        32,
        "Teredo (2001::/32)",
    ),
    // The rest of 2001::/23 is IETF special-purpose space (ORCHID, AMT, ...).
    (
        0x2001_0000_0000_0000_0000_0000_0000_0000,
        23,
        "IETF protocol assignment (2001::/23)",
    ),
    (
        0x5f00_0000_0000_0000_0000_0000_0000_0000,
        16,
        "SRv6 SID (5f00::/16)",
    ),
    (0xfc00_0000_0000_0000_0000_0000_0000_0000, 7, "unique-local"),
    (0xfe80_0000_0000_0000_0000_0000_0000_0000, 10, "link-local"),
    (0xfec0_0000_0000_0000_0000_0000_0000_0000, 10, "site-local"),
    (0xff00_0000_0000_0000_0000_0000_0000_0000, 8, "multicast"),
    (
        0x0064_ff9b_0001_0000_0000_0000_0000_0000,
        48,
        "local-use NAT64 (64:ff9b:1::/48)",
    ),
];

/// IPv6 blocks, then forms embedding IPv4, then "not global unicast".
fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    let in_block = |net: u128, len: u32| {
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        bits & mask == net
    };
    if let Some((_, _, why)) = V6_BLOCKS.iter().find(|(net, len, _)| in_block(*net, *len)) {
        return Some(why);
    }
    // Forms that carry an IPv4 address: the connection may end up at that
    // IPv4 host, so it must pass the IPv4 policy.
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    if in_block(0xffff_0000_0000, 96) {
        // IPv4-mapped (::ffff:a.b.c.d): sockets treat it as the IPv4 host,
        // and a literal like [::ffff:127.0.0.1] only exists to dodge filters.
        return Some(v4_reason(low32).unwrap_or("IPv4-mapped"));
    }
    if in_block(0xffff_0000_0000_0000, 96) {
        return Some("IPv4-translated (::ffff:0:0:0/96)");
    }
    if in_block(0, 96) {
        return Some("IPv4-compatible (::/96, deprecated)");
    }
    if in_block(0x0064_ff9b_0000_0000_0000_0000_0000_0000, 96) {
        // NAT64 with a public embedded address is how IPv6-only networks
        // reach IPv4 sites (DNS64), so only the embedded address decides.
        return v4_reason(low32).map(embedded_reason);
    }
    if in_block(0x2002_0000_0000_0000_0000_0000_0000_0000, 16) {
        let embedded = Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32);
        return v4_reason(embedded).map(embedded_reason);
    }
    // Only 2000::/3 is allocated as global unicast; everything else is
    // reserved by IANA.
    if !in_block(0x2000_0000_0000_0000_0000_0000_0000_0000, 3) {
        return Some("reserved");
    }
    None
}

/// An IPv4 reason for an address embedded in NAT64 or 6to4.
fn embedded_reason(why: &'static str) -> &'static str {
    match why {
        "loopback" => "loopback (embedded IPv4)",
        "private" => "private (embedded IPv4)",
        "link-local" => "link-local (embedded IPv4)",
        "cloud metadata" => "cloud metadata (embedded IPv4)",
        "unspecified" => "unspecified (embedded IPv4)",
        _ => "non-public (embedded IPv4)",
    }
}

/// Why a URL or an address was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The text is not a URL.
    Invalid(String),
    /// Not http or https.
    Scheme(String),
    /// No host. The URL parser gives http(s) URLs a host, so this is
    /// defensive.
    NoHost,
    /// The host is an IP literal outside the public policy.
    Address {
        /// The address the URL means.
        ip: IpAddr,
        /// From [`non_public_reason`].
        why: &'static str,
        /// The host as written when it differs from the canonical form.
        written: Option<String>,
    },
    /// A public IPv4 literal written in an obfuscated form (decimal, octal,
    /// hex or shortened).
    NonCanonical {
        /// The host as written.
        written: String,
        /// The address it means.
        ip: IpAddr,
    },
    /// `localhost` and `*.localhost` always mean loopback (RFC 6761).
    LocalName(String),
    /// User name or password in the URL.
    Credentials,
    /// Port outside the allow list.
    Port(u16),
    /// Every address the host resolved to was dropped.
    NoPublicAddress {
        /// The host name.
        host: String,
        /// Each dropped address with its reason.
        dropped: Vec<(IpAddr, &'static str)>,
    },
    /// The connection ended up at an address the policy forbids.
    Peer(SocketAddr, &'static str),
}

impl Refusal {
    /// The reason as a sentence part, e.g. "10.0.0.1 is a private address".
    pub fn long(&self) -> String {
        match self {
            Self::Address {
                ip,
                why,
                written: Some(w),
            } => format!("{ip} is {} {why} address (written as {w})", article(why)),
            Self::Address { ip, why, .. } => format!("{ip} is {} {why} address", article(why)),
            Self::Peer(addr, why) => {
                format!("connected peer {addr} is {} {why} address", article(why))
            }
            other => other.short(),
        }
    }

    /// The reason as a parenthetical, e.g. "private"; used for redirects.
    pub fn short(&self) -> String {
        match self {
            Self::Invalid(e) => format!("not a valid URL: {e}"),
            Self::Scheme(s) => format!("scheme {s}: is not allowed, only http and https"),
            Self::NoHost => "the URL has no host".into(),
            Self::Address { why, .. } => (*why).to_owned(),
            Self::NonCanonical { written, ip } => {
                format!("IP address written in a non-canonical form {written:?}; write it as {ip}")
            }
            Self::LocalName(h) => format!("{h} is a loopback name"),
            Self::Credentials => "user names and passwords in URLs are not allowed".into(),
            Self::Port(p) => format!("port {p} is not allowed, only 80 and 443"),
            Self::NoPublicAddress { host, dropped } => {
                let list: Vec<String> = dropped
                    .iter()
                    .map(|(ip, why)| format!("{ip} {why}"))
                    .collect();
                format!(
                    "{host} resolves only to non-public addresses ({})",
                    list.join(", ")
                )
            }
            Self::Peer(addr, why) => format!("connected peer {addr} is {why}"),
        }
    }
}

/// "a" or "an" before a reason word ("an unspecified", "a unique-local").
fn article(word: &str) -> &'static str {
    let vowel = word.starts_with(['a', 'e', 'i', 'o', 'u', 'A', 'E', 'I', 'O', 'U']);
    if vowel && !word.starts_with("uni") {
        "an"
    } else {
        "a"
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.long())
    }
}

impl std::error::Error for Refusal {}

/// What the guard allows beyond the public policy. Only tests set it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Allowance {
    /// Exactly one socket address (IP and port) allowed even though it is
    /// not public; test-only.
    pub for_tests: Option<SocketAddr>,
}

impl Allowance {
    /// Whether a connection to `addr` is allowed: public, or the one test
    /// address.
    pub fn allows(&self, addr: SocketAddr) -> Result<(), &'static str> {
        match non_public_reason(addr.ip()) {
            None => Ok(()),
            Some(_) if self.for_tests == Some(addr) => Ok(()),
            Some(why) => Err(why),
        }
    }

    /// 80, 443, or the test address's port.
    fn allows_port(&self, port: u16) -> bool {
        port == 80 || port == 443 || self.for_tests.is_some_and(|a| a.port() == port)
    }
}

/// Parses `raw` and checks scheme, host and port before anything is sent.
///
/// IP literals are judged here (the connector does not resolve them, so the
/// resolver never sees them); names are judged by the resolver at connect
/// time.
pub fn check_url(raw: &str, allow: &Allowance) -> Result<Url, Refusal> {
    let url = Url::parse(raw.trim()).map_err(|e| Refusal::Invalid(e.to_string()))?;
    check_parsed(&url, Some(raw), allow)?;
    Ok(url)
}

/// Checks an already parsed URL (a redirect target). `raw` is the text it
/// was parsed from, when known, to spot obfuscated IPv4 literals.
pub fn check_parsed(url: &Url, raw: Option<&str>, allow: &Allowance) -> Result<(), Refusal> {
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(Refusal::Scheme(scheme.to_owned()));
    }
    let port = url.port_or_known_default().unwrap_or(0);
    // The host decides first: for http://public.test@127.0.0.1/ the useful
    // message is that the real host is loopback.
    match literal_ip(url)? {
        Some(IpAddr::V4(v4)) => {
            let written = raw
                .and_then(raw_host)
                .filter(|w| !w.eq_ignore_ascii_case(&v4.to_string()));
            check_ip(IpAddr::V4(v4), port, written, allow)?;
        }
        Some(ip) => check_ip(ip, port, None, allow)?,
        None => {
            let name = url.host_str().unwrap_or_default();
            let bare = name.trim_end_matches('.').to_ascii_lowercase();
            if bare == "localhost" || bare.ends_with(".localhost") {
                return Err(Refusal::LocalName(name.to_owned()));
            }
        }
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refusal::Credentials);
    }
    if !allow.allows_port(port) {
        return Err(Refusal::Port(port));
    }
    Ok(())
}

/// The host as an IP address when it is a literal. The URL parser has
/// already normalised decimal, octal, hex and short IPv4 forms to dotted
/// quads, and a WHATWG domain host can never look like one, so parsing the
/// serialised host is exact.
fn literal_ip(url: &Url) -> Result<Option<IpAddr>, Refusal> {
    let host = url.host_str().ok_or(Refusal::NoHost)?;
    if let Some(inner) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| Some(IpAddr::V6(ip)))
            .map_err(|e| Refusal::Invalid(e.to_string()));
    }
    Ok(host.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
}

/// Policy for an IP-literal host (and, for IPv4, how it was spelled).
fn check_ip(
    ip: IpAddr,
    port: u16,
    written: Option<String>,
    allow: &Allowance,
) -> Result<(), Refusal> {
    match allow.allows(SocketAddr::new(ip, port)) {
        Err(why) => Err(Refusal::Address { ip, why, written }),
        // Obfuscated spellings of public addresses have no honest use and
        // defeat naive filters downstream (logs, allow lists), so refuse them.
        Ok(()) => match written {
            Some(w) => Err(Refusal::NonCanonical { written: w, ip }),
            None => Ok(()),
        },
    }
}

/// The host part of a URL exactly as written, without userinfo or port.
/// Only used to tell whether an IPv4 literal was spelled canonically.
fn raw_host(raw: &str) -> Option<String> {
    let raw = raw.trim();
    // Scheme-relative ("//host/") or absolute ("http://host/", "http:host").
    let after_scheme = if raw.starts_with(['/', '\\']) {
        raw
    } else {
        raw.split_once(':')?.1
    };
    let rest = after_scheme.trim_start_matches(['/', '\\']);
    let authority = rest.split(['/', '\\', '?', '#']).next()?;
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host_port.starts_with('[') {
        host_port
            .find(']')
            .map_or(host_port, |end| &host_port[..=end])
    } else {
        host_port.rsplit_once(':').map_or(host_port, |(h, _)| h)
    };
    Some(host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_table() {
        // (address, public?)
        let table: &[(&str, bool)] = &[
            ("8.8.8.8", true),
            ("1.1.1.1", true),
            ("93.184.216.34", true),
            ("172.15.255.255", true),
            ("172.32.0.0", true),
            ("100.63.255.255", true),
            ("100.128.0.0", true),
            ("198.17.255.255", true),
            ("198.20.0.0", true),
            ("223.255.255.255", true),
            ("2606:4700:4700::1111", true),
            ("2001:4860:4860::8888", true),
            ("2002:0808:0808::1", true),
            ("64:ff9b::808:808", true),
            ("0.0.0.0", false),
            ("0.1.2.3", false),
            ("10.0.0.1", false),
            ("10.255.255.255", false),
            ("100.64.0.1", false),
            ("100.127.255.255", false),
            ("100.100.100.200", false),
            ("127.0.0.1", false),
            ("127.255.255.254", false),
            ("169.254.0.1", false),
            ("169.254.169.254", false),
            ("172.16.0.1", false),
            ("172.31.255.255", false),
            ("192.0.0.1", false),
            ("192.0.0.192", false),
            ("192.0.2.1", false),
            ("192.88.99.1", false),
            ("192.168.1.1", false),
            ("198.18.0.1", false),
            ("198.19.255.255", false),
            ("198.51.100.7", false),
            ("203.0.113.9", false),
            ("224.0.0.1", false),
            ("239.255.255.250", false),
            ("240.0.0.1", false),
            ("255.255.255.255", false),
            ("168.63.129.16", false),
            ("::", false),
            ("::1", false),
            ("::ffff:127.0.0.1", false),
            ("::ffff:10.0.0.1", false),
            ("::ffff:8.8.8.8", false),
            ("::ffff:0:808:808", false),
            ("::127.0.0.1", false),
            ("64:ff9b::7f00:1", false),
            ("64:ff9b::a9fe:a9fe", false),
            ("64:ff9b:1::1", false),
            ("2002:7f00:0001::1", false),
            ("2002:0a00:0001::1", false),
            ("2002:a9fe:a9fe::", false),
            ("2001::1", false),
            ("2001:0:4136:e378::1", false),
            ("2001:db8::1", false),
            ("3fff::1", false),
            ("fc00::1", false),
            ("fd12:3456::1", false),
            ("fd00:ec2::254", false),
            ("fe80::1", false),
            ("febf::1", false),
            ("fec0::1", false),
            ("ff02::1", false),
            ("100::1", false),
            ("5f00::1", false),
            ("4000::1", false),
            ("::2", false),
        ];
        for (text, want) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(is_public(ip), *want, "{text}: {:?}", non_public_reason(ip));
        }
        assert!(table.len() >= 60);
    }

    #[test]
    fn reasons_name_the_range() {
        let r = |s: &str| non_public_reason(s.parse().unwrap()).unwrap();
        assert_eq!(r("169.254.169.254"), "cloud metadata");
        assert_eq!(r("100.100.100.200"), "cloud metadata");
        assert_eq!(r("fd00:ec2::254"), "cloud metadata");
        assert_eq!(r("10.1.2.3"), "private");
        assert_eq!(r("127.0.0.1"), "loopback");
        assert_eq!(r("::ffff:127.0.0.1"), "loopback");
        assert_eq!(r("::ffff:8.8.8.8"), "IPv4-mapped");
        assert_eq!(r("2002:c0a8:0101::1"), "private (embedded IPv4)");
        assert_eq!(r("0.0.0.0"), "unspecified");
        assert_eq!(r("255.255.255.255"), "broadcast");
    }

    #[test]
    fn raw_host_extraction() {
        assert_eq!(raw_host("http://0x7f.1/").as_deref(), Some("0x7f.1"));
        assert_eq!(
            raw_host("http://a@2130706433:80/x").as_deref(),
            Some("2130706433")
        );
        assert_eq!(raw_host("HTTP:\\\\127.1?q").as_deref(), Some("127.1"));
        assert_eq!(raw_host("http://[::1]:8080/").as_deref(), Some("[::1]"));
    }

    #[test]
    fn public_literals_in_odd_forms_are_refused() {
        let allow = Allowance::default();
        let e = check_url("http://134744072/", &allow).unwrap_err();
        assert!(matches!(e, Refusal::NonCanonical { .. }), "{e:?}");
        check_url("http://8.8.8.8/", &allow).unwrap();
        check_url("https://[2606:4700:4700::1111]/", &allow).unwrap();
    }
}
