//! The permission model's decisions (`hearth_agent::policy`).

// clippy's allow-unwrap-in-tests covers only `#[test]` bodies, not helpers.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] fns unwrap what the test set up"
)]

use hearth_agent::policy::{
    CAPABILITIES, CapabilityName, Decision, PolicyConfig, PolicyError, Preset, Subject, Via,
    decide, known_capability_names, parse_capability, parse_subject, scope_chain, subjects,
    validate_scope,
};
use hearth_store::{Durability, Grant, GrantStore, SqliteStore};
use serde_json::json;

const USER: &str = "discord:42";
const GUILD_1: &str = "discord:guild:1";
const GUILD_2: &str = "discord:guild:2";

fn grant(subject: &str, capability: &str, scope: &str) -> Grant {
    Grant {
        subject: subject.to_owned(),
        capability: capability.to_owned(),
        scope: scope.to_owned(),
        granted_at: 1,
        granted_by: "operator".to_owned(),
    }
}

fn cfg(default_preset: Preset) -> PolicyConfig {
    PolicyConfig {
        default_preset,
        admins: Vec::new(),
    }
}

fn roles(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

/// What the caller loads for a check: the grants of the user's subjects in
/// the scope chain (the in-memory twin of `Store::grants_for`).
fn load(all: &[Grant], user_key: &str, roles: &[String], scope: &str) -> Vec<Grant> {
    let subjects = subjects(user_key, roles);
    let chain = scope_chain(scope).unwrap();
    all.iter()
        .filter(|g| subjects.contains(&g.subject) && chain.contains(&g.scope))
        .cloned()
        .collect()
}

const DENIED: Decision = Decision {
    allowed: false,
    via: None,
};

fn allowed(via: Via) -> Decision {
    Decision {
        allowed: true,
        via: Some(via),
    }
}

/// The capabilities API.md documents (and `permissions.bypass`, issue 21), checked by what the policy does
/// with them (not by comparing the constant with a copy of itself): each can
/// be granted, a grant of one allows that one and no other, the admin preset
/// holds them all, and a near-miss name is neither grantable nor allowed.
#[test]
fn the_documented_capabilities_are_grantable_and_nothing_else_is() {
    let documented = [
        "memory.read",
        "memory.write",
        "web.fetch",
        "web.search",
        "permissions.manage",
        "confirmations.resolve_any",
        "agent.analytics",
        "llm.configure",
        "jobs.manage",
        "skills.read",
        "skills.use",
        "permissions.bypass",
        "agents.delegate",
    ];
    let none = cfg(Preset::None);
    let admin = cfg(Preset::Admin);
    let user = format!("user:{USER}");
    for cap in documented {
        assert_eq!(
            parse_capability(cap).unwrap(),
            CapabilityName::Capability(cap)
        );
        let grants = [grant(&user, cap, "global")];
        for other in documented {
            let want = if other == cap {
                allowed(Via::Grant)
            } else {
                DENIED
            };
            assert_eq!(
                decide(&none, USER, &[], other, &grants),
                want,
                "a grant of {cap}, asked for {other}"
            );
        }
        assert_eq!(
            decide(&admin, USER, &[], cap, &[]),
            allowed(Via::Preset),
            "{cap}"
        );
    }
    for near_miss in ["memory", "memory.reads", "Web.fetch", "skills.use ", "jobs"] {
        assert!(parse_capability(near_miss).is_err(), "{near_miss:?}");
        let grants = [grant(&user, near_miss, "global")];
        assert_eq!(decide(&admin, USER, &[], near_miss, &grants), DENIED);
    }
}

#[test]
fn presets_hold_what_api_md_says() {
    let member = [
        "memory.read",
        "memory.write",
        "web.fetch",
        "web.search",
        "skills.read",
        "agents.delegate",
    ];
    let trusted_extra = ["jobs.manage", "skills.use"];
    assert!(Preset::None.capabilities().is_empty());
    assert_eq!(Preset::Member.capabilities(), member);
    let mut trusted: Vec<&str> = member.to_vec();
    trusted.extend(trusted_extra);
    assert_eq!(Preset::Trusted.capabilities(), trusted.as_slice());
    assert_eq!(Preset::Admin.capabilities(), CAPABILITIES);

    for preset in Preset::ALL {
        assert_eq!(Preset::parse(preset.as_str()), Some(preset));
        assert_eq!(preset.to_string(), preset.as_str());
    }
    assert_eq!(
        Preset::ALL.map(Preset::as_str),
        ["none", "member", "trusted", "admin"]
    );
    assert_eq!(Preset::parse("Member"), None);
    assert_eq!(Preset::parse(""), None);
    assert_eq!(Preset::default(), Preset::Member);
    assert_eq!(PolicyConfig::default().default_preset, Preset::Member);
}

#[test]
fn every_default_preset_decides_every_capability() {
    for preset in Preset::ALL {
        let cfg = cfg(preset);
        for &cap in CAPABILITIES {
            let want = if preset.capabilities().contains(&cap) {
                allowed(Via::Preset)
            } else {
                DENIED
            };
            assert_eq!(decide(&cfg, USER, &[], cap, &[]), want, "{preset} / {cap}");
        }
    }
    // Spot checks of the boundaries.
    let member = cfg(Preset::Member);
    assert_eq!(
        decide(&member, USER, &[], "web.search", &[]),
        allowed(Via::Preset)
    );
    assert_eq!(decide(&member, USER, &[], "jobs.manage", &[]), DENIED);
    let trusted = cfg(Preset::Trusted);
    assert_eq!(
        decide(&trusted, USER, &[], "skills.use", &[]),
        allowed(Via::Preset)
    );
    assert_eq!(decide(&trusted, USER, &[], "llm.configure", &[]), DENIED);
    let admin = cfg(Preset::Admin);
    assert_eq!(
        decide(&admin, USER, &[], "permissions.manage", &[]),
        allowed(Via::Preset)
    );
}

#[test]
fn admins_hold_everything_before_preset_and_grants() {
    let cfg = PolicyConfig {
        default_preset: Preset::Member,
        admins: vec!["discord:1".to_owned(), USER.to_owned()],
    };
    assert!(cfg.is_admin(USER));
    let grants = [grant(&format!("user:{USER}"), "llm.configure", "global")];
    for &cap in CAPABILITIES {
        // Also capabilities the preset holds or a grant gives: admin wins.
        assert_eq!(
            decide(&cfg, USER, &[], cap, &grants),
            allowed(Via::Admin),
            "{cap}"
        );
    }
    // With the `none` preset an admin still holds everything.
    let none = PolicyConfig {
        default_preset: Preset::None,
        admins: vec![USER.to_owned()],
    };
    assert_eq!(
        decide(&none, USER, &[], "memory.read", &[]),
        allowed(Via::Admin)
    );
    // Admin is by exact user key.
    assert_eq!(decide(&none, "discord:4", &[], "memory.read", &[]), DENIED);
    assert_eq!(decide(&none, "Discord:42", &[], "memory.read", &[]), DENIED);
}

#[test]
fn the_preset_comes_before_a_grant() {
    let cfg = cfg(Preset::Member);
    let grants = [grant(&format!("user:{USER}"), "web.fetch", "global")];
    assert_eq!(
        decide(&cfg, USER, &[], "web.fetch", &grants),
        allowed(Via::Preset)
    );
}

#[test]
fn grants_to_the_user_or_a_role_allow_via_grant() {
    let cfg = cfg(Preset::None);
    let user_grant = [grant(&format!("user:{USER}"), "jobs.manage", GUILD_1)];
    assert_eq!(
        decide(&cfg, USER, &[], "jobs.manage", &user_grant),
        allowed(Via::Grant)
    );
    assert_eq!(decide(&cfg, USER, &[], "skills.use", &user_grant), DENIED);

    let role_grant = [grant("role:mods", "llm.configure", GUILD_1)];
    let mods = roles(&["everyone", "mods"]);
    assert_eq!(
        decide(&cfg, USER, &mods, "llm.configure", &role_grant),
        allowed(Via::Grant)
    );
    // Without that role the same grant does nothing.
    assert_eq!(
        decide(
            &cfg,
            USER,
            &roles(&["everyone"]),
            "llm.configure",
            &role_grant
        ),
        DENIED
    );
}

#[test]
fn grants_to_other_subjects_or_of_unknown_names_are_ignored() {
    let cfg = cfg(Preset::None);
    let grants = [
        grant("user:discord:43", "jobs.manage", "global"),
        // A role id that equals the user key is not the user.
        grant(&format!("role:{USER}"), "jobs.manage", "global"),
        // The user key as a bare string is not a subject.
        grant(USER, "jobs.manage", "global"),
        grant(&format!("user:{USER}"), "jobs.everything", "global"),
        grant(&format!("user:{USER}"), "preset:superuser", "global"),
    ];
    for &cap in CAPABILITIES {
        assert_eq!(decide(&cfg, USER, &[], cap, &grants), DENIED, "{cap}");
    }
}

#[test]
fn granted_presets_give_their_capabilities_via_grant() {
    let cfg = cfg(Preset::None);
    let grants = [grant("role:regulars", "preset:trusted", GUILD_1)];
    let regulars = roles(&["regulars"]);
    for &cap in CAPABILITIES {
        let want = if Preset::Trusted.contains(cap) {
            allowed(Via::Grant)
        } else {
            DENIED
        };
        assert_eq!(decide(&cfg, USER, &regulars, cap, &grants), want, "{cap}");
    }

    let admin_preset = [grant(&format!("user:{USER}"), "preset:admin", "global")];
    for &cap in CAPABILITIES {
        // A granted admin preset is a grant, not the admin list.
        assert_eq!(
            decide(&cfg, USER, &[], cap, &admin_preset),
            allowed(Via::Grant),
            "{cap}"
        );
    }

    let none_preset = [grant(&format!("user:{USER}"), "preset:none", "global")];
    assert_eq!(decide(&cfg, USER, &[], "memory.read", &none_preset), DENIED);

    // Under the member default, member's capabilities stay via preset and
    // trusted's extras come via the grant.
    let member = self::cfg(Preset::Member);
    assert_eq!(
        decide(&member, USER, &regulars, "memory.read", &grants),
        allowed(Via::Preset)
    );
    assert_eq!(
        decide(&member, USER, &regulars, "skills.use", &grants),
        allowed(Via::Grant)
    );
}

#[test]
fn an_unknown_capability_is_denied_to_everyone() {
    let cfg = PolicyConfig {
        default_preset: Preset::Admin,
        admins: vec![USER.to_owned()],
    };
    let grants = [grant(&format!("user:{USER}"), "preset:admin", "global")];
    for name in ["web.fetchx", "", "preset:admin", "WEB.FETCH", "*"] {
        assert_eq!(decide(&cfg, USER, &[], name, &grants), DENIED, "{name:?}");
    }
}

#[test]
fn scope_chain_adds_global() {
    assert_eq!(scope_chain("global").unwrap(), vec!["global"]);
    assert_eq!(scope_chain(GUILD_1).unwrap(), vec![GUILD_1, "global"]);
    assert_eq!(
        scope_chain("telegram:chat:-100123").unwrap(),
        vec!["telegram:chat:-100123", "global"]
    );
    // The id may itself contain colons.
    assert_eq!(
        scope_chain("matrix:room:!abc:example.org").unwrap(),
        vec!["matrix:room:!abc:example.org", "global"]
    );
}

#[test]
fn a_global_grant_counts_in_a_guild_but_a_guild_grant_stays_in_its_guild() {
    let cfg = cfg(Preset::None);
    let mods = roles(&["mods"]);
    let all = [
        grant(&format!("user:{USER}"), "web.fetch", "global"),
        grant("role:mods", "jobs.manage", GUILD_1),
        grant(&format!("user:{USER}"), "preset:trusted", GUILD_1),
    ];
    let check = |scope: &str, cap: &str| {
        let loaded = load(&all, USER, &mods, scope);
        decide(&cfg, USER, &mods, cap, &loaded)
    };
    // The global grant counts everywhere.
    for scope in ["global", GUILD_1, GUILD_2] {
        assert_eq!(check(scope, "web.fetch"), allowed(Via::Grant), "{scope}");
    }
    // Guild 1's grants count only in guild 1.
    assert_eq!(check(GUILD_1, "jobs.manage"), allowed(Via::Grant));
    assert_eq!(check(GUILD_1, "memory.write"), allowed(Via::Grant));
    for scope in ["global", GUILD_2] {
        assert_eq!(check(scope, "jobs.manage"), DENIED, "{scope}");
        assert_eq!(check(scope, "memory.write"), DENIED, "{scope}");
    }
}

#[tokio::test]
async fn the_scope_chain_loads_the_right_grants_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("hearth.db"), Durability::Normal).unwrap();
    for g in [
        grant(&format!("user:{USER}"), "web.fetch", "global"),
        grant("role:mods", "jobs.manage", GUILD_1),
        grant("role:mods", "skills.use", GUILD_2),
        grant("user:someone-else", "llm.configure", "global"),
    ] {
        store.add_grant(g).await.unwrap();
    }
    let cfg = cfg(Preset::None);
    let mods = roles(&["mods"]);
    let subjects = subjects(USER, &mods);
    let in_guild_1 = store
        .grants_for(&subjects, &scope_chain(GUILD_1).unwrap())
        .await
        .unwrap();
    assert_eq!(in_guild_1.len(), 2);
    assert_eq!(
        decide(&cfg, USER, &mods, "jobs.manage", &in_guild_1),
        allowed(Via::Grant)
    );
    assert_eq!(
        decide(&cfg, USER, &mods, "web.fetch", &in_guild_1),
        allowed(Via::Grant)
    );
    assert_eq!(decide(&cfg, USER, &mods, "skills.use", &in_guild_1), DENIED);
    assert_eq!(
        decide(&cfg, USER, &mods, "llm.configure", &in_guild_1),
        DENIED
    );

    let global = store
        .grants_for(&subjects, &scope_chain("global").unwrap())
        .await
        .unwrap();
    assert_eq!(global.len(), 1);
    assert_eq!(decide(&cfg, USER, &mods, "jobs.manage", &global), DENIED);
}

#[test]
fn subjects_are_the_user_then_each_role() {
    assert_eq!(
        subjects("api:user:anonymous", &roles(&["1", "2"])),
        vec!["user:api:user:anonymous", "role:1", "role:2"]
    );
    assert_eq!(subjects(USER, &[]), vec!["user:discord:42"]);
    // Every subject it gives parses back.
    for s in subjects(USER, &roles(&["mods"])) {
        assert_eq!(parse_subject(&s).unwrap().to_string(), s);
    }
}

#[test]
fn capability_names_parse_to_capabilities_or_presets() {
    for &cap in CAPABILITIES {
        let parsed = parse_capability(cap).unwrap();
        assert_eq!(parsed, CapabilityName::Capability(cap));
        assert_eq!(parsed.to_string(), cap);
        assert!(parsed.includes(cap));
    }
    for preset in Preset::ALL {
        let name = format!("preset:{preset}");
        let parsed = parse_capability(&name).unwrap();
        assert_eq!(parsed, CapabilityName::Preset(preset));
        assert_eq!(parsed.to_string(), name);
    }
    assert!(
        parse_capability("preset:trusted")
            .unwrap()
            .includes("jobs.manage")
    );
    assert!(
        !parse_capability("preset:trusted")
            .unwrap()
            .includes("llm.configure")
    );
    assert!(
        !parse_capability("web.fetch")
            .unwrap()
            .includes("web.search")
    );
}

#[test]
fn unknown_capabilities_are_errors_that_list_the_known_ones() {
    for name in [
        "web.fetchx",
        "",
        "Web.Fetch",
        " web.fetch",
        "preset:",
        "preset:root",
        "preset:Member",
        "member",
        "web",
    ] {
        let err = parse_capability(name).unwrap_err();
        assert_eq!(err, PolicyError::UnknownCapability(name.to_owned()));
        let message = err.to_string();
        assert!(message.contains("unknown capability"), "{message}");
        for &cap in CAPABILITIES {
            assert!(message.contains(cap), "{message} lacks {cap}");
        }
        assert!(message.contains("preset:trusted"), "{message}");
    }
    assert!(known_capability_names().starts_with("memory.read, memory.write"));
    assert!(known_capability_names().ends_with("preset:admin"));
}

#[test]
fn subjects_parse_and_bad_ones_are_rejected() {
    assert_eq!(
        parse_subject("user:discord:42").unwrap(),
        Subject::User("discord:42".to_owned())
    );
    assert_eq!(
        parse_subject("role:123").unwrap(),
        Subject::Role("123".to_owned())
    );
    assert_eq!(parse_subject("role:123").unwrap().to_string(), "role:123");
    let longest = format!("user:{}", "é".repeat(251));
    assert_eq!(longest.chars().count(), 256);
    assert!(parse_subject(&longest).is_ok());

    let too_long = format!("user:{}", "a".repeat(252));
    for bad in [
        "",
        "user",
        "user:",
        "role:",
        "group:x",
        "User:x",
        ":x",
        "user:a\nb",
        "role:\u{7}",
        "user:tab\there",
        too_long.as_str(),
    ] {
        match parse_subject(bad) {
            Err(PolicyError::BadSubject { subject, .. }) => assert_eq!(subject, bad),
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    let message = parse_subject("group:x").unwrap_err().to_string();
    assert!(
        message.contains("user:<user_key> or role:<id>"),
        "{message}"
    );
}

#[test]
fn bad_scopes_are_rejected() {
    for good in ["global", GUILD_1, "slack:channel:C0123", "irc:chan:#hearth"] {
        validate_scope(good).unwrap();
    }
    let too_long = format!("discord:guild:{}", "1".repeat(243));
    for bad in [
        "",
        "Global",
        "global ",
        "GLOBAL",
        "discord",
        "discord:guild",
        "discord:guild:",
        ":guild:1",
        "discord::1",
        "Discord:guild:1",
        "discord:guild:1\n",
        "discord:guild:1 2",
        "disc ord:guild:1",
        too_long.as_str(),
    ] {
        match scope_chain(bad) {
            Err(PolicyError::BadScope { scope, .. }) => assert_eq!(scope, bad),
            other => panic!("{bad:?} gave {other:?}"),
        }
        assert!(validate_scope(bad).is_err(), "{bad:?}");
    }
    let message = scope_chain("discord").unwrap_err().to_string();
    assert!(
        message.contains("global or <channel>:<kind>:<id>"),
        "{message}"
    );
}

#[test]
fn via_values_are_exactly_those_of_api_md() {
    assert_eq!(Via::Admin.as_str(), "admin");
    assert_eq!(Via::Preset.as_str(), "preset");
    assert_eq!(Via::Grant.as_str(), "grant");
    assert_eq!(Via::Grant.to_string(), "grant");

    let admin_cfg = PolicyConfig {
        default_preset: Preset::Member,
        admins: vec![USER.to_owned()],
    };
    let grants = [grant("user:discord:7", "jobs.manage", "global")];
    let cases = [
        (
            decide(&admin_cfg, USER, &[], "jobs.manage", &[]),
            json!({"allowed": true, "via": "admin"}),
        ),
        (
            decide(&admin_cfg, "discord:7", &[], "memory.read", &grants),
            json!({"allowed": true, "via": "preset"}),
        ),
        (
            decide(&admin_cfg, "discord:7", &[], "jobs.manage", &grants),
            json!({"allowed": true, "via": "grant"}),
        ),
        (
            decide(&admin_cfg, "discord:7", &[], "llm.configure", &grants),
            json!({"allowed": false, "via": null}),
        ),
    ];
    for (decision, want) in cases {
        assert_eq!(serde_json::to_value(decision).unwrap(), want);
        // `via` is present exactly when allowed.
        assert_eq!(decision.allowed, decision.via.is_some());
    }
    assert_eq!(Decision::DENIED, DENIED);
}

#[test]
fn a_configured_mcp_servers_capability_is_grantable_and_others_are_not() {
    use hearth_agent::policy::parse_grantable;
    let extra = std::collections::BTreeMap::from([("mcp.fs".to_owned(), Preset::Trusted)]);
    assert_eq!(parse_grantable("mcp.fs", &extra).unwrap(), "mcp.fs");
    assert_eq!(parse_grantable("web.fetch", &extra).unwrap(), "web.fetch");
    assert_eq!(
        parse_grantable("preset:member", &extra).unwrap(),
        "preset:member"
    );
    for name in ["mcp.other", "mcp.", "mcp.FS", "mcp.fs ", "skills.use.x"] {
        assert_eq!(
            parse_grantable(name, &extra),
            Err(PolicyError::UnknownCapability(name.to_owned())),
            "{name}"
        );
    }
    // Without the server configured it is not grantable.
    assert!(parse_grantable("mcp.fs", &Default::default()).is_err());
}
