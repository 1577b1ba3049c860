//! hearth-skills integration tests: one binary (see STYLE.md).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod suite;
