//! Decoding benchmarks (being written).
fn main() {}
