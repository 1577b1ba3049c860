//! Release builds of `hearth` on x86_64 Linux link the functions that start-up
//! and an idle server run next to each other (`startup-order.txt`, made by
//! `crates/hearth-bench/startup-order.sh`). The kernel maps a binary's code in
//! 64 KiB runs around each page it touches, so with start-up code scattered
//! over the whole text, most of the binary became resident at start. Names the
//! file lists but the build lacks (after code changes) are skipped by the
//! linker; the layout then only drifts back towards the default.
//!
//! rustc links x86_64-unknown-linux-gnu with its bundled LLD, which reads the
//! file. Set `HEARTH_SYMBOL_ORDER=off` when linking with another linker.

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=startup-order.txt");
    println!("cargo:rerun-if-env-changed=HEARTH_SYMBOL_ORDER");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = env::var("TARGET").unwrap_or_default();
    let off = env::var("HEARTH_SYMBOL_ORDER").is_ok_and(|v| v == "off");
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = Path::new(&dir).join("startup-order.txt");
    if release && target == "x86_64-unknown-linux-gnu" && !off && order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=hearth=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=hearth=-Wl,--no-warn-symbol-ordering");
    }
}
