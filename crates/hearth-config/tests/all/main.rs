//! hearth-config's integration tests (one binary).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod values;
