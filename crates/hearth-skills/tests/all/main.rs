//! hearth-skills integration tests: one binary (see STYLE.md).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

mod suite;
