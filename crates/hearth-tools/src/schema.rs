//! Argument validation against a tool's JSON Schema, before the tool runs.
//!
//! A deliberately small validator for the keywords tool schemas use (`type`,
//! `properties`, `required`, `additionalProperties`, `enum`, `items`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`); a
//! general JSON Schema engine would bring a regex engine and its size for
//! keywords tools do not need. Unknown keywords are ignored, as the spec says.

use serde_json::Value;

/// The first problem found, as a sentence naming the argument path.
pub fn validate(schema: &Value, value: &Value) -> Result<(), String> {
    check(schema, value, "arguments")
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(expected: &str, v: &Value) -> bool {
    match expected {
        "number" => v.is_number(),
        "integer" => type_name(v) == "integer" || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        other => type_name(v) == other,
    }
}

fn check(schema: &Value, v: &Value, path: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Ok(());
    };
    if let Some(t) = s.get("type") {
        let allowed: Vec<&str> = match t {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !allowed.is_empty() && !allowed.iter().any(|t| type_matches(t, v)) {
            return Err(format!(
                "{path} must be {}, not {}",
                allowed.join(" or "),
                type_name(v)
            ));
        }
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        let shown: Vec<String> = options.iter().map(Value::to_string).collect();
        return Err(format!("{path} must be one of {}", shown.join(", ")));
    }
    match v {
        Value::Object(map) => {
            let props = s.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(required)) = s.get("required") {
                for r in required.iter().filter_map(Value::as_str) {
                    if !map.contains_key(r) {
                        return Err(format!("{path}.{r} is required"));
                    }
                }
            }
            for (k, item) in map {
                match props.and_then(|p| p.get(k)) {
                    Some(sub) => check(sub, item, &format!("{path}.{k}"))?,
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            return Err(format!("{path}.{k} is not a known argument"));
                        }
                        Some(sub @ Value::Object(_)) => check(sub, item, &format!("{path}.{k}"))?,
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = s.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("{path} needs at least {min} items"));
            }
            if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("{path} takes at most {max} items"));
            }
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                return Err(format!("{path} must be at least {min} characters"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                return Err(format!("{path} must be at most {max} characters"));
            }
        }
        Value::Number(num) => {
            let x = num.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                return Err(format!("{path} must be at least {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                return Err(format!("{path} must be at most {max}"));
            }
        }
        Value::Null | Value::Bool(_) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;
    use serde_json::json;

    #[test]
    fn checks_the_keywords_tools_use() {
        let s = json!({
            "type": "object",
            "properties": {
                "url": { "type": "string", "minLength": 1 },
                "max_chars": { "type": "integer", "minimum": 1, "maximum": 10 },
                "mode": { "enum": ["a", "b"] },
                "tags": { "type": "array", "items": { "type": "string" }, "maxItems": 2 }
            },
            "required": ["url"],
            "additionalProperties": false
        });
        assert!(
            validate(
                &s,
                &json!({ "url": "x", "max_chars": 3, "mode": "a", "tags": ["t"] })
            )
            .is_ok()
        );
        let err = |v| validate(&s, &v).unwrap_err();
        assert_eq!(err(json!({})), "arguments.url is required");
        assert_eq!(
            err(json!({ "url": 5 })),
            "arguments.url must be string, not integer"
        );
        assert_eq!(
            err(json!({ "url": "" })),
            "arguments.url must be at least 1 characters"
        );
        assert_eq!(
            err(json!({ "url": "x", "max_chars": 11 })),
            "arguments.max_chars must be at most 10"
        );
        assert_eq!(
            err(json!({ "url": "x", "max_chars": 2.5 })),
            "arguments.max_chars must be integer, not number"
        );
        assert_eq!(
            err(json!({ "url": "x", "mode": "c" })),
            "arguments.mode must be one of \"a\", \"b\""
        );
        assert_eq!(
            err(json!({ "url": "x", "tags": [1] })),
            "arguments.tags[0] must be string, not integer"
        );
        assert_eq!(
            err(json!({ "url": "x", "tags": ["a", "b", "c"] })),
            "arguments.tags takes at most 2 items"
        );
        assert_eq!(
            err(json!({ "url": "x", "extra": 1 })),
            "arguments.extra is not a known argument"
        );
        assert!(validate(&json!({}), &json!({"anything": [1, {"x": null}]})).is_ok());
        assert!(validate(&json!({"type": ["string", "null"]}), &json!(null)).is_ok());
    }
}
