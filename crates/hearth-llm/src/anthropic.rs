//! Anthropic Messages API adapter (being built; not wired into the catalog yet).
