//! Where the `fake-mcp` binary (a scripted MCP server over stdio) is.

use std::path::PathBuf;
use std::sync::OnceLock;

/// The path of `fake-mcp` in this build's target directory. A test binary
/// lives in `<target>/<profile>/deps/`, the binaries one level up; when
/// `fake-mcp` has not been built yet (a test run of one crate builds only
/// that crate's binaries) it is built here, once per test process.
pub fn fake_mcp_bin() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap_or_default();
        let mut dir = exe.parent().map(PathBuf::from).unwrap_or_default();
        if dir.ends_with("deps") {
            dir.pop();
        }
        let bin = dir.join("fake-mcp");
        if !bin.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = std::process::Command::new(cargo);
            build.args(["build", "--quiet", "-p", "hearth-testkit", "--bin", "fake-mcp"]);
            // Benchmarks run from the release directory.
            if dir.ends_with("release") {
                build.arg("--release");
            }
            let status = build.status();
            assert!(
                matches!(status, Ok(s) if s.success()) && bin.exists(),
                "fake-mcp is not at {} and could not be built: run cargo build -p hearth-testkit --bin fake-mcp",
                bin.display()
            );
        }
        bin
    })
    .clone()
}
