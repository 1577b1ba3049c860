//! hearth-config's integration tests (one binary).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod values;
