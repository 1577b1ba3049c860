//! The schemas of the strings the API takes in many places (keys, scopes,
//! capabilities, times), each stating exactly what the server accepts, so
//! a client generated from `/openapi.json` is neither refused for a value
//! the document allows nor let through with one it forbids.
//!
//! The patterns use only `\uXXXX` escapes and character classes, which
//! ECMA-262, Python's `re` and Rust's `regex` read alike; a test checks
//! each against the server's own validation.

use std::borrow::Cow;

use hearth_runtime::policy::{CAPABILITIES, PRESET_PREFIX, Preset};
use utoipa::openapi::RefOr;
use utoipa::openapi::extensions::Extensions;
use utoipa::openapi::schema::{
    AnyOfBuilder, KnownFormat, ObjectBuilder, Schema, SchemaFormat, Type,
};
use utoipa::{PartialSchema, ToSchema};

/// Longest key, subject or scope, in characters.
pub const MAX_KEY_CHARS: usize = 256;

/// A key: at least one character, none of them a control character
/// (Unicode `Cc`: U+0000 to U+001F and U+007F to U+009F), as
/// `hearth_runtime::check_key` requires.
pub const KEY_PATTERN: &str = r"^[^\u0000-\u001F\u007F-\u009F]+$";

/// Somewhere a character that is not white space (Rust's
/// `char::is_whitespace`, which `str::trim` uses): text that is not blank.
pub const NOT_BLANK_PATTERN: &str =
    r"[^\u0009-\u000D\u0020\u0085\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]";

/// `global`, or `<channel>:<kind>:<id>`: channel and kind in lowercase
/// ASCII letters, digits, `_` or `-`, the id without white space or control
/// characters (`hearth_agent::policy::validate_scope`).
pub const SCOPE_PATTERN: &str = r"^(global|[a-z0-9_-]+:[a-z0-9_-]+:[^\u0000-\u0020\u007F-\u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000]+)$";

/// `user:<user_key>` or `role:<id>`, no control characters
/// (`hearth_agent::policy::parse_subject`).
pub const SUBJECT_PATTERN: &str = r"^(user|role):[^\u0000-\u001F\u007F-\u009F]+$";

/// Role ids separated by commas, or nothing.
pub const ROLES_PATTERN: &str =
    r"^([^,\u0000-\u001F\u007F-\u009F]+(,[^,\u0000-\u001F\u007F-\u009F]+)*)?$";

/// `mcp.<server>`: the capability of a configured MCP server.
pub const MCP_CAPABILITY_PATTERN: &str = r"^mcp\.[A-Za-z0-9_-]+$";

/// `today`, or an age of 1 to 11 digits and a unit (`d`, `h`, `m`).
pub const AGE_PATTERN: &str = r"^(today|[0-9]{1,11}[dhm])$";

/// An `Idempotency-Key` header: 1 to 256 visible ASCII characters or
/// spaces, not starting or ending with a space (HTTP trims those).
pub const IDEMPOTENCY_HEADER_PATTERN: &str =
    r"^[\u0021-\u007E]([\u0020-\u007E]{0,254}[\u0021-\u007E])?$";

/// The `source` no message may claim: it marks direct tool calls.
const RESERVED_SOURCE: &str = "direct";

fn string() -> ObjectBuilder {
    ObjectBuilder::new().schema_type(Type::String)
}

fn key_object(description: &str) -> ObjectBuilder {
    string()
        .min_length(Some(1))
        .max_length(Some(MAX_KEY_CHARS))
        .pattern(Some(KEY_PATTERN))
        .description(Some(description))
}

/// A thread key, user key, source or idempotency key.
pub struct Key;

impl PartialSchema for Key {
    fn schema() -> RefOr<Schema> {
        key_object(
            "A key (thread, user, source, idempotency): 1 to 256 characters, none of them a \
             control character (U+0000 to U+001F, U+007F to U+009F).",
        )
        .into()
    }
}

impl ToSchema for Key {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Key")
    }
}

/// A message's `source`: a key other than `direct`.
pub struct Source;

impl PartialSchema for Source {
    fn schema() -> RefOr<Schema> {
        // utoipa has no `not`; an extension entry is written as it is named.
        let not_reserved: Extensions = [("not", serde_json::json!({ "const": RESERVED_SOURCE }))]
            .into_iter()
            .collect();
        key_object(
            "Where a message comes from: a key (1 to 256 characters, no control character) \
             other than `direct`, which marks direct tool calls.",
        )
        .extensions(Some(not_reserved))
        .into()
    }
}

impl ToSchema for Source {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Source")
    }
}

/// A permission scope.
pub struct Scope;

impl PartialSchema for Scope {
    fn schema() -> RefOr<Schema> {
        string()
            .max_length(Some(MAX_KEY_CHARS))
            .pattern(Some(SCOPE_PATTERN))
            .description(Some(
                "`global`, or a channel's space `<channel>:<kind>:<id>` (`discord:guild:<id>`, \
                 ...): channel and kind in lowercase letters, digits, `_` or `-`, the id without \
                 white space or control characters; at most 256 characters.",
            ))
            .into()
    }
}

impl ToSchema for Scope {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Scope")
    }
}

/// A community's scope, the only scopes that hold community keys
/// (`hearth_runtime::community::check_scope`): a Discord guild, a Slack
/// workspace or a Telegram group (whose ids are negative).
pub const COMMUNITY_SCOPE_PATTERN: &str =
    r"^(discord:guild:[0-9]+|slack:team:[A-Za-z0-9]+|telegram:chat:-[0-9]+)$";

/// A community's scope, in the community keys' paths.
pub struct CommunityScope;

impl PartialSchema for CommunityScope {
    fn schema() -> RefOr<Schema> {
        string()
            .pattern(Some(COMMUNITY_SCOPE_PATTERN))
            .description(Some(
                "`discord:guild:<id>` (digits), `slack:team:<id>` (letters and digits) or \
                 `telegram:chat:-<id>` (a group's negative id).",
            ))
            .into()
    }
}

impl ToSchema for CommunityScope {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("CommunityScope")
    }
}

/// An app's name or version in a path (`hearth_runtime::apps::check_label`).
pub const APP_LABEL_PATTERN: &str = r"^[A-Za-z0-9._+-]{1,64}$";

/// An app's name or version, in the apps' paths.
pub struct AppLabel;

impl PartialSchema for AppLabel {
    fn schema() -> RefOr<Schema> {
        string()
            .pattern(Some(APP_LABEL_PATTERN))
            .description(Some(
                "1 to 64 ASCII letters, digits, `-`, `_`, `.` or `+` (an app's name or version).",
            ))
            .into()
    }
}

impl ToSchema for AppLabel {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("AppLabel")
    }
}

/// A Discord server (guild) id (`hearth_runtime::apps::check_guild_id`).
pub const GUILD_ID_PATTERN: &str = r"^[0-9]{1,20}$";

/// A Discord server (guild) id, in the apps' paths.
pub struct GuildId;

impl PartialSchema for GuildId {
    fn schema() -> RefOr<Schema> {
        string()
            .pattern(Some(GUILD_ID_PATTERN))
            .description(Some("A Discord server (guild) id: 1 to 20 digits."))
            .into()
    }
}

impl ToSchema for GuildId {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("GuildId")
    }
}

/// A grant's subject.
pub struct Subject;

impl PartialSchema for Subject {
    fn schema() -> RefOr<Schema> {
        string()
            .max_length(Some(MAX_KEY_CHARS))
            .pattern(Some(SUBJECT_PATTERN))
            .description(Some(
                "`user:<user_key>` or `role:<id>`, at most 256 characters, no control character.",
            ))
            .into()
    }
}

impl ToSchema for Subject {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Subject")
    }
}

fn capability_schema(presets: bool, description: &str) -> RefOr<Schema> {
    let mut names: Vec<String> = CAPABILITIES.iter().map(|c| (*c).to_owned()).collect();
    if presets {
        names.extend(
            Preset::ALL
                .iter()
                .map(|p| format!("{PRESET_PREFIX}{}", p.as_str())),
        );
    }
    AnyOfBuilder::new()
        .item(string().enum_values(Some(names)))
        .item(string().pattern(Some(MCP_CAPABILITY_PATTERN)))
        .description(Some(description))
        .into()
}

/// A name that can be granted: a capability, `preset:<name>`, or a
/// configured MCP server's `mcp.<server>`.
pub struct Grantable;

impl PartialSchema for Grantable {
    fn schema() -> RefOr<Schema> {
        capability_schema(
            true,
            "A capability, `preset:<name>`, or `mcp.<server>` of a configured MCP server \
             (another `mcp.<server>` is 400 `unknown_capability`).",
        )
    }
}

impl ToSchema for Grantable {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Grantable")
    }
}

/// A capability a user can hold (not a preset).
pub struct Capability;

impl PartialSchema for Capability {
    fn schema() -> RefOr<Schema> {
        capability_schema(
            false,
            "A capability, or `mcp.<server>` of a configured MCP server (another \
             `mcp.<server>` is 400 `unknown_capability`).",
        )
    }
}

impl ToSchema for Capability {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("Capability")
    }
}

/// A time of `GET /v1/usage`.
pub struct UsageTime;

impl PartialSchema for UsageTime {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(string().pattern(Some(AGE_PATTERN)))
            .item(string().format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))))
            .description(Some(
                "An RFC 3339 date-time, `today` (UTC midnight), or an age: 1 to 11 digits and \
                 `d`, `h` or `m` (`7d`, `24h`, `30m`).",
            ))
            .into()
    }
}

impl ToSchema for UsageTime {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("UsageTime")
    }
}

/// A JSON number that is a whole number in `0..=u64::MAX`, written with or
/// without a fraction (`5` or `5.0`: JSON Schema's `integer` takes both).
pub fn whole_u64<'de, D>(de: D) -> Result<Option<u64>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    use serde::Deserialize;
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(de)? else {
        return Ok(None);
    };
    if let Some(n) = n.as_u64() {
        return Ok(Some(n));
    }
    // u64::MAX as f64 rounds up to 2^64, which is out of range.
    const LIMIT: f64 = 18_446_744_073_709_551_616.0;
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && (0.0..LIMIT).contains(&f) => {
            // Exact: a whole number checked to be in 0..2^64.
            Ok(Some(f as u64))
        }
        _ => Err(D::Error::custom(format!(
            "invalid value: {n}, expected a whole number from 0"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use regex::Regex;

    use super::*;
    use crate::routes::permissions::roles_of;
    use crate::routes::usage::parse_time;

    fn re(pattern: &str) -> Regex {
        Regex::new(pattern).unwrap()
    }

    /// Text near the rules' edges: ASCII words, separators, control
    /// characters, Unicode white space, multibyte letters, and anything.
    fn edgy() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-z0-9_-]{1,6}",
            Just(":".to_owned()),
            Just(",".to_owned()),
            Just(" ".to_owned()),
            prop::sample::select(vec![
                "\t", "\n", "\u{7f}", "\u{85}", "\u{9f}", "\u{a0}", "\u{2028}", "\u{3000}",
                "\u{feff}", "é", "日", "😀", "A", "global", "user:", "role:", "mcp.",
            ])
            .prop_map(str::to_owned),
            any::<char>().prop_map(String::from),
        ];
        prop_oneof![
            prop::collection::vec(piece, 0..8).prop_map(|p| p.concat()),
            any::<String>(),
            (1usize..300).prop_map(|n| "é".repeat(n)),
        ]
    }

    fn within(s: &str) -> bool {
        s.chars().count() <= MAX_KEY_CHARS
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// `Key`: the pattern and length bounds are `check_key`'s rule.
        #[test]
        fn the_key_schema_is_check_key(s in edgy()) {
            let schema = re(KEY_PATTERN).is_match(&s) && within(&s);
            prop_assert_eq!(schema, hearth_runtime::check_key("k", &s).is_ok(), "{:?}", s);
        }

        /// `Scope`: the pattern and length bound are `validate_scope`'s rule.
        #[test]
        fn the_scope_schema_is_validate_scope(s in edgy()) {
            let schema = re(SCOPE_PATTERN).is_match(&s) && within(&s);
            let server = hearth_agent::policy::validate_scope(&s).is_ok();
            prop_assert_eq!(schema, server, "{:?}", s);
        }

        /// `Subject`: the pattern and length bound are `parse_subject`'s rule.
        #[test]
        fn the_subject_schema_is_parse_subject(s in edgy()) {
            let schema = re(SUBJECT_PATTERN).is_match(&s) && within(&s);
            let server = hearth_agent::policy::parse_subject(&s).is_ok();
            prop_assert_eq!(schema, server, "{:?}", s);
        }

        /// `CommunityScope`: the pattern is `community::check_scope`'s rule.
        #[test]
        fn the_community_scope_schema_is_check_scope(
            prefix in prop::sample::select(vec![
                "discord:guild:", "slack:team:", "telegram:chat:", "telegram:chat:-", "", "x:y:",
            ]),
            id in prop_oneof!["[0-9]{0,4}", "[A-Za-z0-9]{0,4}", edgy()],
        ) {
            let s = format!("{prefix}{id}");
            let schema = re(COMMUNITY_SCOPE_PATTERN).is_match(&s);
            let server = hearth_runtime::community::check_scope(&s).is_ok();
            prop_assert_eq!(schema, server, "{:?}", s);
        }

        /// `AppLabel` and `GuildId`: the patterns are the apps' path checks.
        #[test]
        fn the_app_path_schemas_are_the_apps_checks(
            s in prop_oneof!["[A-Za-z0-9._+-]{0,70}", "[0-9]{0,22}", edgy()],
        ) {
            let label = hearth_runtime::apps::check_label("app", &s).is_ok();
            prop_assert_eq!(re(APP_LABEL_PATTERN).is_match(&s), label, "{:?}", s);
            let guild = hearth_runtime::apps::check_guild_id(&s).is_ok();
            prop_assert_eq!(re(GUILD_ID_PATTERN).is_match(&s), guild, "{:?}", s);
        }

        /// Not blank: the pattern finds a character `str::trim` keeps.
        #[test]
        fn the_not_blank_pattern_is_trim(s in edgy()) {
            prop_assert_eq!(re(NOT_BLANK_PATTERN).is_match(&s), !s.trim().is_empty(), "{:?}", s);
        }

        /// `roles`: whatever the server takes matches the pattern; what
        /// does not match is refused (the counts are in the description).
        #[test]
        fn the_roles_pattern_admits_what_the_server_takes(s in edgy()) {
            let server = roles_of(Some(&s)).is_ok();
            if server {
                prop_assert!(re(ROLES_PATTERN).is_match(&s), "{:?}", s);
            }
            if !re(ROLES_PATTERN).is_match(&s) {
                prop_assert!(!server, "{:?}", s);
            }
        }

        /// An `Idempotency-Key` header: the value the server reads (HTTP
        /// trims spaces) is a key exactly when the sent text matches.
        #[test]
        fn the_idempotency_header_pattern_is_what_arrives_as_a_key(s in "[ -~]{0,300}") {
            let arrives = s.trim_matches(' ');
            let server = hearth_runtime::check_key("k", arrives).is_ok();
            prop_assert_eq!(re(IDEMPOTENCY_HEADER_PATTERN).is_match(&s), server && arrives == s, "{:?}", s);
        }

        /// `UsageTime`: the server takes an age exactly when it matches the
        /// age pattern, and otherwise only an RFC 3339 date-time.
        #[test]
        fn usage_times_are_ages_or_rfc_3339(
            s in prop_oneof![edgy(), "[0-9]{0,14}[dhmw]", "today|Today|yesterday"],
        ) {
            let now = 1_700_000_000_000;
            let age = re(AGE_PATTERN).is_match(&s);
            let rfc3339 = re(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})$").is_match(&s);
            let server = parse_time(&s, now).is_ok();
            if age {
                prop_assert!(server, "{:?}", s);
            } else if server {
                prop_assert!(rfc3339, "{:?}", s);
            }
        }

        /// Every RFC 3339 date-time the document's `format` allows is taken,
        /// with the instant jiff reads from it (where jiff's range holds it).
        #[test]
        fn every_rfc_3339_date_time_is_taken(
            date in (0i16..=9999, 1i8..=12, 1i8..=31),
            time in (0u8..24, 0u8..60, 0u8..60),
            frac in prop::option::of("[0-9]{1,12}"),
            offset in prop_oneof![Just("Z".to_owned()), Just("z".to_owned()), (prop::sample::select(vec!['+', '-']), 0u8..24, 0u8..60).prop_map(|(s, h, m)| format!("{s}{h:02}:{m:02}"))],
            lower_t in any::<bool>(),
        ) {
            let (y, mo, d) = date;
            prop_assume!(jiff::civil::Date::new(y, mo, d).is_ok());
            let (h, mi, sec) = time;
            let t = if lower_t { 't' } else { 'T' };
            // Sub-millisecond digits are dropped; compare whole milliseconds.
            let exact = frac.as_ref().is_none_or(|f| f.len() <= 3);
            let frac = frac.map(|f| format!(".{f}")).unwrap_or_default();
            let s = format!("{y:04}-{mo:02}-{d:02}{t}{h:02}:{mi:02}:{sec:02}{frac}{offset}");
            let ours = parse_time(&s, 0);
            prop_assert!(ours.is_ok(), "{:?}", s);
            if exact && let Ok(j) = s.to_uppercase().parse::<jiff::Timestamp>() {
                prop_assert_eq!(ours.ok(), Some(j.as_millisecond()), "{:?}", s);
            }
        }
    }

    /// The capability schemas list every capability and preset the
    /// server knows.
    #[test]
    fn the_capability_enums_are_the_servers() {
        let grantable = serde_json::to_value(Grantable::schema()).unwrap();
        let names = grantable["anyOf"][0]["enum"].as_array().unwrap();
        for c in CAPABILITIES {
            assert!(names.contains(&serde_json::json!(c)), "{c}");
        }
        for name in names {
            let name = name.as_str().unwrap();
            assert!(
                hearth_agent::policy::parse_capability(name).is_ok(),
                "{name}"
            );
        }
        let capability = serde_json::to_value(Capability::schema()).unwrap();
        assert_eq!(
            capability["anyOf"][0]["enum"].as_array().unwrap().len(),
            CAPABILITIES.len()
        );
    }

    #[test]
    fn whole_numbers_with_a_fraction_are_integers() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(default, deserialize_with = "whole_u64")]
            n: Option<u64>,
        }
        let n = |json: &str| serde_json::from_str::<T>(json).map(|t| t.n).ok();
        assert_eq!(n(r#"{"n":5}"#), Some(Some(5)));
        assert_eq!(n(r#"{"n":5.0}"#), Some(Some(5)));
        assert_eq!(n(r#"{"n":-0.0}"#), Some(Some(0)));
        assert_eq!(n(r#"{"n":null}"#), Some(None));
        assert_eq!(n(r#"{}"#), Some(None));
        assert_eq!(n(r#"{"n":18446744073709551615}"#), Some(Some(u64::MAX)));
        for bad in [
            r#"{"n":5.5}"#,
            r#"{"n":-1}"#,
            r#"{"n":-1.0}"#,
            r#"{"n":1e300}"#,
            r#"{"n":18446744073709551616.0}"#,
            r#"{"n":"5"}"#,
        ] {
            assert_eq!(n(bad), None, "{bad}");
        }
    }
}
