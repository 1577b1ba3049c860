//! A fake Anthropic Messages API server (being built).
