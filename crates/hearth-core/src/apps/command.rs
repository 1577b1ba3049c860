//! The command text an action sends: its prefix and its arguments, on one
//! line; and the other way, which action a message's text triggers.

use serde_json::{Map, Value};

use super::{AppAction, AppManifest};

/// Longest argument value, in characters.
pub const MAX_ARG_VALUE: usize = 200;
/// Longest command sent, in characters (within Discord's 2000).
pub const MAX_COMMAND: usize = 1900;

/// The command `action` sends with `args` (the tool's input): its prefix,
/// then each declared argument that is given, in declared order, separated
/// by spaces. Refused, with a message for the model: an argument the
/// action does not declare, a required one missing, a value that is not
/// text on one line, or one that would mention everyone or someone.
pub fn render_command(action: &AppAction, args: &Map<String, Value>) -> Result<String, String> {
    if let Some(unknown) = args
        .keys()
        .find(|k| !action.args.iter().any(|a| &a.name == *k))
    {
        let known: Vec<&str> = action.args.iter().map(|a| a.name.as_str()).collect();
        return Err(format!(
            "{unknown:?} is not an argument of {}; it takes {known:?}",
            action.name
        ));
    }
    let mut command = action.trigger.prefix.clone();
    for arg in &action.args {
        let value = match args.get(&arg.name) {
            None | Some(Value::Null) if arg.required => {
                return Err(format!("{} needs the argument {:?}", action.name, arg.name));
            }
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => s.trim().to_owned(),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => v.to_string(),
            Some(_) => return Err(format!("{:?} must be text", arg.name)),
        };
        if value.chars().count() > MAX_ARG_VALUE || value.chars().any(char::is_control) {
            return Err(format!(
                "{:?} must be one line of at most {MAX_ARG_VALUE} characters",
                arg.name
            ));
        }
        if value.contains("@everyone") || value.contains("@here") || value.contains("<@") {
            return Err(format!("{:?} may not mention anyone", arg.name));
        }
        if value.is_empty() {
            continue;
        }
        command.push(' ');
        command.push_str(&value);
    }
    if command.chars().count() > MAX_COMMAND {
        return Err(format!(
            "the command would be longer than {MAX_COMMAND} characters"
        ));
    }
    Ok(command)
}

/// An action a message's text triggers, and the command as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerMatch<'a> {
    /// The action.
    pub action: &'a AppAction,
    /// The text, trimmed: the prefix and what followed it.
    pub command: String,
}

/// The action of `manifest` whose prefix `text` starts with (the whole
/// text is the prefix, or a space follows it; the longest prefix wins).
/// `None` when none does, or when the text is not one line a command may
/// be (multi-line text, over [`MAX_COMMAND`], or a mass mention): such
/// text goes to the model as any other.
pub fn match_trigger<'a>(manifest: &'a AppManifest, text: &str) -> Option<TriggerMatch<'a>> {
    let text = text.trim();
    if text.chars().any(char::is_control)
        || text.chars().count() > MAX_COMMAND
        || text.contains("@everyone")
        || text.contains("@here")
        || text.contains("<@")
    {
        return None;
    }
    manifest
        .actions
        .iter()
        .filter(|a| {
            text.strip_prefix(a.trigger.prefix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(char::is_whitespace))
        })
        .max_by_key(|a| a.trigger.prefix.len())
        .map(|action| TriggerMatch {
            action,
            command: text.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn manifest() -> AppManifest {
        AppManifest::from_value(&json!({
            "schema": 1,
            "app": {"name": "dj", "discord_bot_user_id": "42"},
            "version": "1.0.0",
            "actions": [
                {"name": "play", "description": "Plays a song", "trigger": {"prefix": "!play"},
                 "args": [{"name": "song", "required": true}, {"name": "volume"}],
                 "dispatch": "send_message"},
                {"name": "playlist", "description": "Lists", "trigger": {"prefix": "!playlist"},
                 "dispatch": "send_message"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn commands_are_the_prefix_and_the_declared_args_in_order() {
        let m = manifest();
        let play = m.action("play").unwrap();
        let args = json!({"volume": 5, "song": "  never gonna "});
        assert_eq!(
            render_command(play, args.as_object().unwrap()).unwrap(),
            "!play never gonna 5"
        );
        let missing = render_command(play, json!({"volume": 1}).as_object().unwrap());
        assert!(missing.unwrap_err().contains("\"song\""));
        let unknown = render_command(play, json!({"song": "a", "x": 1}).as_object().unwrap());
        assert!(unknown.unwrap_err().contains("\"x\""));
        for bad in ["two\nlines", "@everyone", "hi <@123>"] {
            assert!(render_command(play, json!({"song": bad}).as_object().unwrap()).is_err());
        }
    }

    #[test]
    fn triggers_match_a_whole_prefix_and_the_longest_wins() {
        let m = manifest();
        let hit = match_trigger(&m, "  !play some song ").unwrap();
        assert_eq!(
            (hit.action.name.as_str(), hit.command.as_str()),
            ("play", "!play some song")
        );
        assert_eq!(
            match_trigger(&m, "!playlist").unwrap().action.name,
            "playlist"
        );
        assert!(match_trigger(&m, "!playing now").is_none());
        assert!(match_trigger(&m, "please !play x").is_none());
        assert!(match_trigger(&m, "!play a\nb").is_none());
        assert!(match_trigger(&m, "!play @everyone").is_none());
    }
}
