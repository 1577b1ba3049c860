//! Safe web access for tools (being built): SSRF-guarded fetch.
