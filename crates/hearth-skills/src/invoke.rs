//! A user invoking a skill directly: `/name args` at the start of a
//! message, or `$name` anywhere in it. The skill's instructions then go to
//! the model with the run's system prompt, so it need not call `skill_read`.

use std::sync::Arc;

use crate::catalog::{Catalog, Skill, Skills};

/// The user-invocable skill `text` invokes, and its arguments: the rest of
/// the message after `/name`, or the whole message for `$name`.
pub fn invoked<'a>(catalog: &'a Catalog, text: &str) -> Option<(&'a Skill, String)> {
    let usable = |name: &str| {
        catalog
            .get(name)
            .filter(|s| s.eligible && s.frontmatter.user_invocable && s.has_md())
    };
    let trimmed = text.trim_start();
    if let Some(rest) = trimmed.strip_prefix('/') {
        let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        return usable(name).map(|s| (s, args.trim().to_owned()));
    }
    let mut from = 0;
    while let Some(at) = text[from..].find('$') {
        let start = from + at;
        from = start + 1;
        if start > 0 && !text[..start].ends_with(char::is_whitespace) {
            continue;
        }
        let name: String = text[from..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')
            .collect();
        if let Some(s) = usable(&name) {
            return Some((s, text.trim().to_owned()));
        }
    }
    None
}

impl Skills {
    /// The system prompt's skills section for a run whose user message is
    /// `text`: the skill list, plus the instructions of a skill the message
    /// invokes. The common case (no invocation) is the list's own `Arc`.
    pub fn prompt_for(&self, text: &str) -> Arc<str> {
        let catalog = self.catalog();
        if !text.contains(['/', '$']) {
            return catalog.prompt.clone();
        }
        let Some((skill, args)) = invoked(&catalog, text) else {
            return catalog.prompt.clone();
        };
        // A file that vanished since the load leaves the list alone.
        let Ok(body) = skill.body() else {
            return catalog.prompt.clone();
        };
        let mut out = String::from(&*catalog.prompt);
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!("## Skill invoked by the user: {}\n", skill.name));
        if args.is_empty() {
            out.push_str("The user's message invokes this skill. Follow its instructions:\n\n");
        } else {
            out.push_str(&format!(
                "The user's message invokes this skill with the arguments: {args}\n\
                 Follow its instructions:\n\n"
            ));
        }
        out.push_str(&body);
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Host, Root, SkillsOptions, Source};

    fn skills() -> (tempfile::TempDir, Skills) {
        let t = tempfile::tempdir().unwrap();
        for (name, extra) in [
            ("deploy", ""),
            ("quiet", "user-invocable: false\n"),
            ("hidden", "disable-model-invocation: true\n"),
        ] {
            let d = t.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(
                d.join("SKILL.md"),
                format!("---\nname: {name}\ndescription: {name} things\n{extra}---\nDo {name}.\n"),
            )
            .unwrap();
        }
        let s = Skills::load(SkillsOptions {
            roots: vec![Root {
                path: t.path().into(),
                source: Source::Home,
            }],
            prompt_budget_chars: 1000,
            host: Host::default(),
            ..SkillsOptions::default()
        });
        (t, s)
    }

    #[test]
    fn slash_and_dollar_invoke_user_invocable_skills() {
        let (_t, s) = skills();
        let c = s.catalog();
        let got = |text: &str| invoked(&c, text).map(|(s, a)| (s.name.clone(), a));
        assert_eq!(
            got("/deploy prod  now"),
            Some(("deploy".into(), "prod  now".into()))
        );
        assert_eq!(got("  /deploy"), Some(("deploy".into(), String::new())));
        assert_eq!(
            got("please $deploy to prod"),
            Some(("deploy".into(), "please $deploy to prod".into()))
        );
        // A skill the model is not told about can still be invoked by the user.
        assert_eq!(got("/hidden"), Some(("hidden".into(), String::new())));
        for none in [
            "/quiet x",
            "/nope",
            "deploy",
            "US$deploy",
            "/ deploy",
            "$",
            "cost: $5",
            "/",
        ] {
            assert_eq!(got(none), None, "{none}");
        }
    }

    #[test]
    fn the_prompt_carries_the_invoked_skill_and_is_shared_otherwise() {
        let (_t, s) = skills();
        let plain = s.prompt_for("hello");
        assert!(Arc::ptr_eq(&plain, &s.catalog().prompt));
        assert!(Arc::ptr_eq(&s.prompt_for("a/b $5"), &s.catalog().prompt));
        let p = s.prompt_for("/deploy prod");
        assert!(p.starts_with(&*plain), "{p}");
        assert!(
            p.ends_with(
                "## Skill invoked by the user: deploy\nThe user's message invokes this skill \
                 with the arguments: prod\nFollow its instructions:\n\nDo deploy.\n"
            ),
            "{p}"
        );
    }
}
