//! `hearth permissions ...` and `hearth audit`.

use hearth_runtime::policy::{CAPABILITIES, GLOBAL_SCOPE, PRESET_PREFIX, Preset};
use hearth_server::dto::{AuditEvents, CheckResult, GrantView, Permissions, RemovedGrant};
use reqwest::Method;
use serde_json::json;

use super::{Api, enc};
use crate::Exit;
use crate::cli::PermissionsCommand;
use crate::output::{print_json, table};

const GRANTS: &str = "/v1/permissions/grants";

/// Grants, revokes, lists and checks capabilities.
pub(super) async fn permissions(
    api: &Api,
    command: PermissionsCommand,
    json_out: bool,
) -> Result<(), Exit> {
    match command {
        PermissionsCommand::Grant {
            subject,
            capability,
            scope,
        } => {
            let subject = subject_of(&subject);
            let body = json!({ "subject": subject, "capability": capability, "scope": scope });
            let g: GrantView = api.post(GRANTS, &body).await?;
            if json_out {
                print_json(&g);
            } else {
                println!("granted {} to {} in {}", g.capability, g.subject, g.scope);
            }
        }
        PermissionsCommand::Revoke {
            subject,
            capability,
            scope,
        } => {
            let subject = subject_of(&subject);
            let body = json!({ "subject": subject, "capability": capability, "scope": scope });
            let r: RemovedGrant = api
                .call(api.request(Method::DELETE, GRANTS).json(&body))
                .await?;
            if json_out {
                print_json(&r);
            } else {
                let g = &r.removed;
                println!("revoked {} from {} in {}", g.capability, g.subject, g.scope);
            }
        }
        PermissionsCommand::List { scope } => {
            let p: Permissions = api
                .get(&format!("/v1/permissions?scope={}", enc(&scope)))
                .await?;
            if json_out {
                print_json(&p);
                return Ok(());
            }
            println!("scope {}, default preset {}", p.scope, p.default_preset);
            if p.grants.is_empty() {
                println!("no grants");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = p
                .grants
                .into_iter()
                .map(|g| vec![g.subject, g.capability, g.granted_at])
                .collect();
            println!(
                "{}",
                table(&["subject", "capability", "granted"], &[false; 3], &rows)
            );
        }
        PermissionsCommand::Check {
            user_key,
            capability,
            scope,
            roles,
        } => {
            let user_key = user_key_of(&user_key).to_owned();
            let c = check(api, &user_key, &capability, &scope, &roles).await?;
            if json_out {
                print_json(&c);
                return Ok(());
            }
            let why = Why::read(api, &scope).await?;
            let roles: Vec<&str> = roles.split(',').filter(|r| !r.is_empty()).collect();
            println!("{}", why.explain(&user_key, &roles, &capability, &c));
        }
    }
    Ok(())
}

/// A grant's subject from any form hearth shows a user in: a bare user key
/// (`cli:user:local`, as in messages and the audit log), `user:<user_key>`
/// (as in `permissions list`), or `role:<id>`.
pub(super) fn subject_of(raw: &str) -> String {
    if raw.starts_with("user:") || raw.starts_with("role:") {
        raw.to_owned()
    } else {
        format!("user:{raw}")
    }
}

/// A user key from either form: `cli:user:local` or `user:cli:user:local`.
fn user_key_of(raw: &str) -> &str {
    raw.strip_prefix("user:").unwrap_or(raw)
}

async fn check(
    api: &Api,
    user_key: &str,
    capability: &str,
    scope: &str,
    roles: &str,
) -> Result<CheckResult, Exit> {
    api.get(&format!(
        "/v1/permissions/check?user_key={}&capability={}&scope={}&roles={}",
        enc(user_key),
        enc(capability),
        enc(scope),
        enc(roles)
    ))
    .await
}

/// What explains a verdict: the default preset and the grants that apply.
struct Why {
    scope: String,
    default_preset: String,
    /// The scope's grants, and the global ones when the scope is a space.
    grants: Vec<GrantView>,
}

impl Why {
    async fn read(api: &Api, scope: &str) -> Result<Self, Exit> {
        let p: Permissions = api
            .get(&format!("/v1/permissions?scope={}", enc(scope)))
            .await?;
        let mut grants = p.grants;
        if scope != GLOBAL_SCOPE {
            let g: Permissions = api
                .get(&format!("/v1/permissions?scope={GLOBAL_SCOPE}"))
                .await?;
            grants.extend(g.grants);
        }
        Ok(Self {
            scope: p.scope,
            default_preset: p.default_preset,
            grants,
        })
    }

    /// The grants to `user_key` or its `roles` that give `capability`.
    fn deciding(&self, user_key: &str, roles: &[&str], capability: &str) -> Vec<&GrantView> {
        let user = format!("user:{user_key}");
        self.grants
            .iter()
            .filter(|g| {
                g.subject == user
                    || g.subject
                        .strip_prefix("role:")
                        .is_some_and(|r| roles.contains(&r))
            })
            .filter(|g| {
                g.capability == capability
                    || g.capability
                        .strip_prefix(PRESET_PREFIX)
                        .and_then(Preset::parse)
                        .is_some_and(|p| p.contains(capability))
            })
            .collect()
    }

    /// One sentence: the verdict and what decided it.
    fn explain(&self, user_key: &str, roles: &[&str], capability: &str, c: &CheckResult) -> String {
        let scope = &self.scope;
        match c.via.as_deref() {
            Some("admin") => format!(
                "allowed: {user_key} is an admin (listed in [permissions] admins, or a \
                 channel's admin such as a Discord guild owner), who holds every capability"
            ),
            Some("preset") => format!(
                "allowed: the default preset `{}` ([permissions] default_preset) includes \
                 {capability}",
                self.default_preset
            ),
            Some("grant") => {
                let found: Vec<String> = self
                    .deciding(user_key, roles, capability)
                    .iter()
                    .map(|g| format!("{} to {} in {}", g.capability, g.subject, g.scope))
                    .collect();
                if found.is_empty() {
                    format!(
                        "allowed: by a grant in {scope} (`hearth permissions list --scope {scope}`)"
                    )
                } else {
                    format!("allowed: by the grant of {}", found.join(", and of "))
                }
            }
            Some(other) => format!("allowed (via {other})"),
            None if c.allowed => "allowed".to_owned(),
            None => format!(
                "denied: {user_key} is not an admin, the default preset `{}` does not include \
                 {capability}, and no grant to the user or its roles in {scope} gives it; \
                 grant it with `hearth permissions grant {user_key} {capability} --scope {scope}`",
                self.default_preset
            ),
        }
    }
}

/// The capabilities of `GET /v1/tools` (the server's type is
/// serialise-only).
#[derive(serde::Deserialize)]
struct ToolCaps {
    tools: Vec<ToolCap>,
}

#[derive(serde::Deserialize)]
struct ToolCap {
    capability: Option<String>,
}

/// `hearth whoami`: the user the CLI acts as, and each capability it holds
/// or not, with what decided.
pub(super) async fn whoami(api: &Api, user: &str, scope: &str, json_out: bool) -> Result<(), Exit> {
    let user_key = user_key_of(user);
    let why = Why::read(api, scope).await?;
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    // hearth's own capabilities, then those the tools add (an MCP server's
    // `mcp.<server>`).
    let tools: ToolCaps = api.get("/v1/tools").await?;
    let mut caps: Vec<String> = CAPABILITIES.iter().map(|c| (*c).to_owned()).collect();
    for cap in tools.tools.into_iter().filter_map(|t| t.capability) {
        if !caps.contains(&cap) {
            caps.push(cap);
        }
    }
    for cap in &caps {
        let cap = cap.as_str();
        let c = check(api, user_key, cap, scope, "").await?;
        rows.push(vec![
            cap.to_owned(),
            if c.allowed { "yes" } else { "no" }.to_owned(),
            if c.allowed {
                why.explain(user_key, &[], cap, &c)
                    .split_once(": ")
                    .map_or_else(String::new, |(_, r)| r.to_owned())
            } else {
                // One line per capability: the full sentence (and the
                // command that grants it) is `permissions check`'s.
                format!(
                    "not an admin, not in the default preset `{}`, no grant in {}",
                    why.default_preset, why.scope
                )
            },
        ]);
        verdicts.push(json!({"capability": cap, "allowed": c.allowed, "via": c.via}));
    }
    let token = if api.token.is_some() {
        "an API token (operator: the token holder may call every route)"
    } else {
        "no API token (accepted while hearth serves on loopback without tokens)"
    };
    if json_out {
        print_json(&json!({
            "user_key": user_key,
            "scope": why.scope,
            "default_preset": why.default_preset,
            "token": api.token.is_some(),
            "capabilities": verdicts,
        }));
        return Ok(());
    }
    println!("user      {user_key} (what `hearth message` sends as; --user to look at another)");
    println!("server    {} with {token}", api.base);
    println!(
        "scope     {}, default preset {}",
        why.scope, why.default_preset
    );
    println!();
    println!(
        "{}",
        table(&["capability", "held", "why"], &[false; 3], &rows)
    );
    Ok(())
}

/// The audit log, newest first.
pub(super) async fn audit(api: &Api, limit: u32, json_out: bool) -> Result<(), Exit> {
    let a: AuditEvents = api.get(&format!("/v1/audit?limit={limit}")).await?;
    if json_out {
        print_json(&a);
        return Ok(());
    }
    if a.events.is_empty() {
        println!("no audit events");
        return Ok(());
    }
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
    let rows: Vec<Vec<String>> = a
        .events
        .into_iter()
        .map(|e| {
            vec![
                e.at,
                e.actor,
                e.action,
                e.target,
                e.outcome,
                dash(e.capability),
                dash(e.scope),
            ]
        })
        .collect();
    let headers = [
        "at",
        "actor",
        "action",
        "target",
        "outcome",
        "capability",
        "scope",
    ];
    println!("{}", table(&headers, &[false; 7], &rows));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_a_user_or_role_names_the_same_subject() {
        for (raw, subject) in [
            ("cli:user:local", "user:cli:user:local"),
            ("user:cli:user:local", "user:cli:user:local"),
            ("telegram:user:42", "user:telegram:user:42"),
            ("role:777", "role:777"),
        ] {
            assert_eq!(subject_of(raw), subject, "{raw}");
        }
        assert_eq!(user_key_of("user:cli:user:local"), "cli:user:local");
        assert_eq!(user_key_of("cli:user:local"), "cli:user:local");
    }

    #[test]
    fn a_granted_preset_that_holds_the_capability_is_named_as_the_reason() {
        let grant = |subject: &str, capability: &str| GrantView {
            subject: subject.into(),
            capability: capability.into(),
            scope: "global".into(),
            granted_at: "2026-01-01T00:00:00Z".into(),
        };
        let why = Why {
            scope: "global".into(),
            default_preset: "none".into(),
            grants: vec![
                grant("user:a:user:1", "preset:trusted"),
                grant("role:9", "web.fetch"),
                grant("user:b:user:2", "jobs.manage"),
            ],
        };
        let allowed = CheckResult {
            allowed: true,
            via: Some("grant".into()),
        };
        assert_eq!(
            why.explain("a:user:1", &[], "jobs.manage", &allowed),
            "allowed: by the grant of preset:trusted to user:a:user:1 in global"
        );
        assert_eq!(
            why.explain("c:user:3", &["9"], "web.fetch", &allowed),
            "allowed: by the grant of web.fetch to role:9 in global"
        );
    }
}
