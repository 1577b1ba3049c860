//! Time as unix milliseconds, rendered as RFC 3339 UTC at the edges.

/// Unix time in milliseconds.
pub type Timestamp = i64;

/// The current unix time in milliseconds.
pub fn now_ms() -> Timestamp {
    jiff::Timestamp::now().as_millisecond()
}

/// Renders unix milliseconds as an RFC 3339 UTC string (`2026-11-22T11:32:33.123Z`).
pub fn rfc3339(ms: Timestamp) -> String {
    match jiff::Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => String::from("1970-01-01T00:00:00.000Z"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_utc_millis() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            super::rfc3339(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
    }
}
