//! hearth-agent's integration tests, as one test binary: one link instead of
//! one per file. Each module is a test file under `tests/suite/`.

mod suite {
    mod capabilities;
    mod compaction;
    mod corpus;
    mod coverage;
    mod engine;
    mod firewall;
    mod modes;
    mod policy;
}
