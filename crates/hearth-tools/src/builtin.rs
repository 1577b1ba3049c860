//! Built-in tools.

use hearth_core::ToolSpec;
use serde_json::{Value, json};

use crate::{Tool, ToolClass, ToolContext, ToolError};

/// `current_time`: the current date and time in an IANA time zone.
pub struct CurrentTime {
    spec: ToolSpec,
}

impl CurrentTime {
    /// The tool.
    pub fn new() -> Self {
        Self {
            spec: ToolSpec {
                name: "current_time".into(),
                description: "The current date and time. Give an IANA time zone such as \
                              \"Europe/Paris\" or \"Asia/Tokyo\"; UTC when omitted."
                    .into(),
                parameters: json!({
                    "type": "object",
                    "properties": {
                        "timezone": {
                            "type": "string",
                            "description": "IANA time zone name, e.g. America/New_York"
                        }
                    },
                    "additionalProperties": false
                }),
            },
        }
    }
}

impl Default for CurrentTime {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait::async_trait]
impl Tool for CurrentTime {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn class(&self) -> ToolClass {
        ToolClass::Read
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<Value, ToolError> {
        let tz_name = match args.get("timezone") {
            None | Some(Value::Null) => "UTC",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(ToolError("timezone must be a string".into())),
        };
        if let Some(obj) = args.as_object()
            && let Some(k) = obj.keys().find(|k| k.as_str() != "timezone")
        {
            return Err(ToolError(format!("unknown argument {k:?}")));
        }
        let tz = jiff::tz::TimeZone::get(tz_name).map_err(|_| {
            ToolError(format!(
                "unknown time zone {tz_name:?}; use an IANA name such as Europe/Paris"
            ))
        })?;
        let now = jiff::Timestamp::now().to_zoned(tz);
        Ok(json!({
            "timezone": tz_name,
            "datetime": now.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string(),
            "weekday": now.strftime("%A").to_string(),
            "unix": now.timestamp().as_second(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn gives_time_in_zone() {
        let v = CurrentTime::new()
            .call(&ToolContext::default(), json!({"timezone": "Asia/Tokyo"}))
            .await
            .unwrap();
        assert!(v["datetime"].as_str().unwrap().ends_with("+09:00"), "{v}");
        let utc = CurrentTime::new()
            .call(&ToolContext::default(), json!({}))
            .await
            .unwrap();
        assert!(
            utc["datetime"].as_str().unwrap().ends_with("+00:00"),
            "{utc}"
        );
    }

    #[tokio::test]
    async fn rejects_unknown_zone_and_arguments() {
        let e = CurrentTime::new()
            .call(&ToolContext::default(), json!({"timezone": "Mars/Olympus"}))
            .await
            .unwrap_err();
        assert!(e.0.contains("unknown time zone"));
        let e = CurrentTime::new()
            .call(&ToolContext::default(), json!({"tz": "UTC"}))
            .await
            .unwrap_err();
        assert!(e.0.contains("unknown argument"));
    }
}
