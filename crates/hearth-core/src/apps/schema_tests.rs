//! The committed JSON Schema and the parser agree: documents the schema
//! accepts parse, documents it refuses do not. The schema is read with a
//! small evaluator of the keywords it uses (no schema crate in the tree).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::AppManifest;

const SCHEMA: &str = include_str!("../../../../shared/app-manifest.v1.schema.json");

/// Whether `v` satisfies `schema` (the keywords the manifest schema uses).
fn valid(schema: &Value, v: &Value) -> bool {
    let s = schema.as_object().expect("a schema is an object");
    if let Some(c) = s.get("const")
        && c != v
    {
        return false;
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return false;
    }
    let type_ok = match s.get("type").and_then(Value::as_str) {
        None => true,
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some(other) => panic!("type {other} not evaluated here"),
    };
    if !type_ok {
        return false;
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && !any.iter().any(|sub| valid(sub, v))
    {
        return false;
    }
    match v {
        Value::Object(o) => {
            let props = s.get("properties").and_then(Value::as_object);
            if let Some(req) = s.get("required").and_then(Value::as_array)
                && !req.iter().all(|k| o.contains_key(k.as_str().unwrap_or("")))
            {
                return false;
            }
            o.iter().all(|(k, val)| match props.and_then(|p| p.get(k)) {
                Some(sub) => valid(sub, val),
                None => s.get("additionalProperties") != Some(&Value::Bool(false)),
            })
        }
        Value::Array(items) => {
            let len = items.len() as u64;
            let min = s.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let max = s
                .get("maxItems")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            (min..=max).contains(&len)
                && s.get("items")
                    .is_none_or(|sub| items.iter().all(|i| valid(sub, i)))
        }
        Value::String(text) => {
            let n = text.chars().count() as u64;
            let min = s.get("minLength").and_then(Value::as_u64).unwrap_or(0);
            let max = s
                .get("maxLength")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX);
            let pattern_ok = s.get("pattern").and_then(Value::as_str).is_none_or(|p| {
                regex::Regex::new(p)
                    .expect("the schema's patterns compile")
                    .is_match(text)
            });
            (min..=max).contains(&n) && pattern_ok
        }
        _ => true,
    }
}

fn base() -> Value {
    json!({
        "schema": 1,
        "app": {"name": "dj-bot", "discord_application_id": "1100", "discord_bot_user_id": "1101",
                "homepage": "https://dj.example/docs"},
        "version": "1.2.0",
        "actions": [
            {"name": "play", "description": "Plays a song in your voice channel",
             "trigger": {"prefix": "!play"},
             "args": [{"name": "song", "description": "What to play", "required": true}],
             "dispatch": "send_message", "permissions": [], "reply": "read"},
            {"name": "ban", "description": "Bans a member", "trigger": {"prefix": "!ban"},
             "args": [{"name": "user"}], "dispatch": "send_message",
             "permissions": ["BAN_MEMBERS"]}
        ]
    })
}

/// `base` with the value at `path` (a JSON pointer) replaced, or removed
/// for `None`.
fn with(path: &str, value: Option<Value>) -> Value {
    let mut doc = base();
    let (parent, key) = path.rsplit_once('/').unwrap();
    let target = doc.pointer_mut(parent).unwrap();
    match (target, value) {
        (Value::Object(o), Some(v)) => {
            o.insert(key.to_owned(), v);
        }
        (Value::Object(o), None) => {
            o.remove(key);
        }
        (Value::Array(a), Some(v)) => a[key.parse::<usize>().unwrap()] = v,
        (Value::Array(a), None) => {
            a.remove(key.parse::<usize>().unwrap());
        }
        _ => unreachable!(),
    }
    doc
}

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("the committed schema is JSON")
}

/// Documents both must refuse, with the field the parser must name.
fn refused() -> Vec<(Value, &'static str)> {
    vec![
        (with("/schema", Some(json!(2))), "schema"),
        (with("/extra", Some(json!(1))), "extra"),
        (with("/app/name", Some(json!("DJ"))), "app.name"),
        (with("/app/name", Some(json!("dj_bot"))), "app.name"),
        (with("/app/name", Some(json!("a".repeat(25)))), "app.name"),
        (with("/app/nick", Some(json!("x"))), "nick"),
        (
            with("/app/discord_bot_user_id", Some(json!("12a"))),
            "app.discord_bot_user_id",
        ),
        (
            with("/app/homepage", Some(json!("http://dj.example"))),
            "app.homepage",
        ),
        (with("/version", Some(json!(" 1"))), "version"),
        (with("/version", None), "version"),
        (with("/actions", Some(json!([]))), "actions"),
        (
            with("/actions/0/name", Some(json!("play_now"))),
            "actions[0].name",
        ),
        (
            with("/actions/0/trigger/prefix", Some(json!(""))),
            "actions[0].trigger.prefix",
        ),
        (
            with("/actions/0/trigger/prefix", Some(json!("!p lay"))),
            "actions[0].trigger.prefix",
        ),
        (
            with("/actions/0/trigger/prefix", Some(json!("@dj"))),
            "actions[0].trigger.prefix",
        ),
        (
            with("/actions/1/dispatch", Some(json!("kick"))),
            "actions[1].dispatch",
        ),
        (
            with("/actions/1/reply", Some(json!("write"))),
            "actions[1].reply",
        ),
        (
            with("/actions/1/permissions/0", Some(json!("ban"))),
            "actions[1].permissions[0]",
        ),
        (
            with("/actions/0/description", Some(json!(""))),
            "actions[0].description",
        ),
        (
            with("/actions/0/description", Some(json!("x".repeat(501)))),
            "actions[0].description",
        ),
        (
            with("/actions/0/args/0/name", Some(json!("Song"))),
            "actions[0].args[0].name",
        ),
        (with("/actions/0/args/0/color", Some(json!(1))), "color"),
        (
            with("/actions/0/trigger/suffix", Some(json!("x"))),
            "suffix",
        ),
    ]
}

#[test]
fn the_schema_and_the_parser_accept_the_same_documents() {
    let schema = schema();
    let mut minimal = base();
    minimal["app"] = json!({"name": "x", "discord_bot_user_id": "1"});
    minimal["actions"] = json!([{"name": "a", "description": "d", "trigger": {"prefix": "?"},
                                 "dispatch": "none"}]);
    for good in [base(), minimal] {
        assert!(valid(&schema, &good), "the schema refuses {good}");
        AppManifest::from_value(&good).unwrap();
    }
    for (bad, field) in refused() {
        assert!(!valid(&schema, &bad), "the schema accepts {bad}");
        let e = AppManifest::from_value(&bad).unwrap_err();
        assert!(
            e.to_string().contains(field),
            "the parser's error {e:?} does not name {field}"
        );
    }
}

#[test]
fn without_either_bot_id_both_refuse() {
    let mut doc = base();
    doc["app"] = json!({"name": "x"});
    assert!(!valid(&schema(), &doc));
    assert_eq!(AppManifest::from_value(&doc).unwrap_err().path, "app");
}

#[test]
fn counts_are_capped_as_the_schema_says() {
    let action = base()["actions"][1].clone();
    let mut doc = base();
    let many: Vec<Value> = (0..33)
        .map(|i| {
            let mut a = action.clone();
            a["name"] = json!(format!("a{i}"));
            a["trigger"]["prefix"] = json!(format!("!a{i}"));
            a
        })
        .collect();
    doc["actions"] = json!(many);
    assert!(!valid(&schema(), &doc));
    assert_eq!(AppManifest::from_value(&doc).unwrap_err().path, "actions");
    let big = format!("{{\"schema\":1,\"pad\":\"{}\"}}", "x".repeat(70_000));
    assert_eq!(AppManifest::parse(big.as_bytes()).unwrap_err().path, ".");
}

proptest! {
    /// Any prefix: the schema and the parser agree on it.
    #[test]
    fn prefixes_agree(prefix in "\\PC{0,40}|[ !@a-z\t]{0,5}") {
        let doc = with("/actions/0/trigger/prefix", Some(json!(prefix)));
        prop_assert_eq!(valid(&schema(), &doc), AppManifest::from_value(&doc).is_ok());
    }

    /// Any app or action name: they agree.
    #[test]
    fn names_agree(name in "[a-zA-Z0-9_-]{0,30}") {
        let doc = with("/app/name", Some(json!(name.clone())));
        prop_assert_eq!(valid(&schema(), &doc), AppManifest::from_value(&doc).is_ok());
        let doc = with("/actions/1/name", Some(json!(name)));
        prop_assert_eq!(valid(&schema(), &doc), AppManifest::from_value(&doc).is_ok());
    }
}
