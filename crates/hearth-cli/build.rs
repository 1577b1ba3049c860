//! Link settings of release builds of `hearth` on x86_64 Linux, for a small
//! idle memory footprint (BENCHMARKS.md, issue 17):
//!
//! - **Start-up code linked together.** The kernel maps a binary's code in
//!   64 KiB runs around each page it touches, so with start-up code scattered
//!   over the whole text most of the binary became resident at start.
//!   `startup-order.txt` (made by `crates/hearth-bench/startup-order.sh`)
//!   lists the functions start-up, an idle server and a few runs execute, and
//!   LLD places them first, in that order (`--symbol-ordering-file`).
//! - **The same order by pattern.** Mangled Rust names end in a hash of the
//!   crate's build settings (dependency versions, features, profile): a build
//!   whose hashes differ from the traced one matches no exact name. A linker
//!   script made from the same list, with the hashes as wildcards, still puts
//!   those functions (and the other instances of the generic ones) in one
//!   output section ahead of `.text`; where the exact names match, the order
//!   above applies inside it.
//! - **Stripped here, not by the profile.** Cargo hashes the profile's `strip`
//!   into every crate's symbol names, so a symbol order traced on an
//!   unstripped build never matched the stripped one that `cargo build
//!   --release` makes. The profile keeps symbols and this script strips the
//!   binary at link time; `HEARTH_KEEP_SYMBOLS=1` keeps them (profiling,
//!   tracing the order) with the very same names and layout.
//! - **Packed relative relocations** (`-z pack-relative-relocs`, DT_RELR):
//!   the 540 kB relocation table a position-independent binary needs, read
//!   whole at every start, becomes about 10 kB. It needs glibc 2.36 or newer,
//!   so it is used when the build machine's glibc has it (a native build runs
//!   where it is built); `HEARTH_RELR=off` leaves it out.
//!
//! rustc links x86_64-unknown-linux-gnu with its bundled LLD, which reads all
//! of this. Set `HEARTH_SYMBOL_ORDER=off` when linking with another linker.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

// Shared with tests/link_order.rs.
#[path = "build/order_script.rs"]
mod order_script;
use order_script::linker_script;

fn main() {
    println!("cargo:rerun-if-changed=startup-order.txt");
    println!("cargo:rerun-if-env-changed=HEARTH_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=HEARTH_KEEP_SYMBOLS");
    println!("cargo:rerun-if-env-changed=HEARTH_RELR");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = env::var("TARGET").unwrap_or_default();
    if !release || target != "x86_64-unknown-linux-gnu" {
        return;
    }
    let off = |var: &str| env::var(var).is_ok_and(|v| v == "off");
    let keep = env::var("HEARTH_KEEP_SYMBOLS").is_ok_and(|v| !v.is_empty() && v != "0");
    if !keep {
        link_arg("-Wl,--strip-all");
    }
    if !off("HEARTH_RELR") && env::var("HOST").is_ok_and(|h| h == target) && glibc_has_relr() {
        link_arg("-Wl,-z,pack-relative-relocs");
    }
    let (Ok(dir), Ok(out)) = (env::var("CARGO_MANIFEST_DIR"), env::var("OUT_DIR")) else {
        return;
    };
    let order = Path::new(&dir).join("startup-order.txt");
    if off("HEARTH_SYMBOL_ORDER") || !order.is_file() {
        return;
    }
    link_arg(&format!("-Wl,--symbol-ordering-file={}", order.display()));
    link_arg("-Wl,--no-warn-symbol-ordering");
    let Ok(names) = std::fs::read_to_string(&order) else {
        return;
    };
    let script = PathBuf::from(out).join("startup-order.ld");
    if std::fs::write(&script, linker_script(&names)).is_ok() {
        link_arg(&format!("-Wl,-T,{}", script.display()));
    }
}

fn link_arg(arg: &str) {
    println!("cargo:rustc-link-arg-bin=hearth={arg}");
}

/// True when the build machine's glibc (`getconf GNU_LIBC_VERSION`, e.g.
/// `glibc 2.36`) loads DT_RELR relocations: 2.36 and later.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(version) = text.trim().strip_prefix("glibc ") else {
        return false;
    };
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
