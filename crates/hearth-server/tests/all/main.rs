//! hearth-server's integration tests (one binary): the real router served
//! by `hearth_server::serve` on 127.0.0.1, driven over HTTP.
#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod harness;

mod apps;
mod contract;
mod door;
mod errors;
mod listen;
mod mcp;
mod members;
mod openai;
mod openai_threads;
mod parsers;
mod push;
mod runs;
mod ui;
