//! hearth-llm's integration tests, in one binary to save link time: each
//! adapter against its fake server (sharing `harness`), error
//! classification across adapters, and the allocation budget of decoding.
//! A new test file is a module here: `autotests` is off in Cargo.toml.

// Helpers outside #[test] functions fail the test just as an assert would.
#![allow(clippy::unwrap_used)]

mod alloc;
mod anthropic;
mod errors;
mod gemini;
mod harness;
mod openai_compat;
mod openai_responses;
