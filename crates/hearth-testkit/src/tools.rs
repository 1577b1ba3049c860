//! The outside tools some end-to-end tests need (Node 22, the MCP npm
//! packages, Python packages), and the one definition of "in CI".
//!
//! Such a test is `#[ignore]`d with the reason, so a plain `cargo test`
//! reports it as ignored rather than passing it unrun; `.ci/test` installs
//! the tools and runs those tests explicitly (`-- --ignored
//! external_tools::`). Run that way, a missing tool fails the test with
//! what to install: nothing passes without running.

use std::path::PathBuf;

/// Whether this is a CI run: `CI` is `true` or `1` (`.ci/run` exports
/// `CI=true`, as CI itself does).
pub fn in_ci() -> bool {
    matches!(std::env::var("CI").as_deref(), Ok("true" | "1"))
}

/// Fails the test because `what` is missing, saying how to get it.
///
/// # Panics
/// Always: that is its purpose.
pub fn missing(what: &str) -> ! {
    if in_ci() {
        panic!("CI=true but {what}: .ci/test installs it, so its install step did not")
    }
    panic!(
        "{what}: run .ci/test once (it installs the end-to-end tests' tools under ~/.cache \
         and sets the variables), or install it yourself and set the variable"
    )
}

/// `~/.cache`, where `.ci/test` installs the tools (`/tmp/.cache` without a `HOME`).
fn cache_dir() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
        .join(".cache")
}

/// The file or directory at the path in `var`, or else at `under_cache`
/// inside `~/.cache` where `.ci/test` puts it.
///
/// # Panics
/// When it is at neither: see [`missing`].
pub fn installed(what: &str, var: &str, under_cache: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| cache_dir().join(under_cache));
    if path.exists() {
        return path;
    }
    missing(&format!("{what} is not at {} (set {var})", path.display()))
}

/// The Python interpreter the tests run: `HEARTH_PYTHON`, else the venv
/// `.ci/test` makes in `~/.cache/hearth-python` (so a plain `cargo test`
/// after one `.ci/test` finds its packages), else `python3`.
pub fn python() -> String {
    if let Ok(p) = std::env::var("HEARTH_PYTHON")
        && !p.is_empty()
    {
        return p;
    }
    let venv = cache_dir().join("hearth-python/bin/python");
    if venv.exists() {
        return venv.to_string_lossy().into_owned();
    }
    "python3".into()
}

/// Checks that the Python package `package` is installed at `version`.
///
/// # Panics
/// When it is not (or there is no Python): see [`missing`].
pub fn python_package(package: &str, version: &str) {
    let check = format!(
        "import sys, importlib.metadata as m; sys.exit(m.version({package:?}) != {version:?})"
    );
    let ok = std::process::Command::new(python())
        .args(["-c", &check])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        missing(&format!(
            "the Python package {package}=={version} is not installed for {} \
             (.ci/test installs it in ~/.cache/hearth-python)",
            python()
        ));
    }
}
