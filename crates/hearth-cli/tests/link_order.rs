//! The start-up symbol order holds for any build of the release binary: the
//! profile does not strip (cargo would hash that setting into every symbol
//! name, and the order is traced on a build that keeps its symbols), and the
//! linker script made from the order ignores the parts of names that change
//! from one build to the next.

#[path = "../build/order_script.rs"]
mod order_script;

use order_script::{linker_script, pattern};

#[test]
fn the_release_profile_leaves_stripping_to_the_link() {
    let manifest = include_str!("../../../Cargo.toml");
    let release = manifest
        .split("[profile.release]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or_default();
    let strip: Vec<&str> = release
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("strip"))
        .collect();
    assert_eq!(
        strip,
        ["strip = \"none\""],
        "[profile.release] must keep symbols (build.rs strips at link time): a strip \
         setting in the profile changes every symbol name, and the traced start-up order \
         then matches nothing in the shipped binary"
    );
    let build = include_str!("../build.rs");
    assert!(
        build.contains("-Wl,--strip-all"),
        "build.rs strips the binary"
    );
}

#[test]
fn patterns_hide_hashes_and_lto_suffixes() {
    assert_eq!(
        pattern("_ZN6hearth5serve3run28_$u7b$$u7b$closure$u7d$$u7d$17h72d3017b27cded01E"),
        "_ZN6hearth5serve3run28_$u7b$$u7b$closure$u7d$$u7d$17h*E"
    );
    assert_eq!(
        pattern("_RNvNtNtNtCsgEmfK2I1SDS_4core9core_arch3x865xsave7__xgetbv.7426"),
        "_RNvNtNtNtCs*_4core9core_arch3x865xsave7__xgetbv*"
    );
    assert_eq!(
        pattern(
            "_RNvXs2_NtNtCsjrHSEGnQ3l9_3std4hash6randomNtB5_13DefaultHasherNtNtCsgEmfK2I1SDS_4core4hash6Hasher5write"
        ),
        "_RNvXs2_NtNtCs*_3std4hash6randomNtB*_13DefaultHasherNtNtCs*_4core4hash6Hasher5write"
    );
    // C functions keep their names; a clone's suffix is not a number alone.
    assert_eq!(pattern("sqlite3_malloc64"), "sqlite3_malloc64");
    assert_eq!(pattern("releasePageOne.isra.0"), "releasePageOne.isra*");
    assert_eq!(pattern("main"), "main");
}

#[test]
fn the_script_lists_every_traced_function_before_text() {
    let order = include_str!("../startup-order.txt");
    let script = linker_script(order);
    assert!(script.starts_with("SECTIONS {\n  .text.hearth_startup : {"));
    assert!(script.ends_with("INSERT BEFORE .text;\n"));
    for name in order.lines().filter(|n| !n.is_empty()) {
        let p = format!("      .text.{}\n", pattern(name));
        assert!(script.contains(&p), "{name} is in the script as {p}");
    }
    assert!(
        !script.contains("17h0") && !script.contains("17ha"),
        "no hash left"
    );
}
