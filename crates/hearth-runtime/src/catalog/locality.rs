//! Which providers keep requests on this machine or a private network
//! (incognito threads may be limited to them).

use std::net::IpAddr;

/// True when `url`'s host is this machine or a private network: loopback,
/// private and link-local addresses, `localhost`, `*.local`, and single-label
/// names (a container or LAN host such as `ollama`). Providers without a
/// `base_url` use their public API and are not local.
pub fn is_local_url(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unique_local()
                || ip.is_unicast_link_local()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_private() || v4.is_link_local())
        }
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost"
                || d.ends_with(".localhost")
                || d.ends_with(".local")
                || d.ends_with(".internal")
                || !d.contains('.')
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_are_this_machine_or_a_private_network() {
        for url in [
            "http://127.0.0.1:11434/v1",
            "http://localhost:8080",
            "http://[::1]:1234/v1",
            "http://192.168.1.20:11434",
            "http://10.0.0.5/v1",
            "http://ollama:11434/v1",
            "http://gpu-box.local:8000",
            "http://[fd00::1]/v1",
        ] {
            assert!(is_local_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "https://openrouter.ai/api/v1",
            "http://8.8.8.8/v1",
            "http://[2001:db8::1]/v1",
            "not a url",
        ] {
            assert!(!is_local_url(url), "{url}");
        }
    }
}
