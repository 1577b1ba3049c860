//! `hearth permissions ...` and `hearth audit`.

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
            let c: CheckResult = api
                .get(&format!(
                    "/v1/permissions/check?user_key={}&capability={}&scope={}&roles={}",
                    enc(&user_key),
                    enc(&capability),
                    enc(&scope),
                    enc(&roles)
                ))
                .await?;
            if json_out {
                print_json(&c);
            } else if c.allowed {
                println!("allowed (via {})", c.via.as_deref().unwrap_or("?"));
            } else {
                println!("denied");
            }
        }
    }
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
