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

/// The file `fake-mcp --violations <file>` reports broken messages to, read
/// for a test: dropped with lines the test never read, it fails the test
/// (each such message was answered with JSON-RPC's error, which the client
/// may have swallowed on the way to a green assertion).
#[derive(Debug)]
pub struct Violations {
    path: PathBuf,
    read: std::cell::Cell<usize>,
}

impl Violations {
    /// A report file in `dir` (which must exist), empty until `fake-mcp`
    /// writes to it.
    pub fn in_dir(dir: &std::path::Path) -> Self {
        Self {
            path: dir.join("fake-mcp-violations.txt"),
            read: std::cell::Cell::new(0),
        }
    }

    /// The arguments that make `fake-mcp` report here.
    pub fn args(&self) -> [String; 2] {
        ["--violations".into(), self.path.display().to_string()]
    }

    /// The broken messages reported so far, one sentence each; reading them
    /// marks them checked.
    pub fn violations(&self) -> Vec<String> {
        let lines = self.lines();
        self.read.set(lines.len());
        lines
    }

    fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Violations {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let lines = self.lines();
        let unread = &lines[self.read.get().min(lines.len())..];
        assert!(
            unread.is_empty(),
            "fake-mcp reported violations the test never read (call violations() \
             and assert on them): {unread:#?}"
        );
    }
}
