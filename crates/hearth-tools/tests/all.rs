//! hearth-tools' integration tests, as one test binary: one link instead of
//! one per file. Each module is a test file under `tests/suite/`.

mod suite {
    mod web_fetch;
    mod web_search;
}
