//! hearth-llm's integration tests, in one binary to save link time: each
//! adapter against its fake server (sharing `harness`), error
//! classification across adapters, and the allocation budget of decoding.
//! A new test file is a module here: `autotests` is off in Cargo.toml.

// Helpers outside #[test] functions fail the test just as an assert would.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod alloc;
mod anthropic;
mod embeddings;
mod errors;
mod gemini;
mod harness;
mod openai_compat;
mod openai_responses;
