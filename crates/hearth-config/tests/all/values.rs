//! Property tests: any TOML value under any key the loader knows is either
//! loaded or refused with an error that names where it came from; the
//! loader never panics on what a user may write.

use hearth_config::{Config, load_str};
use proptest::prelude::*;
use toml::{Table, Value};

/// Every key path of the default configuration, e.g. `["server", "bind"]`.
fn known_keys() -> Vec<Vec<String>> {
    fn walk(prefix: &[String], table: &Table, out: &mut Vec<Vec<String>>) {
        for (k, v) in table {
            let mut path = prefix.to_vec();
            path.push(k.clone());
            if let Value::Table(t) = v {
                out.push(path.clone());
                walk(&path, t, out);
            } else {
                out.push(path);
            }
        }
    }
    let defaults = Table::try_from(Config::default()).unwrap();
    let mut out = Vec::new();
    walk(&[], &defaults, &mut out);
    out
}

/// Any TOML value, nested a few levels.
fn toml_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<String>().prop_map(Value::String),
        "[a-z_/:.0-9-]{0,12}".prop_map(Value::String),
        any::<i64>().prop_map(Value::Integer),
        prop_oneof![Just(0i64), Just(-1), Just(1), Just(u32::MAX as i64)].prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

/// A document with `value` at `path` (tables created on the way).
fn document(path: &[String], value: Value) -> String {
    let mut root = Table::new();
    let mut table = &mut root;
    let (last, parents) = path.split_last().unwrap();
    for p in parents {
        table = match table
            .entry(p.clone())
            .or_insert_with(|| Value::Table(Table::new()))
        {
            Value::Table(t) => t,
            _ => unreachable!("only tables are inserted on the way"),
        };
    }
    table.insert(last.clone(), value);
    root.to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any value under any known key: loaded, or an error naming the file.
    #[test]
    fn any_value_under_a_known_key_loads_or_is_refused(
        key in prop::sample::select(known_keys()),
        value in toml_value(),
    ) {
        let text = document(&key, value);
        if let Err(e) = load_str(&text, "/h/hearth.toml", Vec::new()) {
            let msg = e.to_string();
            prop_assert!(!msg.is_empty());
            prop_assert!(msg.contains("/h/hearth.toml"), "{msg}");
        }
    }

    /// Any value in a `HEARTH_<SECTION>__<KEY>` variable: loaded, or an error.
    #[test]
    fn any_environment_value_loads_or_is_refused(
        key in prop::sample::select(known_keys().into_iter().filter(|k| k.len() == 2).collect::<Vec<_>>()),
        value in any::<String>(),
    ) {
        let var = format!("HEARTH_{}__{}", key[0].to_uppercase(), key[1].to_uppercase());
        if let Err(e) = load_str("", "/h/hearth.toml", vec![(var, value)]) {
            prop_assert!(!e.to_string().is_empty());
        }
    }

    /// Any text at all as the file: loaded or refused, never a panic.
    #[test]
    fn any_text_loads_or_is_refused(text in any::<String>()) {
        let _ = load_str(&text, "/h/hearth.toml", Vec::new());
    }
}

/// A zero connection limit or header timeout would stop the server from
/// serving anyone; the loader refuses them, naming the key.
#[test]
fn zero_server_limits_are_refused_naming_the_key() {
    for key in ["header_read_timeout_ms", "max_connections"] {
        let err = load_str(
            &format!("[server]\n{key} = 0\n"),
            "/h/hearth.toml",
            Vec::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(&format!("server.{key}")), "{err}");
    }
    let c = load_str("", "/h/hearth.toml", Vec::new()).unwrap();
    assert_eq!(c.server.header_read_timeout_ms, 10_000);
    assert_eq!(c.server.max_connections, 1024);
}
