//! Sealed credentials at rest (being built).
